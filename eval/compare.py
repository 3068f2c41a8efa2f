"""Head-to-head comparison: ``python -m eval.compare``.

Plays every scenario × seed × agent, writes the schema-1 run log (``--json``) and prints
the report computed from that log. A failure mid-run (an API that gives up, a crash) is
recorded in the log with everything that completed before it; the exit code is then 1.
"""

from __future__ import annotations

import argparse
import os
import sys
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Sequence

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from eval import runlog
from eval.metrics import summary
from eval.presets import DEFAULT_AGENTS, PRESETS, build_agent
from eval.report import Report, mean_layers
from eval.runner import Playthrough, play

CANONICAL = "pool-vs-deploy"

_EXAMPLES = """examples:
  python -m eval.compare                                  # canonical scenario, heuristic mode, 3 agents
  python -m eval.compare --seeds 10 --json runs/pool.json
  python -m eval.compare ci-failures my-scenario.yaml --agents episodic flat_rag episodic-no-facts
  python -m eval.compare --store runs/memory.sqlite && python -m memory verify runs/memory.sqlite
  ANTHROPIC_API_KEY=... python -m eval.compare --mode claude --cache runs/claude-cache

agents: """ + ", ".join(f"{name} ({preset.description})" for name, preset in PRESETS.items())


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m eval.compare", description="Run memory designs head to head on debugging scenarios.",
        epilog=_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("scenarios", nargs="*", default=[CANONICAL],
                        help=f"scenario files or shipped scenario names (default: {CANONICAL})")
    parser.add_argument("--seeds", type=int, default=3, help="number of simulator seeds, 0..N-1 (default 3)")
    parser.add_argument("--agents", nargs="+", default=list(DEFAULT_AGENTS), metavar="AGENT",
                        help="agents to compare (default: episodic flat_rag no_memory)")
    parser.add_argument("--mode", choices=("heuristic", "claude"), default="heuristic",
                        help="reasoner: deterministic heuristic (default) or Claude (needs ANTHROPIC_API_KEY)")
    parser.add_argument("--model", default=None, help="Claude model id (Claude mode)")
    parser.add_argument("--cache", default=None, metavar="DIR",
                        help="on-disk Claude response cache; replays without a key when complete")
    parser.add_argument("--json", default=None, metavar="PATH", help="write the run log (schema 1) here")
    parser.add_argument("--store", default=None, metavar="PATH",
                        help="keep the episodic agent's memory in this SQLite file")
    parser.add_argument("--quiet", action="store_true", help="print only the summary line")
    return parser


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def main(argv: Sequence[str] | None = None, *, now: Callable[[], datetime] = runlog.utc_now) -> int:
    """Run the comparison; 0 on success, 1 when a run failed midway, 2 on a usage error.

    `now` is the clock that stamps the log and names a ``--store`` run.
    """
    args = _parser().parse_args(argv)
    unknown = [a for a in args.agents if a not in PRESETS]
    if unknown:
        return _fail(f"unknown agent(s) {', '.join(unknown)} (known: {', '.join(PRESETS)})")
    if args.seeds < 1:
        return _fail("--seeds must be at least 1")
    refused = _refused_output(args.json, args.store)
    if refused:
        return _fail(refused)
    loaded, problems = _load(args.scenarios)
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return 2

    from memory.timeline import HashingEncoder

    encoder = HashingEncoder()
    try:
        reasoner = _reasoner(args, encoder)
    except _UsageError as exc:
        return _fail(str(exc))
    log = runlog.new_log(
        mode=args.mode, scenarios=[{"name": s.name, "sha256": s.sha256} for s in loaded],
        seeds=list(range(args.seeds)), agents=list(args.agents),
        config={"encoder": encoder.name, "reasoner": reasoner.name, "model": getattr(reasoner, "model", None),
                "store": args.store, "budget": {"items": 6, "chars": 3000}}, now=now)
    # Tenant names feed every content address (entry, episode and fact ids), and ids break
    # ties in ranking, so they must not vary between runs: a run is reproducible from its
    # seeds alone. Only a persistent --store needs a per-run suffix, to keep runs apart.
    run_suffix = now().strftime(":%Y%m%dT%H%M%S") if args.store else ""
    layers = _run_all(args, loaded, log, reasoner, encoder, run_suffix)
    log["finished_at"] = now().isoformat()
    _summarise(log, layers)
    if args.json:
        runlog.write(log, args.json)
    return _print(args, log)


