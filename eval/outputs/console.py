"""The terminal report of a run log, with rich: every table read from the log (compute, then render).

`eval.compare` prints it after a run and ``python -m eval.report`` prints it again from saved
logs; `eval.outputs.html` puts the same tables into its HTML file.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Mapping
from typing import Any

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from eval.merge import SUBJECT, records
from eval.metrics import comparisons, paired_test
from eval.runner import RoundRecord

BASELINE = "flat_rag"


def _pct(value: float | None) -> str:
    return "—" if value is None or value != value else f"{100 * value:.0f}%"


def _ci(pair: list[float] | None) -> str:
    return "" if not pair or pair[0] != pair[0] else f"[{100 * pair[0]:.0f}–{100 * pair[1]:.0f}]"


def paired_verdict(c: Mapping[str, Any], other: str) -> str:
    """Who is ahead in one paired comparison: by rounds won and by accuracy, saying so when they disagree.

    The rounds won (the sign test's direction) and the accuracy difference can point different
    ways: one agent better in more rounds, the other by more in the rounds it wins.
    """

    def leader(sign: float) -> str | None:
        return SUBJECT if sign > 0 else other if sign < 0 else None

    by_rounds, by_accuracy = leader(c["a_better"] - c["b_better"]), leader(round(c["difference"], 9))
    if by_rounds == by_accuracy:
        return f"{by_rounds} ahead" if by_rounds else "no difference"
    rounds = f"{by_rounds} better in more rounds" if by_rounds else "rounds won tied"
    accuracy = f"{by_accuracy} higher accuracy" if by_accuracy else "equal accuracy"
    return f"mixed: {rounds}, {accuracy}"


class Report:
    """A comparison report; ``rich.print(Report(log))`` shows it."""

    def __init__(self, log: dict[str, Any]) -> None:
        self.log = log
        self.agents = list(log["agents"])

    def __rich__(self) -> Group:
        parts: list[Any] = [self._header()]
        for scenario in self.log["scenarios"]:
            parts.append(self.rounds_table(scenario["name"]))
        parts += [self.accuracy_table(), self.significance()]
        if len(self.log["scenarios"]) > 1:
            parts.append(self.scenario_table())
        parts.append(self.retrieval_table())
        layers = self.layers_table()
        if layers is not None:
            parts.append(layers)
        if self.log["mode"] in ("claude", "openai"):
            parts.append(self.usage_table())
        if self.log.get("status") != "success":
            parts.append(Text(f"run incomplete: {self.log.get('error')}", style="bold red"))
        return Group(*parts)

    def _header(self) -> Text:
        names = ", ".join(s["name"] for s in self.log["scenarios"])
        seeds = self.log["seeds"]
        seed_text = f"seed {seeds[0]}" if len(seeds) == 1 else f"seeds {seeds[0]}–{seeds[-1]} ({len(seeds)})"
        text = Text(f"{names} · {self.log['mode']} mode · {seed_text} · agents: {', '.join(self.agents)}", style="bold")
        if self.log["mode"] == "heuristic":
            text.append(
                "\nheuristic mode: a deterministic stand-in reasoner; it tests the memory's evidence, "
                "not an LLM's judgment (see README)",
                style="dim",
            )
        return text

    def rounds_table(self, scenario: str) -> Table:
        """Side by side, per round: first decision ✓/✗ (or share right over seeds) and attempts."""
        per_agent = {a: [r for r in records(self.log, a) if r.scenario == scenario] for a in self.agents}
        order: list[str] = []
        info: dict[str, RoundRecord] = {}
        for rows in per_agent.values():
            for r in rows:
                if r.round not in info:
                    order.append(r.round)
                    info[r.round] = r
        many = len(self.log["seeds"]) > 1
        table = Table(title=f"{scenario}: first attempt per round" + (" (right / seeds)" if many else ""))
        for column in ("round", "kind", "truth"):
            table.add_column(column)
        for agent in self.agents:
            table.add_column(agent, justify="center")
        table.add_column("differ", justify="center")
        for round_id in order:
            cells, firsts = [], []
            for agent in self.agents:
                rows = [r for r in per_agent[agent] if r.round == round_id]
                if not rows:
                    cells.append("·")
                    continue
                right = sum(r.first_correct for r in rows)
                attempts = sum(r.attempts for r in rows) / len(rows)
                firsts.append(tuple(r.first_decision for r in rows))
                if many:
                    style = "green" if right == len(rows) else ("red" if right == 0 else "yellow")
                    wrong = Counter(r.first_decision for r in rows if not r.first_correct)
                    shown = " ".join(f"✗ {choice}×{n}" for choice, n in wrong.most_common())
                    cells.append(
                        f"[{style}]{right}/{len(rows)}[/] ({attempts:.1f})" + (f" [red]{shown}[/]" if shown else "")
                    )
                else:
                    mark = "[green]✓[/]" if right else f"[red]✗ {rows[0].first_decision}[/]"
                    cells.append(f"{mark} ({rows[0].attempts})")
            differs = "◆" if len(set(firsts)) > 1 else ""
            r = info[round_id]
            table.add_row(round_id, r.kind, r.truth, *cells, differs)
        table.caption = (
            "cells: first decision (attempts used); with seeds, right/seeds and each wrong first "
            "choice × how many seeds made it; ◆ = agents' first decisions differ"
        )
        return table

    def accuracy_table(self) -> Table:
        """First-attempt accuracy per kind and overall, with 95% intervals over seeds × rounds."""
        kinds: list[str] = []
        for agent in self.agents:
            for kind in self.log["agents"][agent]["summary"].get("per_kind", {}):
                if kind not in kinds:
                    kinds.append(kind)
        table = Table(title="first-attempt accuracy [95% CI]")
        table.caption = (
            "kind and overall rows: Wilson intervals over seeds × rounds (too narrow when seeds "
            "repeat a round); per round: cluster-bootstrap interval over scenario rounds"
        )
        table.add_column("kind")
        for agent in self.agents:
            table.add_column(agent, justify="right")
        for kind in kinds:
            row = []
            for agent in self.agents:
                stats = self.log["agents"][agent]["summary"].get("per_kind", {}).get(kind)
                row.append(
                    "—" if not stats else f"{_pct(stats['first_attempt_accuracy'])} {_ci(stats['ci95'])} n={stats['n']}"
                )
            table.add_row(kind, *row)
        overall, solved = [], []
        for agent in self.agents:
            s = self.log["agents"][agent]["summary"]
            overall.append(
                f"[bold]{_pct(s.get('first_attempt_accuracy'))}[/] {_ci(s.get('first_attempt_ci95'))} "
                f"n={s.get('rounds', 0)}"
            )
            solved.append(f"{_pct(s.get('solve_rate'))} · {s.get('mean_attempts') or 0:.2f} att.")
        table.add_row("[bold]overall[/]", *overall)
        by_round = []
        for agent in self.agents:
            level = self.log["agents"][agent]["summary"].get("round_level") or {}
            by_round.append(
                f"{_pct(level.get('first_attempt_accuracy'))} {_ci(level.get('ci95'))} "
                f"n={level.get('rounds', 0)} rounds"
                if level
                else "—"
            )
        table.add_row("per round (seeds averaged)", *by_round)
        table.add_row("solved · mean attempts", *solved)
        return table

    def significance(self) -> Group:
        """Round-level paired results, episodic vs every other agent, then the per-trial McNemar."""
        versus = (self.log.get("comparisons") or {}).get("versus")
        if versus is None:  # a log written before round-level statistics: compute them from the rounds
            versus = comparisons({a: records(self.log, a) for a in self.agents}, SUBJECT)
        lines: list[Text] = []
        if versus:
            lines.append(
                Text(
                    "paired by scenario round (seeds averaged per round; sign test on the rounds "
                    "where the agents differ, 95% cluster-bootstrap interval of the accuracy "
                    "difference over rounds):",
                    style="bold",
                )
            )
        for other, c in versus.items():
            ci = c["difference_ci95"]
            verdict = paired_verdict(c, other)
            verdict += " — significant at 0.05" if c["significant"] else " — not significant"
            lines.append(
                Text(
                    f"  {SUBJECT} vs {other}: n = {c['n_rounds']} scenario rounds, {c['discordant']} differ "
                    f"({SUBJECT} better in {c['a_better']}, {other} better in {c['b_better']}); "
                    f"sign test p = {c['sign_test_p']:.3g}; difference {100 * c['difference']:+.1f} points "
                    f"[{100 * ci[0]:+.1f}, {100 * ci[1]:+.1f}] — {verdict}"
                )
            )
        if SUBJECT in self.agents and BASELINE in self.agents:
            test = paired_test(records(self.log, SUBJECT), records(self.log, BASELINE))
            if test is not None:
                lines.append(
                    Text(
                        f"  per trial (scenario × seed × round, treats seeds as independent, so overstates the "
                        f"evidence): McNemar only {SUBJECT} right {test.a_only}, only {BASELINE} right "
                        f"{test.b_only}, p = {test.p_value:.4g}",
                        style="dim",
                    )
                )
        return Group(*lines)

    def scenario_table(self) -> Table:
        """Per scenario: round-level accuracy of every agent and episodic's paired result against each."""
        table = Table(title=f"per scenario, by round (seeds averaged): accuracy; {SUBJECT} vs each other agent")
        table.add_column("scenario")
        table.add_column("rounds", justify="right")
        for agent in self.agents:
            table.add_column(agent, justify="right")
        for scenario in (s["name"] for s in self.log["scenarios"]):
            per_agent = {a: [r for r in records(self.log, a) if r.scenario == scenario] for a in self.agents}
            versus = comparisons(per_agent, SUBJECT)
            cells = []
            for agent in self.agents:
                rows = per_agent[agent]
                accuracy = _pct(sum(r.first_correct for r in rows) / len(rows)) if rows else "—"
                c = versus.get(agent)
                if c is not None:
                    accuracy += (
                        f" ({SUBJECT} +{c['a_better']}/−{c['b_better']}, p={c['sign_test_p']:.2g}"
                        + ("" if c["significant"] else ", n.s.")
                        + ")"
                    )
                cells.append(accuracy)
            n = len({r.round for rows in per_agent.values() for r in rows})
            table.add_row(scenario, str(n), *cells)
        table.caption = (
            f"(+a/−b): rounds where {SUBJECT} was better / worse on the seed-averaged first attempt; "
            "exact sign test over those rounds; n.s. = not significant at 0.05"
        )
        return table

    def retrieval_table(self) -> Table:
        """What the memories handed the reasoner, and how it went."""
        table = Table(title="retrieval quality (first attempts)")
        for column in (
            "agent",
            "items",
            "with outcome labels",
            "evidence hit@1",
            "hit@k",
            "other-cause items",
            "facts fired",
            "fact precision",
            "pattern applied ✓",
            "false positives ✗",
            "ms/round",
        ):
            table.add_column(column, justify="right" if column != "agent" else "left")
        for agent in self.agents:
            s = self.log["agents"][agent]["summary"]
            r = s.get("retrieval", {})
            table.add_row(
                agent,
                str(r.get("items_retrieved", 0)),
                _pct(r.get("labelled_share")),
                _pct(r.get("evidence_hit1")),
                _pct(r.get("evidence_hitk")),
                _pct(r.get("other_cause_share")),
                str(r.get("fact_firings", 0)),
                _pct(r.get("fact_precision")),
                str(r.get("pattern_applications", 0)),
                str(r.get("false_positives", 0)),
                f"{s.get('latency_ms_per_round') or 0:.2f}",
            )
        table.caption = (
            "evidence hit@1 / hit@k: over rounds whose cause occurred before, the top / any retrieved "
            "episode or chunk comes from an earlier round with the same true cause (simulator "
            "provenance, whatever the reasoner did); other-cause items: share of traced items from "
            "rounds of a different cause; fact precision: share of facts handed to first attempts "
            "whose conclusion was the round's truth; pattern applied: first decision relied on memory and was "
            "right; false positive: relied on memory and was wrong"
        )
        return table

    def layers_table(self) -> Table | None:
        """Layer quality against the simulator's ground truth (episodic agents)."""
        rows = [(a, self.log["agents"][a]["layers"]) for a in self.agents if self.log["agents"][a].get("layers")]
        if not rows:
            return None
        edge_types = sorted({t for _, layers in rows for t in layers.get("edges", {})})
        table = Table(title="memory layers vs ground truth (mean over runs)")
        table.add_column("agent")
        table.add_column("boundary F1", justify="right")
        table.add_column("outcome acc.", justify="right")
        for edge_type in edge_types:
            table.add_column(f"{edge_type} P/R", justify="right")
        for agent, layers in rows:
            cells = []
            for edge_type in edge_types:
                e = layers.get("edges", {}).get(edge_type, {})
                cells.append(f"{_pct(e.get('precision'))}/{_pct(e.get('recall'))}")
            table.add_row(agent, f"{layers.get('boundary_f1', 0):.3f}", _pct(layers.get("outcome_accuracy")), *cells)
        return table

    def usage_table(self) -> Table:
        """Tokens, cost and latency (Claude mode)."""
        table = Table(title="LLM usage")
        for column in ("agent", "input tokens", "output tokens", "cost (USD)", "ms/round"):
            table.add_column(column, justify="right" if column != "agent" else "left")
        for agent in self.agents:
            s = self.log["agents"][agent]["summary"]
            table.add_row(
                agent,
                str(s.get("input_tokens", 0)),
                str(s.get("output_tokens", 0)),
                f"{s.get('cost_usd', 0):.4f}",
                f"{s.get('latency_ms_per_round') or 0:.0f}",
            )
        return table


def report_console() -> Console:
    """The console reports print to: the terminal's width, or 160 columns when piped."""
    return Console() if sys.stdout.isatty() else Console(width=160)
