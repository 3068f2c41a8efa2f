"""The figures of the documentation, rendered from saved run logs (compute, then render).

``python -m eval.docs_pages`` rewrites every generated section of the pages under docs/ and of
README.md: the text between ``<!-- generated: NAME -->`` and ``<!-- end generated -->``. Each
section is a table or a few lines computed from the run logs it names, with the commands that made
those logs printed beside it (and the commit of the code that ran them, when the log records one),
so a figure in the docs is always the figure of a log. It prints one line per page it wrote and
nothing else.

``--make`` first runs, one after another, the commands of every log that is missing (each
command line is the one printed in the pages); ``--check`` writes nothing and exits 1 when a page
differs from what its logs render (naming the sections). Logs live under ``runs/docs/`` (not in
the repository): make them once, then re-render as often as the renderers change.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
AGENTS_MAIN = "episodic classifier flat_rag flat_rag-events no_memory"
ABLATIONS = "episodic-no-facts episodic-no-outcomes episodic-no-units episodic-no-graph"
SHIPPED = "ci-failures dns-tls-clock memory-gc pool-vs-deploy"


def _generate(out: str, seeds: Iterable[int], rounds: int, lessons: str | None) -> str:
    """A shell loop that writes generated scenario files `out` (with {s} for the seed)."""
    kind = f"--lessons --families {lessons} " if lessons else ""
    listed = " ".join(str(s) for s in seeds)
    target = out.replace("{s}", "$s")
    return f"for s in {listed}; do python -m simulator.generate {kind}--rounds {rounds} --seed $s --out {target}; done"


def _files(out: str, seeds: Iterable[int]) -> str:
    return " ".join(out.replace("{s}", str(s)) for s in seeds)


def _compare(files: str, seeds: int, agents: str, log: str, extra: str = "") -> str:
    return f"python -m eval.compare {files} --seeds {seeds} --agents {agents}{extra} --jobs 1 --quiet --json {log}"


@dataclass(frozen=True)
class Log:
    """A run log the docs render, and the command lines that make it (run in order by ``--make``)."""

    path: str
    commands: tuple[str, ...]


LESSONS = "runs/docs/lessons-test-s{s}.yaml"
LESSONS_FRESH = "runs/docs/lessons-test-s{s}.yaml"
LESSONS_TRAIN = "runs/docs/lessons-train-s{s}.yaml"
PLAIN = "runs/docs/plain-s{s}.yaml"

LOGS: dict[str, Log] = {
    log.path.split("/")[-1].removesuffix(".json"): log
    for log in (
        Log(
            "runs/docs/lessons.json",
            (
                _generate(LESSONS, range(11, 15), 200, "test"),
                _compare(_files(LESSONS, range(11, 15)), 3, AGENTS_MAIN, "runs/docs/lessons.json"),
            ),
        ),
        Log(
            "runs/docs/lessons-ablations.json",
            (
                _generate(LESSONS, range(11, 15), 200, "test"),
                _compare(
                    _files(LESSONS, range(11, 15)), 1, f"episodic {ABLATIONS}", "runs/docs/lessons-ablations.json"
                ),
            ),
        ),
        Log(
            "runs/docs/lessons-fresh.json",
            (
                _generate(LESSONS_FRESH, range(15, 19), 200, "test"),
                _compare(
                    _files(LESSONS_FRESH, range(15, 19)),
                    1,
                    "episodic flat_rag no_memory episodic-no-graph",
                    "runs/docs/lessons-fresh.json",
                ),
            ),
        ),
        Log(
            "runs/docs/lessons-train.json",
            (
                _generate(LESSONS_TRAIN, range(1, 5), 200, "train"),
                _compare(_files(LESSONS_TRAIN, range(1, 5)), 1, "episodic", "runs/docs/lessons-train.json"),
            ),
        ),
        Log(
            "runs/docs/plain.json",
            (
                _generate(PLAIN, range(3, 6), 200, None),
                _compare(
                    _files(PLAIN, range(3, 6)),
                    1,
                    "episodic flat_rag no_memory episodic-no-graph",
                    "runs/docs/plain.json",
                ),
            ),
        ),
        Log(
            "runs/docs/plain-fresh.json",
            (
                _generate(PLAIN, range(6, 9), 200, None),
                _compare(
                    _files(PLAIN, range(6, 9)),
                    1,
                    "episodic flat_rag no_memory episodic-no-graph",
                    "runs/docs/plain-fresh.json",
                ),
            ),
        ),
        Log("runs/docs/shipped.json", (_compare(SHIPPED, 5, f"{AGENTS_MAIN} {ABLATIONS}", "runs/docs/shipped.json"),)),
        Log("runs/docs/dev.json", (_compare("scenarios/dev/*.yaml", 5, AGENTS_MAIN, "runs/docs/dev.json"),)),
        Log(
            "runs/docs/heldout.json",
            (
                _compare(
                    "scenarios/heldout/*.yaml",
                    5,
                    f"{AGENTS_MAIN} episodic-no-graph episodic-no-facts",
                    "runs/docs/heldout.json",
                ),
            ),
        ),
        Log(
            "runs/docs/shipped-semantic.json",
            (
                _compare(
                    SHIPPED, 5, "episodic flat_rag no_memory", "runs/docs/shipped-semantic.json", " --encoder semantic"
                ),
            ),
        ),
        Log("runs/docs/bench-quick.json", ("python -m eval.bench --quick --json runs/docs/bench-quick.json",)),
    )
}


def make(names: Iterable[str] | None = None, *, run: Callable[[str], int] | None = None) -> list[str]:
    """Run the commands of every missing log (of `names`, or all), one after another; the logs made."""
    run = run or (lambda line: subprocess.run(["bash", "-c", line], cwd=ROOT, check=False).returncode)
    made = []
    for name in names or LOGS:
        log = LOGS[name]
        if (ROOT / log.path).exists():
            continue
        for line in log.commands:
            print(f"$ {line}", file=sys.stderr)
            if run(line) != 0:
                raise SystemExit(f"error: `{line}` failed; {log.path} not made")
        made.append(log.path)
    return made


# -- compute: plain data from a run log ---------------------------------------------------------

KIND_NAMES = {
    "lesson": "first lessons",
    "lesson_recur": "lesson recurrences",
    "learn": "learn rounds",
    "transfer": "recurrences",
    "red_herring": "red herrings",
    "caused": "caused",
    "drift": "drift",
    "plain": "plain",
    "subtle": "subtle",
    "adapt": "adapt",
}


def read_log(path: str | Path, root: Path = ROOT) -> dict[str, Any]:
    """A run log (eval.compare's or eval.bench's JSON), read from `root`."""
    full = root / path
    if not full.is_file():
        raise FileNotFoundError(path)
    return json.loads(full.read_text(encoding="utf-8"))


def _rows(log: Mapping[str, Any], agent: str, scenario: str | None = None) -> list[Mapping[str, Any]]:
    return [r for r in log["agents"][agent]["rounds"] if scenario is None or r["scenario"] == scenario]


def _means(rows: Iterable[Mapping[str, Any]], key: str = "first_correct") -> dict[tuple[str, str], float]:
    """Per scenario round, the mean of `key` over its seeds (the unit of evidence)."""
    groups: dict[tuple[str, str], list[bool]] = {}
    for r in rows:
        groups.setdefault((r["scenario"], r["round"]), []).append(bool(r[key]))
    return {k: sum(v) / len(v) for k, v in groups.items()}


def accuracy(rows: Sequence[Mapping[str, Any]], key: str = "first_correct") -> float | None:
    """Mean over scenario rounds of the seed-averaged `key` (first_correct or solved)."""
    means = _means(rows, key)
    return sum(means.values()) / len(means) if means else None


def rounds_of(rows: Sequence[Mapping[str, Any]]) -> int:
    return len({(r["scenario"], r["round"]) for r in rows})


def paired(log: Mapping[str, Any], a: str, b: str, scenario: str | None = None) -> dict[str, Any] | None:
    """eval.metrics.compare_rounds of agent `a` against `b` (sign test, bootstrap interval)."""
    from types import SimpleNamespace

    from eval.metrics import compare_rounds

    def records(agent: str) -> list[Any]:
        return [
            SimpleNamespace(scenario=r["scenario"], round=r["round"], first_correct=bool(r["first_correct"]))
            for r in _rows(log, agent, scenario)
        ]

    return compare_rounds(records(a), records(b))


def differing_rounds(log: Mapping[str, Any], a: str, b: str) -> tuple[list[str], list[str]]:
    """Scenario rounds where `a`'s seed-averaged first attempt is better / worse than `b`'s."""
    mean_a, mean_b = _means(_rows(log, a)), _means(_rows(log, b))
    name = lambda key: f"{key[0]} {key[1]}"  # noqa: E731
    better = [name(k) for k in mean_a if k in mean_b and mean_a[k] > mean_b[k]]
    worse = [name(k) for k in mean_a if k in mean_b and mean_a[k] < mean_b[k]]
    return better, worse


def edges(
    log: Mapping[str, Any], agent: str = "episodic", scenario: str | None = None
) -> dict[str, tuple[int, int, int]]:
    """(correct, predicted, true) per edge type, pooled over the runs of `agent` (of one scenario)."""
    out: dict[str, list[int]] = {}
    for run in log["agents"][agent].get("runs", []):
        if scenario is not None and run["scenario"] != scenario:
            continue
        for kind, e in (run.get("layers") or {}).get("edges", {}).items():
            total = out.setdefault(kind, [0, 0, 0])
            for i, part in enumerate(("correct", "predicted", "true")):
                total[i] += e.get(part, 0)
    return {kind: (c, p, t) for kind, (c, p, t) in out.items()}


def outcome_accuracy(log: Mapping[str, Any], agent: str = "episodic") -> float | None:
    values = [
        run["layers"]["outcome_accuracy"]
        for run in log["agents"][agent].get("runs", [])
        if (run.get("layers") or {}).get("outcome_accuracy") is not None
    ]
    return sum(values) / len(values) if values else None


# -- render: Markdown ---------------------------------------------------------------------------


def pct(value: float | None, digits: int = 1) -> str:
    return "—" if value is None else f"{100 * value:.{digits}f}%"


def p_value(p: float) -> str:
    return f"{p:.2g}" if p >= 1e-3 else f"{p:.0e}".replace("e-0", "e-")


def paired_line(result: Mapping[str, Any] | None, a: str, b: str) -> str:
    if result is None:
        return f"{a} vs {b}: no rounds in common"
    low, high = result["difference_ci95"]
    verdict = "" if result["significant"] else ", not significant"
    return (
        f"{a} vs {b}: {result['n_rounds']} scenario rounds, {a} better in {result['a_better']}, "
        f"worse in {result['b_better']}; sign test p = {p_value(result['sign_test_p'])}{verdict}; "
        f"difference {100 * result['difference']:+.1f} points [{100 * low:+.1f}, {100 * high:+.1f}]"
    )


def _table(header: Sequence[str], rows: Iterable[Sequence[str]], right_from: int = 1) -> list[str]:
    lines = [
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---" if i < right_from else "---:" for i in range(len(header))) + "|",
    ]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def kinds_table(log: Mapping[str, Any], agents: Sequence[str], subject: str = "episodic") -> list[str]:
    """Round kind (rounds) × agents, first-attempt accuracy; 'all' last."""
    kinds: list[str] = []
    for r in _rows(log, subject):
        if r["kind"] not in kinds:
            kinds.append(r["kind"])
    rows = []
    for kind in kinds + [None]:

        def pick(agent: str, kind: str | None = kind) -> list[Mapping[str, Any]]:
            return [r for r in _rows(log, agent) if kind is None or r["kind"] == kind]

        label = f"{KIND_NAMES.get(kind, kind) if kind else 'all'} ({rounds_of(pick(subject)):,})"
        cells = [pct(accuracy(pick(agent)), 1) for agent in agents]
        rows.append([label, *cells])
    return _table(["round kind (rounds)", *agents], rows)


def scenarios_table(log: Mapping[str, Any], agents: Sequence[str], subject: str = "episodic") -> list[str]:
    """Scenario × agents; each other agent's cell with +a/−b rounds against `subject`."""
    rows = []
    for scenario in [s["name"] for s in log["scenarios"]] + [None]:
        cells = []
        for agent in agents:
            cell = pct(accuracy(_rows(log, agent, scenario)), 1)
            if agent != subject:
                result = paired(log, subject, agent, scenario)
                if result:
                    cell += f" (+{result['a_better']}/−{result['b_better']})"
            cells.append(cell)
        label = scenario or "all"
        rows.append([label, str(rounds_of(_rows(log, subject, scenario))), *cells])
    return _table(["scenario", "rounds", *agents], rows)


