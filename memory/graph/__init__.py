"""Layer 3, the episode graph: typed, weighted, evidenced causal edges between episodes.

`edges` holds the graph's records (`Edge`, `EdgeType`); `rules` infers the edges a newly closed
episode creates (`infer_edges`, pure; the rules are written out in its docstring), with
`attempts` (the attempt chain of a problem, the changes in place, the windows: `GraphConfig`),
`cause_rule` (the CAUSED_BY rule), `changes` (what an episode's fix changed: kind, what, where,
when) and `causes` (which earlier change caused an incident: competing hypotheses with calibrated
log-odds); `build` puts episodes and edges into a `networkx.MultiDiGraph`, `queries` answers
causal chains, neighbours, a subject's history and an edge's versions as plain functions over
that graph, `chain_cache` remembers chain narratives between recalls (`ChainCache`), `evidence`
lists the recent changes current observations implicate (for a decision), `export` writes
GraphML or DOT and `render` draws SVG or PNG (``python -m memory graph STORE --out graph.png``,
in `memory.cli.graph`: the package imports nothing above it).
"""

from memory.graph.attempts import DEFAULT_GRAPH_CONFIG, GraphConfig, attempt_chain
from memory.graph.build import (
    EpisodeGraph,
    add_edge_rows,
    add_edges,
    add_episode,
    add_episode_rows,
    build_graph,
)
from memory.graph.causes import DEFAULT_CAUSE_WEIGHTS, CauseWeights, Hypothesis
from memory.graph.chain_cache import ChainCache
from memory.graph.changes import ChangeRecord, change_record
from memory.graph.edges import Edge, EdgeType
from memory.graph.export import export_dot, export_graphml
from memory.graph.implicated import ChangeLink, recent_changes
from memory.graph.queries import (
    BACKWARD,
    FORWARD,
    CausalChain,
    Link,
    causal_chain,
    cause_links,
    causes_among,
    edge_history,
    later_attempts,
    neighbours,
    resolution,
    standing_edges,
    subject_history,
)
from memory.graph.render import render_graph
from memory.graph.rules import infer_edges, link_episodes

__all__ = [
    "BACKWARD",
    "DEFAULT_CAUSE_WEIGHTS",
    "DEFAULT_GRAPH_CONFIG",
    "FORWARD",
    "CausalChain",
    "ChainCache",
    "ChangeLink",
    "CauseWeights",
    "ChangeRecord",
    "Edge",
    "EdgeType",
    "EpisodeGraph",
    "GraphConfig",
    "Hypothesis",
    "Link",
    "add_edge_rows",
    "add_edges",
    "add_episode",
    "add_episode_rows",
    "attempt_chain",
    "build_graph",
    "causal_chain",
    "cause_links",
    "change_record",
    "causes_among",
    "edge_history",
    "export_dot",
    "export_graphml",
    "infer_edges",
    "later_attempts",
    "link_episodes",
    "neighbours",
    "recent_changes",
    "render_graph",
    "resolution",
    "standing_edges",
    "subject_history",
]
