"""A picture of the episode graph, or of one causal chain: SVG or PNG.

`render_graph` draws with Graphviz ``dot`` when it is on the PATH (from the DOT export), else
with matplotlib (the ``plots`` extra): episodes left to right in time order, one lane per
service, each node labelled with its service, outcome, time and the first words of what it saw
or did (and its change, when it made one); edges coloured by type and labelled with their
weight. Interludes (episodes without decisions or observations of a service) are left out
unless `everything` is asked for; `nodes` restricts the picture to some episodes, e.g. a chain.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import textwrap
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import networkx as nx

from memory.episodes import Episode, Outcome
from memory.graph.changes import change_record
from memory.lexicon import DEFAULT_LEXICON, Lexicon

if TYPE_CHECKING:  # matplotlib is an optional extra (``plots``), imported only when drawing
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

EDGE_COLOURS = {
    "CAUSED_BY": "#d62728",
    "LED_TO": "#bbbbbb",
    "RETRY_OF": "#1f77b4",
    "LEARNED_FROM": "#2ca02c",
    "CONTINUATION": "#9467bd",
    "CONTRADICTED": "#ff7f0e",
}
OUTCOME_COLOURS = {
    Outcome.SUCCESS: "#d9f2d9",
    Outcome.FAILURE: "#f9d6d5",
    Outcome.PARTIAL: "#fdebc8",
    Outcome.UNKNOWN: "#eeeeee",
}
DRAWN_TYPES = ("CAUSED_BY", "RETRY_OF", "LEARNED_FROM", "CONTINUATION", "CONTRADICTED")  # LED_TO mirrors these


def picture_nodes(
    G: nx.MultiDiGraph,
    episodes: Callable[[str], Episode | None],
    *,
    nodes: Iterable[str] | None = None,
    everything: bool = False,
) -> list[Episode]:
    """The episodes a picture shows, in time order."""
    chosen = [episodes(n) for n in (nodes if nodes is not None else G.nodes)]
    shown = [ep for ep in chosen if ep is not None and (everything or ep.decisions or ep.observations and ep.subject)]
    return sorted(shown, key=lambda ep: (ep.start, ep.first_seq))


def node_caption(ep: Episode, *, width: int = 26, lexicon: Lexicon = DEFAULT_LEXICON) -> str:
    """A short multi-line caption: service · outcome, time, what it saw or did, its change (read with `lexicon`)."""
    head = f"{ep.subject or ep.situation} · {ep.outcome.value.lower()}"
    said = ep.observations[0] if ep.observations else (ep.choices[-1] if ep.choices else ep.summary)
    lines = [head, f"{ep.start:%m-%d %H:%M}", *textwrap.wrap(said, width)[:2]]
    change = change_record(ep, lexicon=lexicon)
    if change is not None and change.what:
        lines.append(textwrap.shorten(f"{change.kind}: {change.what}", width + 6, placeholder="…"))
    return "\n".join(lines)


def render_graph(
    G: nx.MultiDiGraph,
    path: str | Path,
    *,
    episodes: Callable[[str], Episode | None],
    nodes: Iterable[str] | None = None,
    everything: bool = False,
    engine: str = "auto",
    title: str | None = None,
    lexicon: Lexicon = DEFAULT_LEXICON,
) -> str:
    """Draw the graph (or `nodes` of it) to `path` (.svg or .png); returns the engine used.

    Args:
        G: the episode graph.
        path: output file; its suffix picks the format.
        episodes: episode lookup by id.
        nodes: only these episodes (e.g. ``causal_chain(...).episode_ids``).
        everything: also draw episodes without decisions or a service's observations.
        engine: "dot", "matplotlib" or "auto" (dot when installed).
        title: a title for the picture.
        lexicon: the words the episodes' change records are read with.
    """
    shown = picture_nodes(G, episodes, nodes=nodes, everything=everything)
    path = Path(path)
    if engine not in ("auto", "dot", "matplotlib"):
        raise ValueError(f"unknown engine {engine!r} (known: auto, dot, matplotlib)")
    if engine == "dot" or (engine == "auto" and shutil.which("dot")):
        _render_dot(G, shown, path, title, lexicon)
        return "dot"
    _render_matplotlib(G, shown, path, title, lexicon)
    return "matplotlib"


def _shown_edges(G: nx.MultiDiGraph, ids: set[str]) -> list[tuple[str, str, str, float]]:
    return [
        (u, v, str(d.get("type", k)), float(d.get("weight", 0.0)))
        for u, v, k, d in G.edges(keys=True, data=True)
        if u in ids and v in ids and str(d.get("type", k)) in DRAWN_TYPES
    ]


def _quote(text: str) -> str:
    """`text` as a DOT string (quoted, with backslashes, quotes and newlines escaped)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _render_dot(G: nx.MultiDiGraph, shown: list[Episode], path: Path, title: str | None, lexicon: Lexicon) -> None:
    lines = ["digraph episodes {", "  rankdir=LR; node [shape=box, style=filled, fontsize=10];"]
    if title:
        lines.append(f"  label={_quote(title)}; labelloc=t;")
    for ep in shown:
        caption = node_caption(ep, lexicon=lexicon)
        lines.append(f"  {_quote(ep.id)} [label={_quote(caption)}, fillcolor={_quote(OUTCOME_COLOURS[ep.outcome])}];")
    for u, v, kind, weight in _shown_edges(G, {ep.id for ep in shown}):
        lines.append(
            f"  {_quote(u)} -> {_quote(v)} [label={_quote(f'{kind} {weight:.2f}')}, "
            f"color={_quote(EDGE_COLOURS[kind])}, fontcolor={_quote(EDGE_COLOURS[kind])}];"
        )
    lines.append("}")
    with tempfile.NamedTemporaryFile("w", suffix=".dot", delete=False, encoding="utf-8") as handle:
        handle.write("\n".join(lines) + "\n")
    try:
        subprocess.run(["dot", f"-T{path.suffix.lstrip('.') or 'svg'}", handle.name, "-o", str(path)], check=True)
    finally:
        Path(handle.name).unlink(missing_ok=True)