def agents_table(logs: Sequence[tuple[str, Mapping[str, Any]]], kinds: Sequence[str]) -> list[str]:
    """Rows (label, agent) of one or more logs: first attempt, solved and chosen round kinds."""
    first = logs[0][1]
    header = ["agent", "first attempt", "solved"]
    for kind in kinds:
        header.append(
            f"{KIND_NAMES.get(kind, kind)} ({rounds_of([r for r in _rows(first, 'episodic') if r['kind'] == kind])})"
        )
    rows = []
    for suffix, log in logs:
        for agent in log["agents"]:
            rows_all = _rows(log, agent)
            cells = [pct(accuracy(rows_all)), pct(accuracy(rows_all, "solved"))]
            cells += [pct(accuracy([r for r in rows_all if r["kind"] == kind]), 0) for kind in kinds]
            rows.append([f"{agent}{suffix}", *cells])
    return _table(header, rows)


def groups_table(
    groups: Sequence[tuple[str, Mapping[str, Any]]],
    agents: Sequence[str],
    versus: str,
    subject: str = "episodic",
    sources: Sequence[str] | None = None,
) -> list[str]:
    """One row per (label, log): rounds, each agent's accuracy and the paired test against `versus`;
    with `sources` (one per group), a last column naming the run log of each row."""
    rows = []
    for i, (label, log) in enumerate(groups):
        cells = [pct(accuracy(_rows(log, a))) if a in log["agents"] else "" for a in agents]
        result = paired(log, subject, versus) if versus in log["agents"] else None
        test = f"+{result['a_better']}/−{result['b_better']}, p = {p_value(result['sign_test_p'])}" if result else ""
        rows.append(
            [
                label,
                f"{rounds_of(_rows(log, subject)):,}",
                *cells,
                test,
                *([f"`{sources[i]}`"] if sources is not None else []),
            ]
        )
    header = [
        "files",
        "rounds",
        *agents,
        f"{subject} vs {versus} (rounds)",
        *(["run log"] if sources is not None else []),
    ]
    lines = _table(header, rows)
    if sources is not None:  # the run log column reads left-aligned
        lines[1] = lines[1].removesuffix("---:|") + "---|"
    return lines


