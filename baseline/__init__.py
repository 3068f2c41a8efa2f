"""The flat vector-RAG baseline memory the episodic memory is compared against."""

from baseline.flat_rag import Chunk, FlatRAGMemory, ScoredChunk

__all__ = ["Chunk", "FlatRAGMemory", "ScoredChunk"]
