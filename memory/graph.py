"""Layer 3, the episode graph: typed, weighted, evidenced edges between episodes.

`infer_edges(new, history)` applies these rules to a newly closed episode and the recent
episodes of the same principal (never across principals; O(window)):

- RETRY_OF (new → failed): the new episode has a decision and continues the *attempt
  chain* of the same problem, and the most recent chain member with a decision failed
  (FAILURE, PARTIAL, or corrected). The attempt chain: going back in time, episodes of the
  same situation and subject, each within ``retry_window_s`` of the next, stopping at a
  SUCCESS or at the episode that opened the incident (the first one with observations).
  A new episode with observations of its own belongs to the chain only when they resemble
  the chain's (``retry_similarity``); otherwise it is a new incident.
- LEARNED_FROM (new → corrected): the new episode's decision follows a correction in the
  attempt chain, changes the corrected choice (the lesson applied), and did not fail.
- CAUSED_BY (incident → change): the new episode opens an incident (it has observations
  and no attempt chain) and an earlier episode within ``cause_window_s`` made a change
  (decisions or actions). Evidence, strongest first: an observation sentence with a causal
  cue ("caused by", "since … change", "after yesterday's fix", "added in the last fix",
  "was replaced last week") naming the earlier episode's subject (0.9); such a cue and the
  same subject (0.7); such a cue whose words resemble the change's summary, actions or
  corrections (``cause_similarity``, 0.5); no cue, the same subject, a successful episode
  that recorded actions (an explicit change) within ``uncued_cause_window_s`` (0.4).
  Among several candidates the most recent wins unless another matches the cue's words
  clearly better. A LED_TO edge mirrors each CAUSED_BY.
- LED_TO (earlier → later): the inverse view of every CAUSED_BY, and the next step of the
  same problem after an undecided step (the previous chain member has no outcome).
- CONTINUATION (new → resumed): the previous episode had another situation, and the latest
  episode of the new one's situation and subject is unfinished (no outcome, no
  correction) and within ``continuation_window_s``.
- CONTRADICTED (new → earlier): the new episode's final choice equals an earlier
  episode's, the outcomes are opposite (SUCCESS vs FAILURE), the incidents' observations
  are similar (``contradiction_similarity``), and they are different problems.

The graph itself is a `networkx.MultiDiGraph` (nodes: episode ids with attributes; edges
keyed by type with ``weight`` and ``evidence``); queries are plain functions over it.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from itertools import islice
from pathlib import Path
from typing import Any, Iterable, NamedTuple, Sequence

import networkx as nx

from memory.episodes import Edge, EdgeType, Episode, Outcome
from memory.snapshot import NodeAttrs, Pending


@dataclass(frozen=True)
class GraphConfig:
    """Windows and thresholds of the edge rules (see the module docstring)."""

    window: int = 200  # most recent episodes of the principal the rules look at
    retry_window_s: float = 6 * 3600.0  # max time between consecutive attempts at one problem
    retry_similarity: float = 0.5  # observation similarity for a re-observing episode to be a retry
    cause_window_s: float = 14 * 86400.0  # how far back an incident can be traced to a change
    uncued_cause_window_s: float = 12 * 3600.0  # same-subject successful change, no textual cue
    cause_similarity: float = 0.2  # cue sentence vs an unnamed change's text, to link it
    continuation_window_s: float = 24 * 3600.0  # max interruption before a resumed activity
    contradiction_similarity: float = 0.3  # observation similarity of two contradicting incidents


DEFAULT_GRAPH_CONFIG = GraphConfig()

_STOP = frozenset("the and for with from that this was were are has had have not but its into than then "
                  "after since all any per our out one two off via".split())
_TOKEN = re.compile(r"[a-z][a-z0-9_\-]{2,}")
_CHANGE = (r"(?:fix|fixes|change|changes|hotfix|workaround|remediation|mitigation|adjustment|moved|switched|"
           r"replaced|raised|lowered|introduced|added|removed|upgraded|migrated)")
_CAUSAL = re.compile(  # a causal connector before a change, or a reference to an earlier fix/change/incident
    r"\b(?:caused by|because of|due to|triggered by|introduced (?:by|in|with)|added (?:by|in|with)|since|after|"
    rf"following|started with)\b(?:\W+\w+){{0,5}}?\W+{_CHANGE}\b"
    r"|\b(?:last|previous|earlier|recent|yesterday's|last week's|this morning's)\b(?:\W+\w+){0,3}?\W+"
    r"(?:fix|fixes|change|changes|hotfix|workaround|incident)\b"
    rf"|\b(?:was|were|got|been)\s+{_CHANGE}\b(?:\W+\w+){{0,6}}?\W+(?:yesterday|last|earlier|ago)\b",
    re.IGNORECASE)
_SENTENCE = re.compile(r"(?<=[.;!?])\s+|\n")


def tokens(text: str) -> Counter[str]:
    """Content words of a text (lowercase, 3+ characters, no stopwords)."""
    return Counter(t for t in _TOKEN.findall(text.lower()) if t not in _STOP)


def similarity(a: Sequence[str], b: Sequence[str]) -> float:
    """Cosine similarity of the content-word counts of two sets of texts."""
    ca, cb = tokens(" ".join(a)), tokens(" ".join(b))
    if not ca or not cb:
        return 0.0
    dot = sum(ca[w] * cb[w] for w in ca.keys() & cb.keys())
    return dot / math.sqrt(sum(v * v for v in ca.values()) * sum(v * v for v in cb.values()))


def _same_problem(a: Episode, b: Episode) -> bool:
    if a.situation != b.situation:
        return False
    return a.subject is None or b.subject is None or a.subject == b.subject


def _failed(ep: Episode) -> bool:
    return bool(ep.decisions) and (ep.outcome in (Outcome.FAILURE, Outcome.PARTIAL) or bool(ep.corrections))


def _gap(later: datetime, earlier: datetime) -> float:
    return (later - earlier).total_seconds()


def _duration(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f} {unit}"
    return f"{seconds:.0f} s"


def _quote(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return f'"{text if len(text) <= limit else text[: limit - 1] + "…"}"'


def attempt_chain(new: Episode, history: Sequence[Episode], config: GraphConfig = DEFAULT_GRAPH_CONFIG) -> list[Episode]:
    """Earlier attempts at the problem `new` continues, most recent first (see RETRY_OF)."""
    chain: list[Episode] = []
    cursor = new.start
    for ep in reversed(history):
        if not _same_problem(ep, new):
            continue
        if _gap(cursor, ep.end) > config.retry_window_s or ep.outcome == Outcome.SUCCESS:
            break
        chain.append(ep)
        cursor = ep.start
        if ep.observations:
            break
    if chain and new.observations:
        opening = [ep for ep in chain if ep.observations]
        if not opening or similarity(new.observations, opening[-1].observations) < config.retry_similarity:
            return []
    return chain


def _incident_observations(history: Sequence[Episode], config: GraphConfig) -> dict[str, tuple[str, ...]]:
    """Episode id → observations of the incident it belongs to (its own, or its chain's)."""
    out: dict[str, tuple[str, ...]] = {}
    for position, ep in enumerate(history):
        if ep.observations:
            out[ep.id] = ep.observations
        else:
            chain = attempt_chain(ep, history[:position], config)
            out[ep.id] = out.get(chain[-1].id, ()) if chain else ()
    return out


def _retry_and_lesson(new: Episode, chain: list[Episode]) -> list[Edge]:
    edges: list[Edge] = []
    if not new.decisions or not chain:
        return edges
    failed = next((ep for ep in chain if ep.decisions), None)
    if failed is not None and _failed(failed):
        changed = bool(new.choices and failed.choices and new.choices[-1] not in failed.choices)
        gap = _gap(new.start, failed.end)
        before = f" '{failed.choices[-1]}'" if failed.choices else ""
        edges.append(Edge(new.id, failed.id, EdgeType.RETRY_OF, 0.9 if changed else 0.7,
                          f"new decision on {new.subject or new.situation} {_duration(gap)} after the "
                          f"{failed.outcome.value} attempt{before}"))
    corrected = next((ep for ep in chain if ep.corrections and ep.decisions), None)
    if corrected is not None and new.outcome != Outcome.FAILURE:
        if new.choices and corrected.choices:
            applied = new.choices[-1] not in corrected.choices
            change = f"choice '{new.choices[-1]}' instead of '{corrected.choices[-1]}'"
        else:
            applied = new.decisions[-1] != corrected.decisions[-1]
            change = "a different decision"
        if applied:
            weight = {Outcome.SUCCESS: 0.9, Outcome.PARTIAL: 0.7}.get(new.outcome, 0.5)
            edges.append(Edge(new.id, corrected.id, EdgeType.LEARNED_FROM, weight,
                              f"{change} after the correction {_quote(corrected.corrections[-1])}; "
                              f"outcome {new.outcome.value}"))
    return edges


def _mentions(sentence: str, subject: str | None) -> bool:
    return bool(subject) and re.search(rf"(?<![\w-]){re.escape(subject)}(?![\w-])", sentence, re.IGNORECASE) is not None


def _final_attempt(ep: Episode, history: Sequence[Episode], config: GraphConfig) -> Episode:
    """The last attempt at `ep`'s problem: the change that stayed in place."""
    current = ep
    for later in history:
        if later.first_seq <= current.last_seq or not _same_problem(later, current):
            continue
        if (current.outcome == Outcome.SUCCESS or later.observations or not (later.decisions or later.actions)
                or _gap(later.start, current.end) > config.retry_window_s):
            break
        current = later
    return current


def _recent_unless_closer(candidates: Sequence[Episode], closeness: dict[str, float], margin: float = 0.15) -> Episode:
    """The most recent candidate, unless another's words match the cue clearly better."""
    best = candidates[-1]
    for ep in candidates:
        if closeness[ep.id] >= closeness[best.id] + margin:
            best = ep
    return best


def _cause(new: Episode, history: Sequence[Episode], config: GraphConfig) -> list[Edge]:
    changes = [ep for ep in history if (ep.decisions or ep.actions)
               and 0 <= _gap(new.start, ep.end) <= config.cause_window_s]
    if not new.observations or not changes:
        return []
    cues = [s for text in new.observations for s in _SENTENCE.split(text) if _CAUSAL.search(s)]
    found: tuple[Episode, float, str] | None = None
    for sentence in cues:
        closeness = {ep.id: similarity([sentence], [ep.summary, *ep.actions, *ep.corrections]) for ep in changes}
        named = [ep for ep in changes if _mentions(sentence, ep.subject)]
        same = [ep for ep in changes if new.subject and ep.subject == new.subject]
        alike = [ep for ep in changes if closeness[ep.id] >= config.cause_similarity]
        if named:
            best = _recent_unless_closer(named, closeness)
            found = (best, 0.9, f"observation names {best.subject} with a causal cue: {_quote(sentence)}")
            break
        if same and (found is None or found[1] < 0.7):
            best = _recent_unless_closer(same, closeness)
            found = (best, 0.7, f"causal cue on the same subject {new.subject}: {_quote(sentence)}")
        elif alike and found is None:
            best = max(alike, key=lambda ep: (closeness[ep.id], ep.end))
            found = (best, 0.5, f"causal cue resembling that change (similarity {closeness[best.id]:.2f}): "
                                f"{_quote(sentence)}")
    if found is None and new.subject:
        recent = [ep for ep in changes if ep.subject == new.subject and ep.actions and ep.outcome == Outcome.SUCCESS
                  and _gap(new.start, ep.end) <= config.uncued_cause_window_s]
        if recent:
            ep = recent[-1]
            found = (ep, 0.4, f"incident on {new.subject} {_duration(_gap(new.start, ep.end))} after a change there")
    if found is None:
        return []
    target, weight, evidence = found
    target = _final_attempt(target, history, config)
    return [Edge(new.id, target.id, EdgeType.CAUSED_BY, weight, evidence),
            Edge(target.id, new.id, EdgeType.LED_TO, weight, f"inverse of CAUSED_BY: {evidence}")]


def _continuation(new: Episode, history: Sequence[Episode], config: GraphConfig) -> Edge | None:
    if not history or history[-1].situation == new.situation:
        return None
    resumed = next((ep for ep in reversed(history) if ep.situation == new.situation), None)
    if (resumed is None or not _same_problem(resumed, new) or resumed.outcome != Outcome.UNKNOWN
            or resumed.corrections or _gap(new.start, resumed.end) > config.continuation_window_s):
        return None
    between = sorted({ep.situation for ep in history if ep.first_seq > resumed.last_seq})
    return Edge(new.id, resumed.id, EdgeType.CONTINUATION, 0.8,
                f"{new.situation} resumed after {', '.join(between)}, "
                f"{_duration(_gap(new.start, resumed.end))} later, with no outcome in between")


def _contradiction(new: Episode, history: Sequence[Episode], chain: list[Episode], config: GraphConfig) -> Edge | None:
    opposite = {Outcome.SUCCESS: Outcome.FAILURE, Outcome.FAILURE: Outcome.SUCCESS}.get(new.outcome)
    if opposite is None or not new.choices:
        return None
    incident = _incident_observations(history, config)
    mine = new.observations or (incident.get(chain[-1].id, ()) if chain else ())
    in_chain = {ep.id for ep in chain}
    best: tuple[float, Episode] | None = None
    for ep in history:
        if ep.outcome != opposite or not ep.choices or ep.choices[-1] != new.choices[-1] or ep.id in in_chain:
            continue
        score = similarity(mine, incident.get(ep.id, ()))
        if score >= config.contradiction_similarity and (best is None or score > best[0]):
            best = (score, ep)
    if best is None:
        return None
    score, ep = best
    return Edge(new.id, ep.id, EdgeType.CONTRADICTED, round(score, 3),
                f"same choice '{new.choices[-1]}': {new.outcome.value} here, {ep.outcome.value} before "
                f"(observation similarity {score:.2f})")


def infer_edges(new: Episode, history: Sequence[Episode], *, config: GraphConfig = DEFAULT_GRAPH_CONFIG) -> list[Edge]:
    """Edges created by the rules for a newly closed episode (pure).

    Args:
        new: the episode just closed.
        history: earlier episodes (any principals, time order); only the last
            ``config.window`` of `new`'s principal are considered.
        config: windows and thresholds.
    """
    recent = [ep for ep in history if ep.principal == new.principal and ep.last_seq < new.first_seq]
    recent = sorted(recent, key=lambda ep: ep.first_seq)[-config.window:] if config.window > 0 else []
    chain = attempt_chain(new, recent, config)
    edges = _retry_and_lesson(new, chain)
    if not chain:
        edges.extend(_cause(new, recent, config))
    continuation = _continuation(new, recent, config)
    if continuation is not None:
        edges.append(continuation)
    elif chain and chain[0].outcome == Outcome.UNKNOWN and not chain[0].corrections:
        edges.append(Edge(chain[0].id, new.id, EdgeType.LED_TO, 0.6,
                          f"next step on {new.subject or new.situation} after an undecided step"))
    contradiction = _contradiction(new, recent, chain, config)
    if contradiction is not None:
        edges.append(contradiction)
    return edges


# -- the graph and its queries ------------------------------------------------------------

BACKWARD = (EdgeType.CAUSED_BY, EdgeType.RETRY_OF, EdgeType.LEARNED_FROM)  # point from later to earlier
FORWARD = (EdgeType.LED_TO,)  # points from earlier to later


class EpisodeGraph(nx.MultiDiGraph):
    """The episode graph: a MultiDiGraph whose node attributes may be filled from the episode on first read.

    Opening a large store adds nodes whose ``episode``, ``start``, ``end`` and ``summary``
    are read from the stored episode when first looked at (see `memory.snapshot.NodeAttrs`);
    every other attribute, and every edge, is there from the start.
    """

    node_attr_dict_factory = NodeAttrs


def add_episode_rows(G: nx.MultiDiGraph, ids: Sequence[str], principals: Sequence[str], situations: Sequence[str],
                     subjects: Sequence[str | None], first_seqs: Sequence[int], outcomes: Sequence[Outcome],
                     episodes: Any) -> None:
    """Add episode nodes in bulk from columns; the attributes `add_episode` sets, the deferred ones read from `episodes`."""
    G.add_nodes_from((i, {"episode": (p := Pending(episodes, i)), "principal": who, "situation": sit, "subject": sub,
                          "start": p, "end": p, "first_seq": seq, "outcome": out, "summary": p})
                     for i, who, sit, sub, seq, out in zip(ids, principals, situations, subjects, first_seqs, outcomes))


def add_episode(G: nx.MultiDiGraph, ep: Episode) -> None:
    """Add (or refresh) an episode node with its attributes."""
    G.add_node(ep.id, episode=ep, principal=ep.principal, situation=ep.situation, subject=ep.subject,
               start=ep.start, end=ep.end, first_seq=ep.first_seq, outcome=ep.outcome, summary=ep.summary)


def add_edges(G: nx.MultiDiGraph, edges: Iterable[Edge]) -> None:
    """Add edges keyed by type; a later record of the same key replaces the weight."""
    add_edge_rows(G, ((edge.source, edge.target, edge.type, edge.weight, edge.evidence) for edge in edges))


def add_edge_rows(G: nx.MultiDiGraph, rows: Iterable[tuple[str, str, EdgeType, float, str]]) -> None:
    """`add_edges` from (source, target, type, weight, evidence) rows."""
    add = G.add_edge  # one call per edge: cheaper than add_edges_from, which builds a view per edge
    for source, target, kind, weight, evidence in rows:
        add(source, target, kind.value, type=kind, weight=weight, evidence=evidence)


def build_graph(episodes: Iterable[Episode], edges: Iterable[Edge]) -> nx.MultiDiGraph:
    """A MultiDiGraph of episodes and typed edges."""
    G = EpisodeGraph()
    for ep in episodes:
        add_episode(G, ep)
    add_edges(G, edges)
    return G


class Link(NamedTuple):
    """One typed edge of a chain."""

    source: str  # episode id
    target: str  # episode id
    type: EdgeType  # relation


class CausalChain(NamedTuple):
    """What led to an episode, oldest first."""

    episode_ids: tuple[str, ...]  # episodes in time order, ending with (or containing) the queried one
    links: tuple[Link, ...]  # the typed edges among them, in time order of their later end
    edge_types: tuple[EdgeType, ...]  # types of `links`
    narrative: str  # one line, e.g. "incident → failed fix → correction → fix"


def _backward_view(G: nx.MultiDiGraph) -> nx.DiGraph:
    """Causal edges oriented from later to earlier episode (LED_TO reversed)."""
    view = nx.DiGraph()
    view.add_nodes_from(G)
    for u, v, data in G.edges(data=True):
        kind = data.get("type")
        if kind in BACKWARD:
            view.add_edge(u, v, type=kind)
        elif kind in FORWARD and not view.has_edge(v, u):
            view.add_edge(v, u, type=kind)
    return view


def _steps(ep: Episode | None, first: bool) -> list[str]:
    if ep is None:
        return ["episode"]
    steps = ["incident"] if ep.observations and (first or not ep.decisions) else []
    if ep.decisions or ep.actions:
        steps.append({Outcome.SUCCESS: "fix", Outcome.FAILURE: "failed fix",
                      Outcome.PARTIAL: "partial fix"}.get(ep.outcome, "decision"))
    if ep.corrections:
        steps.append("correction")
    return steps or [ep.situation]


def _sort_key(G: nx.MultiDiGraph, node: str) -> tuple[Any, ...]:
    data = G.nodes[node]
    return (data.get("start") or datetime.min, data.get("first_seq", 0), node)


def causal_chain(G: nx.MultiDiGraph, episode_id: str, *, max_hops: int = 3, max_episodes: int = 0) -> CausalChain:
    """Follow CAUSED_BY / RETRY_OF / LEARNED_FROM (and LED_TO backwards) to the roots.

    The walk is breadth-first, up to `max_hops` steps; with `max_episodes` > 0 it stops once
    that many episodes are reached (the nearest ones), so an episode that learned from many
    others, which learned from many more, reads as a chain and not as its whole ancestry.
    """
    if episode_id not in G:
        raise KeyError(f"episode {episode_id} is not in the graph")
    def backward_neighbours(node: str) -> Iterable[str]:
        for other, keyed in G.succ[node].items():
            if any(data.get("type") in BACKWARD for data in keyed.values()):
                yield other
        for other, keyed in G.pred[node].items():
            if any(data.get("type") in FORWARD for data in keyed.values()):
                yield other

    # A bounded breadth-first search over causal edges only: the cost depends on the
    # chain's neighbourhood, not on the size of the graph.
    walk = (v for _, v in nx.generic_bfs_edges(G, episode_id, neighbors=backward_neighbours, depth_limit=max_hops))
    reached = {episode_id} | set(islice(walk, max_episodes - 1) if max_episodes > 0 else walk)
    key = {n: _sort_key(G, n) for n in reached}
    nodes = sorted(reached, key=key.__getitem__)
    # The orientation of `_backward_view`, restricted to the reached episodes: (later, earlier) → type
    back: dict[tuple[str, str], EdgeType] = {}
    for u in nodes:
        for v, keyed in G.succ[u].items():
            if v not in reached:
                continue
            for data in keyed.values():
                kind = data.get("type")
                if kind in BACKWARD:
                    back[u, v] = kind
                elif kind in FORWARD and (v, u) not in back:
                    back[v, u] = kind
    links = tuple(sorted((Link(u, v, kind) for (u, v), kind in back.items()),
                         key=lambda link: (key[link.source], key[link.target])))
    words: list[str] = []
    for position, node in enumerate(nodes):
        words.extend(_steps(G.nodes[node].get("episode"), position == 0))
    return CausalChain(tuple(nodes), links, tuple(link.type for link in links), " → ".join(words))


class Neighbour(NamedTuple):
    """An adjacent episode and the edge that joins it."""

    episode_id: str  # the other episode
    type: EdgeType  # edge type
    weight: float  # edge weight
    evidence: str  # why the edge exists


def neighbours(G: nx.MultiDiGraph, episode_id: str, *, edge_type: EdgeType | str | None = None,
               direction: str = "out") -> list[Neighbour]:
    """Adjacent episodes, strongest edge first; direction "out", "in" or "both"."""
    if direction not in ("out", "in", "both"):
        raise ValueError(f"direction must be 'out', 'in' or 'both', not {direction!r}")
    wanted = EdgeType(edge_type) if edge_type is not None else None
    found: list[Neighbour] = []
    if direction in ("out", "both"):
        found += [Neighbour(v, d["type"], d["weight"], d["evidence"]) for _, v, d in G.out_edges(episode_id, data=True)]
    if direction in ("in", "both"):
        found += [Neighbour(u, d["type"], d["weight"], d["evidence"]) for u, _, d in G.in_edges(episode_id, data=True)]
    found = [n for n in found if wanted is None or n.type == wanted]
    return sorted(found, key=lambda n: (-n.weight, _sort_key(G, n.episode_id), n.type.value))


def subject_history(G: nx.MultiDiGraph, subject: str, *, principal: str | None = None) -> list[str]:
    """Episode ids about `subject`, oldest first."""
    nodes = [n for n, d in G.nodes(data=True) if d.get("subject") == subject
             and (principal is None or d.get("principal") == principal)]
    return sorted(nodes, key=lambda n: _sort_key(G, n))


# -- export ---------------------------------------------------------------------------------

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


def plain_graph(G: nx.MultiDiGraph) -> nx.MultiDiGraph:
    """A copy whose attributes are strings or numbers (what GraphML and DOT accept)."""
    H = nx.MultiDiGraph()
    for node, data in G.nodes(data=True):
        H.add_node(node, **{k: _plain(v) for k, v in data.items() if k != "episode"})
    for u, v, key, data in G.edges(keys=True, data=True):
        H.add_edge(u, v, key=key, **{k: _plain(v_) for k, v_ in data.items()})
    return H


def export_graphml(G: nx.MultiDiGraph, path: str | Path) -> None:
    """Write GraphML with networkx's writer (enums, times and None become strings)."""
    nx.write_graphml(plain_graph(G), str(path))


def _dot_quote(value: Any) -> str:
    return '"' + str(_plain(value)).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def write_dot(G: nx.MultiDiGraph, path: str | Path) -> None:
    """Minimal DOT writer used when pydot is absent: one statement per node and edge."""
    H = plain_graph(G)
    lines = ["digraph episodes {"]
    for node, data in H.nodes(data=True):
        attrs = ", ".join(f"{k}={_dot_quote(v)}" for k, v in sorted(data.items()))
        lines.append(f"  {_dot_quote(node)} [{attrs}];")
    for u, v, key, data in H.edges(keys=True, data=True):
        attrs = ", ".join(f"{k}={_dot_quote(val)}" for k, val in sorted({**data, "key": key}.items()))
        lines.append(f"  {_dot_quote(u)} -> {_dot_quote(v)} [{attrs}];")
    lines.append("}")
    Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8")


def export_dot(G: nx.MultiDiGraph, path: str | Path) -> None:
    """Write DOT with networkx's pydot writer when pydot is installed, else `write_dot`."""
    try:
        from networkx.drawing.nx_pydot import write_dot as pydot_write
        import pydot  # noqa: F401
    except ImportError:
        write_dot(G, path)
        return
    pydot_write(plain_graph(G), str(path))
