"""Figures of a run log with matplotlib (``pip install '.[plots]'``), PNG and SVG.

Agents differ by line style and marker as well as colour, so a figure reads in
grey-scale; every figure is titled with its scenario, mode and seeds. Everything drawn
comes from the log (`eval.outputs.curves`).
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from eval.outputs import curves
from memory.outputs import write_atomic

STYLES = (
    ("-", "o", "#1f4e79"),
    ("--", "s", "#c55a11"),
    (":", "^", "#548235"),
    ("-.", "D", "#7030a0"),
    ((0, (5, 1, 1, 1)), "v", "#7f6000"),
    ((0, (1, 1)), "x", "#404040"),
)  # (line, marker, colour) per agent
HATCHES = ("", "//", "..", "xx", "\\\\", "oo")


class PlotsUnavailable(RuntimeError):
    """matplotlib is not installed."""


def pyplot() -> Any:
    """matplotlib's pyplot on the Agg backend (no display needed)."""
    try:
        import matplotlib
    except ImportError as exc:
        raise PlotsUnavailable("figures need matplotlib: pip install '.[plots]' (or pip install matplotlib)") from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _style(i: int) -> dict[str, Any]:
    """Line style, marker and colour of the i-th agent; markers shrink and alternate hollow and
    filled so agents whose curves coincide still show one mark inside another."""
    line, marker, colour = STYLES[i % len(STYLES)]
    return {
        "linestyle": line,
        "marker": marker,
        "color": colour,
        "markersize": max(3.5, 10 - 2.5 * i),
        "markerfacecolor": "white" if i % 2 == 0 else colour,
        "markeredgewidth": 1.3,
        "zorder": 3 + i,
    }


