"""Named agent configurations the harness compares (no keyword soup at call sites)."""

from __future__ import annotations

from dataclasses import dataclass

from agent.agents import DEFAULT_BUDGET, Budget, EpisodicAgent, NoMemoryAgent
from agent.reasoner import Reasoner
from baseline import ClassifierAgent, FlatRAGAgent
from eval.runner import TracedAgent
from memory.agent_memory import EpisodicMemory
from memory.retrieval import config as retriever_module
from memory.timeline import Encoder


@dataclass(frozen=True)
class AgentPreset:
    """How to build one named agent."""

    name: str  # agent name in reports and logs
    memory: str  # "episodic", "flat_rag", "classifier" or "none"
    retriever: str = "DEFAULT"  # retriever preset name in memory.retrieval.config (episodic only)
    outcome_labels: bool = True  # hand outcome labels to the reasoner (episodic only)
    window: int = 4  # events per chunk (flat_rag only; stride is half a window, at least 1)
    units: bool = True  # hand past incidents over as units (episodic only)
    graph_evidence: bool = True  # hand over changes the graph implicates and weigh precedents by credit (episodic only)
    description: str = ""  # one line for --help


PRESETS: dict[str, AgentPreset] = {
    p.name: p
    for p in (
        AgentPreset("episodic", "episodic", description="full episodic memory"),
        AgentPreset("flat_rag", "flat_rag", description="top-k windows of 4 consecutive events by cosine"),
        AgentPreset("flat_rag-events", "flat_rag", window=1, description="top-k single events by cosine (weaker)"),
        AgentPreset("no_memory", "none", description="no memory (lower bound)"),
        AgentPreset(
            "classifier",
            "classifier",
            description="no episodic memory: naive Bayes over past rounds' observations, learned from their fixes",
        ),
        AgentPreset(
            "episodic-no-graph",
            "episodic",
            retriever="NO_GRAPH",
            graph_evidence=False,
            description="ablation: no graph (no proximity, chains, change evidence or credit)",
        ),
        AgentPreset("episodic-no-facts", "episodic", retriever="NO_FACTS", description="ablation: no facts"),
        AgentPreset(
            "episodic-no-outcomes",
            "episodic",
            retriever="NO_OUTCOME_LABELS",
            outcome_labels=False,
            description="ablation: episodes without outcome labels",
        ),
        AgentPreset("episodic-no-mmr", "episodic", retriever="NO_MMR", description="ablation: no MMR diversity"),
        AgentPreset(
            "episodic-no-units",
            "episodic",
            units=False,
            description="ablation: episodes one by one instead of whole incidents",
        ),
    )
}
DEFAULT_AGENTS = ("episodic", "flat_rag", "no_memory")


def build_agent(
    preset: AgentPreset,
    reasoner: Reasoner,
    encoder: Encoder,
    *,
    store_path: str | None = None,
    principal: str = "agent",
    budget: Budget = DEFAULT_BUDGET,
) -> TracedAgent:
    """Construct the agent a preset names; episodic memory persists to `store_path` when given."""
    if preset.memory == "none":
        return NoMemoryAgent(reasoner, budget)
    if preset.memory == "classifier":
        return ClassifierAgent(reasoner, budget, name=preset.name)
    if preset.memory == "flat_rag":
        return FlatRAGAgent(
            reasoner, encoder, budget, window=preset.window, stride=max(1, preset.window // 2), name=preset.name
        )
    config = getattr(retriever_module, preset.retriever)
    memory = EpisodicMemory(store_path, principal=principal, encoder=encoder, retriever=config)
    return EpisodicAgent(
        reasoner,
        memory,
        budget,
        name=preset.name,
        outcome_labels=preset.outcome_labels,
        principal=principal,
        units=preset.units,
        graph_evidence=preset.graph_evidence,
    )
