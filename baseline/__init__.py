"""The baselines the episodic memory is compared against: the flat vector-RAG memories, windows of
consecutive events (`WindowedRAGMemory`, what the harness uses) and single texts (`FlatRAGMemory`),
with the agent over them (`FlatRAGAgent`), and the learning classifier peer (`ClassifierAgent`, over
a `CauseClassifier`). Both agents are built on the shared loop of `agent.agents`, which imports
nothing from here."""

from baseline.classifier import CauseClassifier, ClassifierAgent
from baseline.flat_rag import Chunk, FlatRAGAgent, FlatRAGMemory, ScoredChunk, Window, WindowedRAGMemory

__all__ = [
    "CauseClassifier",
    "Chunk",
    "ClassifierAgent",
    "FlatRAGAgent",
    "FlatRAGMemory",
    "ScoredChunk",
    "Window",
    "WindowedRAGMemory",
]
