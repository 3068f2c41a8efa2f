"""Scenario × seed × agent runs, one after another or in parallel processes.

Every run is independent: `run_one` builds its own encoder, reasoner and agent from the
preset name and plays, so a run gives the same rounds in any process. `Runs` hands the
results back in the serial order and stops after the first run that failed, so the run
log of a parallel comparison equals the serial one but for timings.
"""

from __future__ import annotations

import multiprocessing
import sys
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from eval.presets import PRESETS, build_agent
from eval.runner import Playthrough, play
from scenarios import Scenario

if TYPE_CHECKING:
    from agent.llm import CachedLLMReasoner
    from agent.reasoner import Reasoner
    from memory.timeline import Encoder

EXECUTORS = ("process", "ray")


@dataclass(frozen=True)
class RunSpec:
    """One run to play; everything a fresh process needs."""

    scenario: Scenario  # the loaded scenario (a picklable value)
    seed: int  # simulator seed
    agent: str  # preset name
    mode: str = "heuristic"  # "heuristic", "claude" or "openai"
    model: str | None = None  # LLM model id
    cache: str | None = None  # LLM response cache directory
    base_url: str | None = None  # OpenAI-compatible server (openai mode)
    store: str | None = None  # SQLite file of the episodic agent's memory
    principal: str = "agent"  # tenant name of the run's memory
    encoder: str = "hashing"  # `memory.timeline.named_encoder` name, shared by the reasoner and the memories

    def describe(self) -> str:
        """Scenario, seed and agent, for progress and error messages."""
        return f"{self.scenario.name} seed {self.seed} {self.agent}"


@dataclass
class RunResult:
    """What one run produced; ``error`` says what stopped it early."""

    spec: RunSpec  # the run
    rounds: list[dict[str, Any]] = field(default_factory=list)  # completed rounds as run-log records
    layers: dict[str, Any] | None = None  # layer quality (episodic agents)
    error: str | None = None  # "Type: message" when the run failed


def build_reasoner(
    mode: str,
    encoder: Encoder,
    *,
    model: str | None = None,
    cache: str | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
) -> Reasoner:
    """The reasoner every agent of a comparison shares (LLM modes raise MissingKey without a key or cache)."""
    if mode == "heuristic":
        from agent.heuristic import HeuristicReasoner

        return HeuristicReasoner(encoder)
    return build_llm_reasoner(mode, model=model, cache=cache, base_url=base_url, api_key=api_key)


def build_llm_reasoner(
    mode: str,
    *,
    model: str | None = None,
    cache: str | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
) -> CachedLLMReasoner:
    """The reasoner of an LLM mode ("openai", else Claude); raises MissingKey when the mode cannot start.

    The API key defaults to the mode's environment variable (OPENAI_API_KEY, ANTHROPIC_API_KEY).
    """
    import os

    if mode == "openai":
        from agent.openai import OpenAIReasoner

        return OpenAIReasoner(
            model=model or "",  # none: OpenAIReasoner raises MissingKey asking for --model
            base_url=base_url,
            cache_dir=cache,
            api_key=api_key if api_key is not None else os.environ.get("OPENAI_API_KEY"),
        )
    from agent.claude import DEFAULT_MODEL, ClaudeReasoner

    return ClaudeReasoner(
        model=model or DEFAULT_MODEL,
        cache_dir=cache,
        api_key=api_key if api_key is not None else os.environ.get("ANTHROPIC_API_KEY"),
    )


def run_one(spec: RunSpec) -> RunResult:
    """Build the agent `spec` names and play it; failures come back as ``error`` with the rounds completed."""
    from memory.timeline import named_encoder

    outcome = Playthrough()
    result = RunResult(spec)
    try:
        encoder = named_encoder(spec.encoder)
        reasoner = build_reasoner(spec.mode, encoder, model=spec.model, cache=spec.cache, base_url=spec.base_url)
        agent = build_agent(
            PRESETS[spec.agent],
            reasoner,
            encoder,
            store_path=spec.store if spec.agent == "episodic" else None,
            principal=spec.principal,
        )
        play(spec.scenario, spec.seed, agent, outcome)
    except Exception as exc:  # reported with the scenario and seed; the traceback is ours to debug
        result.error = f"{type(exc).__name__}: {exc}"
    result.rounds = [r.to_json() for r in outcome.rounds]
    result.layers = outcome.layers
    return result


