"""Export of the episode graph to GraphML and DOT (attributes made plain strings and numbers)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from enum import Enum
from pathlib import Path
from typing import Any

import networkx as nx

from memory.episodes import Episode
from memory.graph.build import change_attributes
from memory.lexicon import DEFAULT_LEXICON, Lexicon


def _plain(value: Any) -> str | int | float | bool:
    if isinstance(value, Enum):
        return str(value.value)
    if isinstance(value, datetime):
        return value.isoformat()
    if value is None:
        return ""
    if isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def plain_graph(
    G: nx.MultiDiGraph, episodes: Callable[[str], Episode | None] | None = None, lexicon: Lexicon = DEFAULT_LEXICON
) -> nx.MultiDiGraph:
    """A copy whose attributes are strings or numbers (what GraphML and DOT accept).

    Every node and edge gets a readable ``label`` (what graph viewers show instead of the
    64-hex id): with `episodes` (a lookup by id) a node's label is the episode's summary,
    outcome and start, and the node also carries summary, start and end; without it, the
    label is the subject, situation and outcome. An edge's label is its type and weight. An
    episode that made a change also carries its change record (`memory.graph.build.change_attributes`, read
    with `lexicon`).
    """
    H = nx.MultiDiGraph()
    for node, data in G.nodes(data=True):
        episode = episodes(node) if episodes is not None else None
        more = (
            {
                "summary": episode.summary,
                "start": episode.start,
                "end": episode.end,
                **change_attributes(episode, lexicon),
            }
            if episode is not None
            else {}
        )
        attrs = {k: _plain(v) for k, v in {**data, **more}.items()}
        attrs["label"] = _node_label(node, data, episode)
        H.add_node(node, **attrs)
    for u, v, key, data in G.edges(keys=True, data=True):
        attrs = {k: _plain(v_) for k, v_ in data.items()}
        attrs["label"] = _edge_label(key, data)
        H.add_edge(u, v, key=key, **attrs)
    return H


_LABEL_CHARS = 80  # a summary longer than this is cut, so a drawn node stays legible


def _node_label(node: str, data: dict[str, Any], episode: Episode | None) -> str:
    outcome = _plain(data.get("outcome"))
    if episode is not None:
        summary = episode.summary if len(episode.summary) <= _LABEL_CHARS else episode.summary[: _LABEL_CHARS - 1] + "…"
        return f"{summary}\n{episode.outcome.value} · {episode.start:%Y-%m-%d %H:%M}"
    parts = [str(p) for p in (data.get("subject"), data.get("situation")) if p]
    return " · ".join(parts + [str(outcome or "UNKNOWN"), str(node)[:12]])


def _edge_label(key: Any, data: dict[str, Any]) -> str:
    kind = _plain(data.get("type", key))
    weight = data.get("weight")
    return f"{kind} {weight:.2f}" if isinstance(weight, (int, float)) else str(kind)


Lookup = Callable[[str], Episode | None]


def export_graphml(
    G: nx.MultiDiGraph, path: str | Path, *, episodes: Lookup | None = None, lexicon: Lexicon = DEFAULT_LEXICON
) -> None:
    """Write GraphML with networkx's writer (enums, times and None become strings; see `plain_graph`)."""
    nx.write_graphml(plain_graph(G, episodes, lexicon), str(path))


def _dot_quote(value: Any) -> str:
    return '"' + str(_plain(value)).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def write_dot(
    G: nx.MultiDiGraph, path: str | Path, *, episodes: Lookup | None = None, lexicon: Lexicon = DEFAULT_LEXICON
) -> None:
    """Minimal DOT writer used when pydot is absent: one statement per node and edge."""
    H = plain_graph(G, episodes, lexicon)
    lines = ["digraph episodes {"]
    for node, data in H.nodes(data=True):
        attrs = ", ".join(f"{k}={_dot_quote(v)}" for k, v in sorted(data.items()))
        lines.append(f"  {_dot_quote(node)} [{attrs}];")
    for u, v, key, data in H.edges(keys=True, data=True):
        attrs = ", ".join(f"{k}={_dot_quote(val)}" for k, val in sorted({**data, "key": key}.items()))
        lines.append(f"  {_dot_quote(u)} -> {_dot_quote(v)} [{attrs}];")
    lines.append("}")
    Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8")


def export_dot(
    G: nx.MultiDiGraph, path: str | Path, *, episodes: Lookup | None = None, lexicon: Lexicon = DEFAULT_LEXICON
) -> None:
    """Write DOT with networkx's pydot writer when pydot is installed, else `write_dot`."""
    try:
        import pydot  # noqa: F401
        from networkx.drawing.nx_pydot import write_dot as pydot_write
    except ImportError:
        write_dot(G, path, episodes=episodes, lexicon=lexicon)
        return
    pydot_write(plain_graph(G, episodes, lexicon), str(path))