def bends(edges: Iterable[tuple[str, str, str, float]]) -> list[float]:
    """matplotlib ``arc3`` ``rad`` of each edge: each further edge between the same two nodes bows
    more, on alternating sides; CAUSED_BY bows the other way from the rest."""
    seen: dict[frozenset[str], int] = {}
    out = []
    for u, v, kind, _ in edges:
        k = seen[frozenset((u, v))] = seen.get(frozenset((u, v)), -1) + 1
        out.append((0.3 if kind == "CAUSED_BY" else -0.3) * (1 + 0.8 * k) * (-1) ** k)
    return out


def arc_middle(start: tuple[float, float], end: tuple[float, float], bend: float) -> tuple[float, float]:
    """The middle of matplotlib's ``arc3,rad=bend`` curve from `start` to `end` (display coordinates).

    ``arc3`` is a quadratic Bézier whose control point is the chord's middle moved ``bend`` times
    (dy, −dx); the curve's middle lies halfway to it.
    """
    (x1, y1), (x2, y2) = start, end
    return (x1 + x2) / 2 + bend / 2 * (y2 - y1), (y1 + y2) / 2 - bend / 2 * (x2 - x1)


def _render_matplotlib(
    G: nx.MultiDiGraph, shown: list[Episode], path: Path, title: str | None, lexicon: Lexicon
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lanes = list(dict.fromkeys(ep.subject or ep.situation for ep in shown))
    place = {ep.id: (i * 3.4, -lanes.index(ep.subject or ep.situation) * 1.9) for i, ep in enumerate(shown)}
    edges = _shown_edges(G, set(place))
    curves = bends(edges)
    width = max(8.0, 1.6 * len(shown) + 2)
    fig, ax = plt.subplots(figsize=(width, max(4.0, 1.25 * len(lanes) + 1.5)))
    _draw_edges(ax, place, edges, curves)
    _draw_nodes(ax, shown, place, lexicon)
    rows = _draw_lanes(ax, place, lanes, title)
    with warnings.catch_warnings():  # a character the font lacks (an emoji in a scenario's text) is drawn as a box
        warnings.filterwarnings("ignore", message="Glyph .* missing from font", category=UserWarning)
        middles = fit_curves(fig, ax, [(place[u], place[v]) for u, v, *_ in edges], curves, rows, width)
        _label_edges(ax, edges, middles)
        fig.tight_layout()
        fig.savefig(path, dpi=130)
    plt.close(fig)


def _draw_edges(
    ax: Axes, place: dict[str, tuple[float, float]], edges: list[tuple[str, str, str, float]], curves: list[float]
) -> None:
    """Each edge as an arrow bowed by its curve (`bends`), coloured by its type."""
    from matplotlib.patches import FancyArrowPatch

    for (u, v, kind, _), bend in zip(edges, curves):
        ax.add_patch(
            FancyArrowPatch(
                place[u],
                place[v],
                connectionstyle=f"arc3,rad={bend}",
                arrowstyle="-|>",
                mutation_scale=14,
                color=EDGE_COLOURS[kind],
                lw=2.2 if kind == "CAUSED_BY" else 1.4,
                shrinkA=30,
                shrinkB=30,
                zorder=1,
            )
        )


def _draw_nodes(ax: Axes, shown: list[Episode], place: dict[str, tuple[float, float]], lexicon: Lexicon) -> None:
    """Each episode as its caption (`node_caption`) in a box coloured by its outcome."""
    for ep in shown:
        x, y = place[ep.id]
        ax.text(
            x,
            y,
            node_caption(ep, lexicon=lexicon),
            ha="center",
            va="center",
            fontsize=6.8,
            zorder=2,
            bbox={"boxstyle": "round,pad=0.35", "fc": OUTCOME_COLOURS[ep.outcome], "ec": "#555555"},
        )


def _draw_lanes(ax: Axes, place: dict[str, tuple[float, float]], lanes: list[str], title: str | None) -> list[float]:
    """The axes: one lane per service (its name as the tick), the edge types' legend, the title; the lanes' rows."""
    from matplotlib.lines import Line2D

    xs = [p[0] for p in place.values()] or [0.0]
    rows = sorted({p[1] for p in place.values()}) or [0.0]
    ax.set_xlim(min(xs) - 1.6, max(xs) + 1.6)
    ax.set_yticks(rows)
    ax.set_yticklabels([lanes[int(round(-y / 1.9))] for y in rows], fontsize=8)
    ax.set_xticks([])
    ax.spines[["top", "right", "bottom"]].set_visible(False)
    ax.legend(
        handles=[Line2D([0], [0], color=EDGE_COLOURS[k], lw=2, label=k) for k in DRAWN_TYPES],
        loc="upper center",
        bbox_to_anchor=(0.5, -0.02),
        ncol=len(DRAWN_TYPES),
        fontsize=8,
        frameon=False,
    )
    if title:
        ax.set_title(title, fontsize=11)
    return rows


def _label_edges(ax: Axes, edges: list[tuple[str, str, str, float]], middles: list[tuple[float, float]]) -> None:
    """Each edge's type and weight at the middle of its curve."""
    for (_, _, kind, weight), (mx, my) in zip(edges, middles):
        ax.text(
            mx,
            my,
            f"{kind} {weight:.2f}",
            color=EDGE_COLOURS[kind],
            fontsize=7.5,
            ha="center",
            va="center",
            zorder=3,
            bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.85},
        )