def layers_table(
    groups: Sequence[tuple[str, Mapping[str, Any], str | None]],
    kinds: Sequence[str] = ("CAUSED_BY", "RETRY_OF", "LEARNED_FROM"),
) -> list[str]:
    """Link precision / recall (correct/predicted/true) per group (label, log, scenario or None)."""
    rows = []
    for label, log, scenario in groups:
        found = edges(log, "episodic", scenario)
        cells = []
        for kind in kinds:
            c, p, t = found.get(kind, (0, 0, 0))
            precision = f"{c / p:.2f}" if p else "—"
            recall = f"{c / t:.2f}" if t else "—"
            cells.append(f"{precision} / {recall} ({c}/{p}/{t})")
        rows.append([label, *cells])
    return _table(
        ["scenarios", *(f"{k} precision / recall (correct/predicted/true)" for k in kinds)],
        rows,
        right_from=len(kinds) + 2,
    )


def bench_table(results: Mapping[str, Any]) -> list[str]:
    """eval.bench's judged table, row for row as the bench prints it, and its machine line."""
    from eval.bench.results import _number
    from eval.bench.results import _rows as bench_rows

    rows = []
    for name, label, entry in bench_rows(results):
        passed = entry.get("passed")
        verdict = "PASS" if passed is True else "FAIL" if passed is False else ""
        rows.append(
            [
                f"`{label}`",
                _number(entry.get("median"), name),
                _number(entry.get("p95"), name),
                str(entry.get("n", 0)),
                entry.get("target") or "",
                verdict,
            ]
        )
    return _table(["metric", "p50", "p95", "n", "target", ""], rows, right_from=1)