class Runs:
    """Runs `specs` on `jobs` workers; iterate `results()` inside ``with``.

    The workers start on ``with`` (before any progress display starts its thread, since
    the process pool forks). `on_done` is called in the caller's process as each run ends,
    in completion order.
    """

    def __init__(
        self,
        specs: Sequence[RunSpec],
        *,
        jobs: int = 1,
        executor: str = "process",
        on_done: Callable[[RunResult], None] = lambda result: None,
    ) -> None:
        self.specs = list(specs)
        self.jobs = max(1, min(jobs, len(self.specs) or 1))
        self.executor = executor
        self.on_done = on_done
        self._pool: ProcessPoolExecutor | None = None
        self._futures: list[Future] = []
        self._ray: _RayRuns | None = None

    def __enter__(self) -> Runs:
        if self.executor == "ray":
            self._ray = _RayRuns(self.specs, self.jobs)
        elif self.jobs > 1:
            context = multiprocessing.get_context("fork" if sys.platform == "linux" else "spawn")
            self._pool = ProcessPoolExecutor(max_workers=self.jobs, mp_context=context)
            self._futures = [self._pool.submit(run_one, spec) for spec in self.specs]
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
        if self._ray is not None:
            self._ray.close()

    def results(self) -> Iterator[RunResult]:
        """Results in the order of `specs`, up to and including the first that failed."""
        if self._ray is not None:
            yield from _in_order(self._ray.completed(), len(self.specs), self.on_done, self._ray.cancel_after)
        elif self._pool is not None:
            yield from _in_order(self._completed(), len(self.specs), self.on_done, self._cancel_after)
        else:
            for spec in self.specs:
                result = run_one(spec)
                self.on_done(result)
                yield result
                if result.error:
                    return

    def _completed(self) -> Iterator[tuple[int, RunResult]]:
        from concurrent.futures import as_completed

        index = {id(f): i for i, f in enumerate(self._futures)}
        for future in as_completed(self._futures):
            i = index[id(future)]
            if future.cancelled():
                continue
            try:
                yield i, future.result()
            except Exception as exc:  # a worker died (out of memory, killed): name the run all the same
                yield i, RunResult(self.specs[i], error=f"{type(exc).__name__}: {exc}")

    def _cancel_after(self, index: int) -> None:
        for future in self._futures[index + 1 :]:
            future.cancel()


def _in_order(
    completed: Iterator[tuple[int, RunResult]],
    total: int,
    on_done: Callable[[RunResult], None],
    cancel_after: Callable[[int], None],
) -> Iterator[RunResult]:
    """Reorder completions into the serial order; stop after the first failure in that order."""
    waiting: dict[int, RunResult] = {}
    following = 0
    failed_at = total
    for i, result in completed:
        if i > failed_at:
            continue
        on_done(result)
        if result.error and i < failed_at:
            failed_at = i
            cancel_after(i)  # later runs would be dropped anyway, as a serial run never reaches them
        waiting[i] = result
        while following in waiting:
            ready = waiting.pop(following)
            following += 1
            yield ready
            if ready.error:
                return


class _RayRuns:
    """The same `run_one` as Ray tasks (``pip install .[ray]``); Ray is started here when not running."""

    def __init__(self, specs: Sequence[RunSpec], jobs: int) -> None:
        try:
            import ray
        except ImportError as exc:
            raise RuntimeError("--executor ray needs Ray: pip install '.[ray]'") from exc
        self.ray = ray
        self.specs = list(specs)
        self.started = not ray.is_initialized()
        if self.started:
            ray.init(num_cpus=jobs, include_dashboard=False, log_to_driver=False)
        task = ray.remote(num_cpus=1)(run_one)
        self.refs = [task.remote(spec) for spec in specs]

    def completed(self) -> Iterator[tuple[int, RunResult]]:
        index = {ref: i for i, ref in enumerate(self.refs)}
        pending = list(self.refs)
        while pending:
            done, pending = self.ray.wait(pending, num_returns=1)
            for ref in done:
                try:
                    yield index[ref], self.ray.get(ref)
                except Exception as exc:  # a lost task or worker: name the run all the same
                    i = index[ref]
                    yield i, RunResult(self.specs[i], error=f"{type(exc).__name__}: {exc}")

    def cancel_after(self, index: int) -> None:
        for ref in self.refs[index + 1 :]:
            self.ray.cancel(ref)

    def close(self) -> None:
        if self.started:
            self.ray.shutdown()
