"""The flat vector-RAG baselines the episodic memory is compared against: windows of consecutive
events (`WindowedRAGMemory`, what the harness uses) and single texts (`FlatRAGMemory`)."""

from baseline.flat_rag import Chunk, FlatRAGMemory, ScoredChunk, Window, WindowedRAGMemory

__all__ = ["Chunk", "FlatRAGMemory", "ScoredChunk", "Window", "WindowedRAGMemory"]