def machine_line(results: Mapping[str, Any]) -> str:
    m = results.get("machine", {})
    return (
        f"Machine (from the log): {m.get('cpu_count')} CPUs, Python {m.get('python')}, {m.get('platform')}; "
        f"load average {m.get('load_avg_start')} → {m.get('load_avg_end')}; the bench took {m.get('elapsed_s')} s."
    )


def commit_of(log: Mapping[str, Any]) -> str | None:
    """ "commit 0123456789ab" (", uncommitted changes" when the tree was dirty) of the code that made a
    log, from its ``environment`` (eval.compare) or ``machine`` (eval.bench) block; None when unrecorded."""
    for key in ("environment", "machine"):
        block = log.get(key) or {}
        if block.get("commit"):
            return f"commit {block['commit'][:12]}" + (", uncommitted changes" if block.get("tree") == "dirty" else "")
    return None


def server_table(results: Mapping[str, Any]) -> list[str]:
    """The server store beside SQLite, as the bench's JSON records it (``server_store``)."""
    section = results.get("server_store") or {}
    if "sqlite" not in section:
        return [f"The server store was not measured: {section.get('skipped', 'no server_store in the log')}."]
    names = {
        "append_ms": "durable single append, ms",
        "append_batch_per_s": f"batch append ({section.get('batch_size', 0):,} per call), entries/s",
        "open_ms": f"open until the first recall, {section.get('episodes', 0):,} episodes, ms",
        "recall_ms": f"warm recall, {section.get('episodes', 0):,} episodes, ms",
    }
    rows = []
    for key, label in names.items():
        cells = []
        for store in ("sqlite", "postgresql"):
            e = section.get(store, {}).get(key, {})
            fmt = (
                (lambda v: "—" if v is None else f"{v:,.0f}")
                if key == "append_batch_per_s"
                else (lambda v: "—" if v is None else f"{v:,.2f}")
            )
            cells.append(f"{fmt(e.get('median'))} / {fmt(e.get('p95'))}")
        rows.append([label, *cells])
    return _table(["p50 / p95", "SQLite file", "PostgreSQL (same machine, Unix socket)"], rows)