def _refused_output(json_path: str | None, store: str | None) -> str:
    """Why `--json` cannot be written (checked before the run, not after it); "" when it can."""
    if not json_path:
        return ""
    target = Path(json_path)
    if store and target.resolve() == Path(store).resolve():
        return f"--json {json_path} is the --store file: the run log would overwrite the memory store"
    if target.is_dir():
        return f"--json {json_path} is a directory"
    if target.exists():
        try:
            with open(target, "rb") as handle:
                header = handle.read(16)
        except OSError as exc:
            return f"--json {json_path}: cannot read the existing file ({exc.strerror})"
        if header == b"SQLite format 3\x00":
            return f"--json {json_path} is an SQLite database (a memory store?): refusing to overwrite it"
    parent = target.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        return f"--json {json_path}: {parent} is not a directory"
    if not os.access(parent, os.W_OK):
        return f"--json {json_path}: {parent} is not writable"
    return ""


def _load(refs: Sequence[str]) -> tuple[list[Any], list[str]]:
    """The scenarios `refs` name, and every problem found in them."""
    import scenarios

    loaded, problems = [], []
    for ref in refs:
        try:
            loaded.append(scenarios.load(ref))
        except scenarios.ScenarioError as exc:
            problems.extend(exc.problems)
    return loaded, problems


def _run_all(args: argparse.Namespace, loaded: list[Any], log: dict[str, Any], reasoner: Any, encoder: Any,
             run_suffix: str) -> dict[str, list[dict[str, Any]]]:
    """Play every scenario × seed × agent into `log` (written after each run); returns the layer scores."""
    seeds = list(range(args.seeds))
    total = len(loaded) * len(seeds) * len(args.agents)
    layers: dict[str, list[dict[str, Any]]] = {name: [] for name in args.agents}
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=Console(stderr=True), transient=True, disable=total < 4 or args.quiet) as progress:
        task = progress.add_task("comparing", total=total)
        try:
            for scenario in loaded:
                for seed in seeds:
                    for name in args.agents:
                        progress.update(task, description=f"{scenario.name} seed {seed} {name}")
                        agent = build_agent(PRESETS[name], reasoner, encoder,
                                            store_path=args.store if name == "episodic" else None,
                                            principal=f"{scenario.name}:{seed}{run_suffix}")
                        _play_into(log, layers, name, scenario, seed, agent)
                        _summarise(log, layers)
                        if args.json:
                            runlog.write(log, args.json)
                        progress.advance(task)
            log["status"] = "success"
        except KeyboardInterrupt:
            log["error"] = "interrupted"
        except Exception as exc:  # recorded with what completed; the traceback is ours to debug
            log["error"] = f"{type(exc).__name__}: {exc}"
    return layers


def _play_into(log: dict[str, Any], layers: dict[str, list[dict[str, Any]]], name: str, scenario: Any, seed: int,
               agent: Any) -> None:
    """Play one run; what it completed goes into the log even when it fails."""
    outcome = Playthrough()
    try:
        play(scenario, seed, agent, outcome)
    finally:
        entry = log["agents"][name]
        entry["rounds"].extend(r.to_json() for r in outcome.rounds)
        entry["runs"].append({"scenario": scenario.name, "seed": seed, "rounds": len(outcome.rounds),
                              "layers": outcome.layers})
        if outcome.layers:
            layers[name].append(outcome.layers)


def _print(args: argparse.Namespace, log: dict[str, Any]) -> int:
    """Print the report (or the summary line) and say how the run ended; the exit code."""
    out = Console() if sys.stdout.isatty() else Console(width=160)
    if args.quiet:
        s = {n: log["agents"][n]["summary"].get("first_attempt_accuracy") for n in args.agents}
        out.print(" ".join(f"{n}={v:.3f}" for n, v in s.items() if v is not None))
    else:
        out.print(Report(log))
    if log["status"] != "success":
        print(f"error: run stopped early: {log['error']}" + (f" (completed work is in {args.json})" if args.json else ""),
              file=sys.stderr)
        return 1
    return 0


def _summarise(log: dict[str, Any], layers: dict[str, list[dict[str, Any]]]) -> None:
    from eval.report import records

    for name, entry in log["agents"].items():
        entry["summary"] = summary(records(log, name))
        averaged = mean_layers(layers.get(name, []))
        if averaged:
            entry["layers"] = averaged


class _UsageError(Exception):
    pass


def _reasoner(args: argparse.Namespace, encoder: Any) -> Any:
    if args.mode == "heuristic":
        from agent.heuristic import HeuristicReasoner

        return HeuristicReasoner(encoder)
    from agent.claude import ClaudeReasoner, DEFAULT_MODEL, MissingKey

    try:
        return ClaudeReasoner(model=args.model or DEFAULT_MODEL, cache_dir=args.cache,
                              api_key=os.environ.get("ANTHROPIC_API_KEY"))
    except MissingKey as exc:
        raise _UsageError(str(exc)) from exc


if __name__ == "__main__":
    sys.exit(main())