def learning_curve_figure(log: dict[str, Any], scenario: str) -> Any:
    """Cumulative (top) and windowed (bottom) first-attempt accuracy over rounds, per agent; their 95%
    bands only when the scenario has enough rounds for them to say something (`curves.shows_bands`)."""
    plt = pyplot()
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 6.5), sharex=True)
    window, rounds = None, 0
    for i, agent in enumerate(log["agents"]):
        points = curves.scenario_rounds(log, scenario, agent)
        if not points:
            continue
        curve = curves.learning_curve(agent, points)
        window, rounds = curve.window, max(rounds, len(points))
        style = _style(i)
        every = max(1, len(curve.x) // 12)
        for ax, values, band in (
            (top, curve.cumulative, curve.cumulative_band),
            (bottom, curve.windowed, curve.windowed_band),
        ):
            ax.plot(curve.x, values, label=agent, markevery=every, linewidth=1.6, **style)
            if curves.shows_bands(len(points)):
                _band(ax, curve.x, band, style)
    top.set_ylabel("cumulative accuracy")
    bottom.set_ylabel(f"accuracy, last {window} rounds")
    bottom.set_xlabel("round (position in the scenario)")
    for ax in (top, bottom):
        ax.set_ylim(-0.02, 1.02)
        ax.grid(True, color="#dddddd", linewidth=0.6)
    top.legend(loc="lower right", frameon=True, fontsize=9)
    top.set_title(f"Learning curve: first-attempt accuracy\n{curves.title(log, scenario)}", fontsize=11)
    note = (
        "bands (thin lines): 95% Wilson interval over rounds (seeds averaged within a round)"
        if curves.shows_bands(rounds)
        else f"no bands: {rounds} rounds are too few for a useful 95% interval (bands from "
        f"{curves.BAND_MIN_ROUNDS} rounds on); the report gives the intervals"
    )
    fig.text(0.01, 0.005, note, fontsize=8, color="#444444")
    fig.tight_layout(rect=(0, 0.02, 1, 1))
    return fig


def _band(ax: Any, x: Any, band: Any, style: dict[str, Any]) -> None:
    """A 95% band, faintly filled, its edges in the agent's line style (bands stay apart in grey-scale)."""
    ax.fill_between(x, [b[0] for b in band], [b[1] for b in band], color=style["color"], alpha=0.07, linewidth=0)
    for edge in (0, 1):
        ax.plot(
            x, [b[edge] for b in band], color=style["color"], linestyle=style["linestyle"], linewidth=0.6, alpha=0.7
        )


def kind_figure(log: dict[str, Any]) -> Any:
    """First-attempt accuracy per round kind and agent, with 95% intervals."""
    plt = pyplot()
    table = curves.kind_accuracy(log)
    kinds, agents = list(table), list(log["agents"])
    fig, ax = plt.subplots(figsize=(min(13.0, max(6.0, 0.45 * len(kinds) * max(1, len(agents)) + 2)), 4.5))
    width = 0.8 / max(1, len(agents))
    for i, agent in enumerate(agents):
        xs, values = [], []
        errors: tuple[list[float], list[float]] = ([], [])  # below and above each bar
        for k, kind in enumerate(kinds):
            if agent in table[kind]:
                value, low, high, _ = table[kind][agent]
                xs.append(k + (i - (len(agents) - 1) / 2) * width)
                values.append(value)
                errors[0].append(max(0.0, value - low))
                errors[1].append(max(0.0, high - value))
        style = _style(i)
        bars = ax.bar(
            xs,
            values,
            width * 0.95,
            yerr=errors,
            capsize=3,
            label=agent,
            facecolor=style["color"],
            edgecolor="black",
            hatch=HATCHES[i % len(HATCHES)],
            alpha=0.85,
            error_kw={"linewidth": 1},
        )
        ax.bar_label(bars, labels=[f"{v:.0%}" for v in values], fontsize=7, padding=2)  # a 0% bar has no height
    ax.set_xticks(range(len(kinds)), kinds)
    ax.set_ylim(0, 1.1)
    ax.set_ylabel("first-attempt accuracy")
    ax.grid(True, axis="y", color="#dddddd", linewidth=0.6)
    ax.set_axisbelow(True)
    ax.legend(fontsize=9, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.set_title(f"Accuracy per round kind (95% Wilson interval over seeds × rounds)\n{curves.title(log)}", fontsize=11)
    fig.tight_layout()
    return fig


def attempts_figure(log: dict[str, Any], scenario: str) -> Any:
    """Mean attempts per round (over seeds), per agent."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 3.8))
    top = 1.0
    for i, agent in enumerate(log["agents"]):
        points = curves.scenario_rounds(log, scenario, agent)
        if not points:
            continue
        x = list(range(1, len(points) + 1))
        top = max(top, max(p.attempts for p in points))
        ax.plot(
            x, [p.attempts for p in points], label=agent, markevery=max(1, len(x) // 12), linewidth=1.4, **_style(i)
        )
    ax.set_ylim(0.9, top + 0.2)
    ax.set_xlabel("round (position in the scenario)")
    ax.set_ylabel("attempts (mean over seeds)")
    ax.grid(True, color="#dddddd", linewidth=0.6)
    ax.legend(fontsize=9, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.set_title(f"Attempts per round\n{curves.title(log, scenario)}", fontsize=11)
    fig.tight_layout()
    return fig


def layers_figure(log: dict[str, Any]) -> Any | None:
    """Layer scores against the simulator's ground truth, per episodic agent (None without any)."""
    scores = curves.layer_scores(log)
    if not scores:
        return None
    plt = pyplot()
    names = list(dict.fromkeys(name for row in scores.values() for name in row))
    fig, ax = plt.subplots(figsize=(max(7.0, 0.9 * len(names) + 2), 4.5))
    width = 0.8 / len(scores)
    for i, (agent, row) in enumerate(scores.items()):
        xs = [k + (i - (len(scores) - 1) / 2) * width for k, name in enumerate(names) if name in row]
        style = _style(i)
        ax.bar(
            xs,
            [row[name] for name in names if name in row],
            width * 0.95,
            label=agent,
            facecolor=style["color"],
            edgecolor="black",
            hatch=HATCHES[i % len(HATCHES)],
            alpha=0.85,
        )
    ax.set_xticks(range(len(names)), names, rotation=30, ha="right")
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("score (mean over runs)")
    ax.grid(True, axis="y", color="#dddddd", linewidth=0.6)
    ax.set_axisbelow(True)
    ax.legend(fontsize=9, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.set_title(f"Memory layers vs ground truth\n{curves.title(log)}", fontsize=11)
    fig.tight_layout()
    return fig


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "scenario"


def figures(log: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """(file stem, figure) for every figure of `log`; the caller closes each figure."""
    for scenario in log["scenarios"]:
        yield f"learning-curve-{_slug(scenario['name'])}", learning_curve_figure(log, scenario["name"])
    yield "accuracy-by-kind", kind_figure(log)
    for scenario in log["scenarios"]:
        yield f"attempts-{_slug(scenario['name'])}", attempts_figure(log, scenario["name"])
    layers = layers_figure(log)
    if layers is not None:
        yield "layers", layers


def render(fig: Any, fmt: str) -> bytes:
    """The figure as PNG or SVG bytes."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format=fmt, dpi=110 if fmt == "png" else None)
    return buffer.getvalue()


def write_plots(log: dict[str, Any], directory: str | Path) -> list[Path]:
    """Write every figure as PNG and SVG under `directory` (created); the files written."""
    plt = pyplot()
    written = []
    for stem, fig in figures(log):
        try:
            for fmt in ("png", "svg"):
                written.append(write_atomic(Path(directory) / f"{stem}.{fmt}", render(fig, fmt)))
        finally:
            plt.close(fig)
    return written