# -- the generated sections of the pages ----------------------------------------------------------

LOGS.update(
    {
        "petshop": Log(
            "runs/datasets/petshop.json",
            (
                "for f in high_traffic temporal_traffic1 temporal_traffic2; do python -m scenarios.importers petshop "
                "../shared/datasets/petshop/$f --out runs/datasets/petshop-$f.yaml; done",
                "python -m eval.compare runs/datasets/petshop-*.yaml --agents episodic flat_rag classifier no_memory "
                "--order time shuffled --seeds 3 --json runs/datasets/petshop.json --quiet",
            ),
        ),
        "itbench": Log(
            "runs/datasets/itbench.json",
            (
                "python -m scenarios.importers itbench ../shared/datasets/itbench-sre --out runs/datasets/itbench.yaml",
                "python -m eval.compare runs/datasets/itbench.yaml --agents episodic flat_rag classifier no_memory "
                "--order time shuffled --seeds 3 --json runs/datasets/itbench.json --quiet",
            ),
        ),
    }
)

Logs = Mapping[str, Mapping[str, Any]]


@dataclass(frozen=True)
class Section:
    """A generated section: the page it is on (a path from the repository's root), its name, the logs it
    reads and how it renders them. `commands_below`: the body names each log itself (README.md's table
    has a column for it), and the commands follow the body instead of opening the section."""

    page: str
    name: str
    logs: tuple[str, ...]
    render: Callable[[Logs], list[str]]
    commands_below: bool = False


def only(log: Mapping[str, Any], keep: Callable[[str], bool]) -> dict[str, Any]:
    """A view of a run log restricted to the scenarios whose name `keep` accepts."""
    names = [s for s in log["scenarios"] if keep(s["name"])]
    agents = {
        a: {
            **data,
            "rounds": [r for r in data["rounds"] if keep(r["scenario"])],
            "runs": [r for r in data.get("runs", []) if keep(r["scenario"])],
        }
        for a, data in log["agents"].items()
    }
    return {**log, "scenarios": names, "agents": agents}


def _lines(*parts: Iterable[str] | str) -> list[str]:
    out: list[str] = []
    for part in parts:
        if isinstance(part, str):
            out.append(part)
        else:
            out.extend(part)
    return out


def _paired_block(log: Mapping[str, Any], subject: str, others: Sequence[str]) -> list[str]:
    return [paired_line(paired(log, subject, o), subject, o) + "  " for o in others if o in log["agents"]]


def _facts(log: Mapping[str, Any], agent: str = "episodic") -> str:
    r = log["agents"][agent]["summary"].get("retrieval", {})
    if not r.get("fact_firings"):
        return f"No fact was handed to {agent}'s first attempts."
    return (
        f"Facts handed to {agent}'s first attempts: {r['fact_firings']:,}, right "
        f"{pct(r['fact_precision'])} of the time (`summary.retrieval.fact_precision`)."
    )


def _graph_rounds(log: Mapping[str, Any]) -> str:
    better, worse = differing_rounds(log, "episodic", "episodic-no-graph")
    result = paired(log, "episodic", "episodic-no-graph")
    return (
        f"episodic {pct(accuracy(_rows(log, 'episodic')))}, without the graph "
        f"{pct(accuracy(_rows(log, 'episodic-no-graph')))}: the graph made the difference in "
        f"{len(better) + len(worse)} rounds, {len(better)} for ({', '.join(better) or 'none'}) and "
        f"{len(worse)} against ({', '.join(worse) or 'none'})"
        + (f", p = {p_value(result['sign_test_p'])}." if result is not None else ".")
    )


def _ablations(log: Mapping[str, Any], agents: Sequence[str]) -> list[str]:
    rows = []
    for agent in agents:
        if agent not in log["agents"]:
            continue
        result = paired(log, "episodic", agent)
        rows.append(
            [agent, pct(accuracy(_rows(log, agent))), f"+{result['a_better']}/−{result['b_better']}" if result else ""]
        )
    return _table(["agent", "first attempt", "episodic better / worse (rounds)"], rows)