def fit_curves(
    fig: Figure,
    ax: Axes,
    ends: list[tuple[tuple[float, float], tuple[float, float]]],
    curves: list[float],
    rows: list[float],
    width: float,
) -> list[tuple[float, float]]:
    """Grow the vertical limits (and the figure with them) until they hold every curve; the curves' middles.

    ``arc3`` bows in display space, so how far a curve leaves its lanes, in data units, depends on the
    axes' scale; a long edge between close lanes would otherwise leave the picture.
    """
    low, high = min(rows) - 1.2, max(rows) + 1.2
    middles: list[tuple[float, float]] = []
    for _ in range(4):
        fig.set_size_inches(width, max(4.0, 0.66 * (high - low) + 1.5))
        ax.set_ylim(low, high)
        fig.tight_layout()
        to_display, to_data = ax.transData.transform, ax.transData.inverted().transform
        middles = []
        for (a, b), bend in zip(ends, curves):
            (x1, y1), (x2, y2) = to_display(a), to_display(b)
            mx, my = to_data(arc_middle((x1, y1), (x2, y2), bend))
            middles.append((mx, my))
        ys = [y for _, y in middles]
        wanted = (min([low, *(y - 0.6 for y in ys)]), max([high, *(y + 0.6 for y in ys)]))
        if wanted == (low, high):
            break
        low, high = wanted
    return middles
