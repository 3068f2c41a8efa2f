"""The baselines the episodic memory is compared against: the flat vector-RAG memories, windows of
consecutive events (`WindowedRAGMemory`, what the harness uses) and single texts (`FlatRAGMemory`),
and the learning classifier peer (`ClassifierAgent`, over a `CauseClassifier`)."""

from typing import Any

from baseline.flat_rag import Chunk, FlatRAGMemory, ScoredChunk, Window, WindowedRAGMemory

__all__ = ["CauseClassifier", "Chunk", "ClassifierAgent", "FlatRAGMemory", "ScoredChunk", "Window",
           "WindowedRAGMemory"]

LATER = ("CauseClassifier", "ClassifierAgent")  # built on `agent.agents`, which imports this package for its RAG memory


def __getattr__(name: str) -> Any:
    """The classifier peer, loaded on first use (PEP 562): loading it here would close the import cycle."""
    if name in LATER:
        import baseline.classifier as classifier

        return getattr(classifier, name)
    raise AttributeError(f"module 'baseline' has no attribute {name!r}")