def _glance(logs: Logs) -> list[str]:
    groups = [
        ("generated lesson files, test families 11–14 (3 seeds)", logs["lessons"]),
        ("plain generated files 3–5 (1 seed)", logs["plain"]),
        ("shipped scenarios (5 seeds)", logs["shipped"]),
        ("development files, other domains (5 seeds; rules written on them)", logs["dev"]),
        ("held-out files, other domains (5 seeds; only measured)", logs["heldout"]),
    ]
    return groups_table(groups, ["episodic", "classifier", "flat_rag", "no_memory"], "no_memory")


def _wins(logs: Logs) -> list[tuple[str, Mapping[str, Any], str]]:
    """The front pages' rows: (label, log view, log name)."""
    data = lambda log: only(log, lambda name: "@" not in name)  # noqa: E731  the data's order
    pet = data(logs["petshop"])
    return [
        ("PetShop high_traffic, data's order", only(pet, lambda n: "high" in n), "petshop"),
        ("PetShop temporal_traffic1 and 2, data's order", only(pet, lambda n: "temporal" in n), "petshop"),
        ("ITBench SRE, data's order", data(logs["itbench"]), "itbench"),
        ("generated lesson files, test families 11–14", logs["lessons"], "lessons"),
        ("shipped scenarios, 5 seeds", logs["shipped"], "shipped"),
        ("development files, other domains, 5 seeds", logs["dev"], "dev"),
        ("held-out files, other domains, 5 seeds (only measured)", logs["heldout"], "heldout"),
    ]


def _index_table(logs: Logs) -> list[str]:
    groups = [(label, log) for label, log, _ in _wins(logs)]
    return groups_table(groups, ["episodic", "classifier", "flat_rag", "no_memory"], "no_memory")


def _readme_table(logs: Logs) -> list[str]:
    """The index page's table with each row's run log beside it."""
    rows = _wins(logs)
    return groups_table(
        [(label, log) for label, log, _ in rows],
        ["episodic", "classifier", "flat_rag", "no_memory"],
        "no_memory",
        sources=[LOGS[name].path for *_, name in rows],
    )


def _lessons(logs: Logs) -> list[str]:
    log = logs["lessons"]
    agents = [a for a in ("episodic", "classifier", "flat_rag", "flat_rag-events", "no_memory") if a in log["agents"]]
    return _lines(
        kinds_table(log, agents),
        "",
        _paired_block(log, "episodic", agents[1:]),
        "",
        _facts(log),
        "",
        "Ablations, 1 seed (`runs/docs/lessons-ablations.json`):",
        "",
        _ablations(logs["lessons-ablations"], [a for a in logs["lessons-ablations"]["agents"] if a != "episodic"]),
    )


def _fresh(logs: Logs) -> list[str]:
    return _lines(
        groups_table(
            [
                ("lesson test families 15–18 (1 seed)", logs["lessons-fresh"]),
                ("plain generated files 6–8 (1 seed)", logs["plain-fresh"]),
            ],
            ["episodic", "episodic-no-graph", "flat_rag", "no_memory"],
            "flat_rag",
        ),
        "",
        "Lesson files 15–18: " + _graph_rounds(logs["lessons-fresh"]),
        "",
        "Plain files 6–8: " + _graph_rounds(logs["plain-fresh"]),
    )


def _plain(logs: Logs) -> list[str]:
    log = logs["plain"]
    return _lines(
        _paired_block(log, "episodic", ["flat_rag", "no_memory"]), "", "Plain files 3–5: " + _graph_rounds(log)
    )


def _shipped(logs: Logs) -> list[str]:
    log = logs["shipped"]
    main = [a for a in ("episodic", "classifier", "flat_rag", "flat_rag-events", "no_memory") if a in log["agents"]]
    return _lines(
        scenarios_table(log, main),
        "",
        _paired_block(log, "episodic", main[1:]),
        "",
        "Ablations (same log):",
        "",
        _ablations(log, [a for a in log["agents"] if a.startswith("episodic-")]),
        "",
        "Without the graph: " + _graph_rounds(log),
    )


def _other_domains(name: str, semantic: str | None = None) -> Callable[[Logs], list[str]]:
    def render(logs: Logs) -> list[str]:
        log = logs[name]
        both = [("", log)] + ([(", `--encoder semantic`", logs[semantic])] if semantic else [])
        main = [a for a in ("classifier", "flat_rag", "flat_rag-events", "no_memory") if a in log["agents"]]
        return _lines(
            agents_table(both, ["transfer", "red_herring", "caused"]),
            "",
            _paired_block(log, "episodic", main + [a for a in log["agents"] if a.startswith("episodic-")]),
            "",
            verdict(log, main),
        )

    return render


def verdict(log: Mapping[str, Any], others: Sequence[str], subject: str = "episodic") -> str:
    """Who `subject` is ahead of, behind and level with by rounds won, and whether any of it is significant."""
    results = {o: paired(log, subject, o) for o in others}
    ahead = [o for o, r in results.items() if r and r["a_better"] > r["b_better"]]
    behind = [o for o, r in results.items() if r and r["a_better"] < r["b_better"]]
    level = [o for o in others if o not in ahead and o not in behind]
    significant = [o for o, r in results.items() if r and r["significant"]]
    parts = [
        f"{label} {', '.join(names)}"
        for label, names in (("ahead of", ahead), ("behind", behind), ("level with", level))
        if names
    ]
    return f"By rounds won, {subject} is {'; '.join(parts)}; " + (
        f"significant against {', '.join(significant)}." if significant else "no difference is significant."
    )


def _encoder(logs: Logs) -> list[str]:
    hashing, semantic = logs["shipped"], logs["shipped-semantic"]
    rows = []
    for scenario in [s["name"] for s in hashing["scenarios"]] + [None]:
        cells = [
            pct(accuracy(_rows(log, a, scenario)))
            for log in (hashing, semantic)
            for a in ("episodic", "flat_rag", "no_memory")
        ]
        label = scenario or f"all ({rounds_of(_rows(hashing, 'episodic'))} rounds)"
        rows.append([label, *cells])
    lines = _table(
        [
            "shipped, 5 seeds",
            "hashing: episodic",
            "flat_rag",
            "no_memory",
            "semantic: episodic",
            "flat_rag",
            "no_memory",
        ],
        rows,
    )
    cost = []
    for label, log in (("hashing", hashing), ("semantic", semantic)):
        s = log["agents"]["episodic"]["summary"]
        cost.append(
            f"{label}: episodic evidence hit@1 {pct(s['retrieval'].get('evidence_hit1'), 0)}, "
            f"wall time per episodic round {s['latency_ms_per_round']:.0f} ms (`summary.latency_ms_per_round`)"
        )

    return _lines(
        lines,
        "",
        "; ".join(cost) + ".",
        "",
        paired_line(_cross(hashing, semantic), "semantic episodic", "hashing episodic") + "  ",
        "With the sentence encoder, b" + verdict(semantic, ["flat_rag", "no_memory"])[1:],
    )


def _cross(hashing: Mapping[str, Any], semantic: Mapping[str, Any]) -> dict[str, Any] | None:
    """The semantic episodic agent against the hashing one, paired over the same rounds."""
    merged = {
        **hashing,
        "agents": {"semantic": semantic["agents"]["episodic"], "hashing": hashing["agents"]["episodic"]},
    }
    return paired(merged, "semantic", "hashing")


def _graph_links(logs: Logs) -> list[str]:
    shipped = logs["shipped"]
    groups: list[tuple[str, Mapping[str, Any], str | None]] = [("shipped, seeds 0–4", shipped, None)]
    groups += [(f"— {s['name']}", shipped, s["name"]) for s in shipped["scenarios"]]
    groups += [
        ("lessons, train families, seeds 1–4 (1 seed)", logs["lessons-train"], None),
        ("lessons, test families, seeds 11–14 (1 seed)", logs["lessons-ablations"], None),
        ("lessons, test families, seeds 15–18 (1 seed)", logs["lessons-fresh"], None),
        ("plain generated, seeds 3–5 (1 seed)", logs["plain"], None),
        ("plain generated, seeds 6–8 (1 seed)", logs["plain-fresh"], None),
        ("development files, `scenarios/dev/` (5 seeds)", logs["dev"], None),
        ("held-out files, `scenarios/heldout/` (5 seeds)", logs["heldout"], None),
    ]
    outcome = "; ".join(
        f"{label} {pct(outcome_accuracy(log))}"
        for label, log in (("development files", logs["dev"]), ("held-out files", logs["heldout"]))
    )
    return _lines(
        layers_table(groups), "", f"Outcome labels read right (`layers.outcome_accuracy`, mean over runs): {outcome}."
    )


def _bench(logs: Logs) -> list[str]:
    results = logs["bench-quick"]
    return _lines(
        bench_table(results),
        "",
        machine_line(results),
        "",
        "The server store beside SQLite (same run):",
        "",
        server_table(results),
    )


SECTIONS: tuple[Section, ...] = (
    Section(
        "README.md",
        "wins",
        ("petshop", "itbench", "lessons", "shipped", "dev", "heldout"),
        _readme_table,
        commands_below=True,
    ),
    Section("docs/index.md", "wins", ("petshop", "itbench", "lessons", "shipped", "dev", "heldout"), _index_table),
    Section("docs/results.md", "glance", ("lessons", "plain", "shipped", "dev", "heldout"), _glance),
    Section("docs/results.md", "lessons", ("lessons", "lessons-ablations"), _lessons),
    Section("docs/results.md", "plain", ("plain",), _plain),
    Section("docs/results.md", "fresh", ("lessons-fresh", "plain-fresh"), _fresh),
    Section("docs/results.md", "shipped", ("shipped",), _shipped),
    Section("docs/results.md", "heldout", ("heldout",), _other_domains("heldout")),
    Section("docs/results.md", "dev", ("dev",), _other_domains("dev")),
    Section(
        "docs/graph.md",
        "links",
        ("shipped", "lessons-train", "lessons-ablations", "lessons-fresh", "plain", "plain-fresh", "dev", "heldout"),
        _graph_links,
    ),
    Section("docs/harness.md", "encoder", ("shipped", "shipped-semantic"), _encoder),
    Section("docs/bench.md", "bench", ("bench-quick",), _bench),
)

BEGIN = "<!-- generated: {name} -->"
END = "<!-- end generated -->"


def commands_of(names: Iterable[str], logs: Logs | None = None) -> list[str]:
    """The command lines that make the logs `names`, each once, in order; with `logs` (name → log), the
    line that writes a log ends with the commit of the code that ran it (``# commit …``) when the log
    records one."""
    out: list[str] = []
    for name in names:
        log = LOGS[name]
        writer = next((c for c in reversed(log.commands) if log.path in c), log.commands[-1])
        commit = commit_of(logs[name]) if logs is not None and name in logs else None
        for line in log.commands:
            if commit and line == writer:
                line = f"{line}  # {commit}"
            if line not in out:
                out.append(line)
    return out


def render_section(section: Section, logs: Logs) -> str:
    """The whole generated block of `section`, markers included, from `logs` (name → log)."""
    paths = ", ".join(f"`{LOGS[n].path}`" for n in section.logs)
    body = section.render(logs)
    commands = ["```bash", *commands_of(section.logs, logs), "```"]
    head = [
        BEGIN.format(name=section.name),
        "<!-- written by python -m eval.docs_pages from the run logs named below; do not edit by hand -->",
        "",
    ]
    if section.commands_below:
        lines = [*head, *body, "", "The commands that made the logs named in the table:", "", *commands, "", END]
    else:
        lines = [*head, f"Run logs: {paths}, made by:", "", *commands, "", *body, "", END]
    return "\n".join(lines)


def replace_section(text: str, name: str, block: str) -> str:
    """`text` with the generated section `name` replaced by `block` (which carries its markers)."""
    pattern = re.compile(re.escape(BEGIN.format(name=name)) + r".*?" + re.escape(END), re.DOTALL)
    if not pattern.search(text):
        raise KeyError(f"no generated section {name!r}")
    return pattern.sub(lambda _: block, text, count=1)


def sections_in(text: str) -> list[str]:
    """Names of the generated sections of a page, in order."""
    return re.findall(r"<!-- generated: ([\w.-]+) -->", text)


def render_pages(root: Path = ROOT, sections: Sequence[Section] = SECTIONS) -> dict[Path, str]:
    """Every page holding a generated section, with its sections rendered from the logs (path → text)."""
    cache: dict[str, dict[str, Any]] = {}
    pages: dict[Path, str] = {}
    for section in sections:
        path = root / section.page
        text = pages.get(path) or path.read_text(encoding="utf-8")
        if BEGIN.format(name=section.name) not in text:
            continue
        for name in section.logs:
            if name not in cache:
                cache[name] = read_log(LOGS[name].path, root)
        pages[path] = replace_section(text, section.name, render_section(section, cache))
    return pages


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m eval.docs_pages",
        description="Render the generated sections of docs/ and README.md from saved run logs.",
    )
    parser.add_argument(
        "--make", action="store_true", help="first run the commands of every missing log, one after another"
    )
    parser.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 when a page differs from what its logs render"
    )
    args = parser.parse_args(argv)
    if args.make:
        make()
    try:
        pages = render_pages()
    except FileNotFoundError as missing:
        name = next(n for n, log in LOGS.items() if log.path == str(missing.args[0]))
        print(
            f"error: run log {missing.args[0]} is missing; make it with `python -m eval.docs_pages --make` "
            f"or: {' && '.join(LOGS[name].commands)}",
            file=sys.stderr,
        )
        return 2
    stale = []
    for path, text in pages.items():
        if path.read_text(encoding="utf-8") == text:
            continue
        if args.check:
            stale.append(str(path.relative_to(ROOT)))
        else:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path.relative_to(ROOT)}")
    if stale:
        print(f"differs from its logs: {', '.join(stale)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
