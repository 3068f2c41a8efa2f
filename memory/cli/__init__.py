"""Command-line programs over the facade, kept out of the layers they read.

`graph` draws a store's episode graph (``python -m memory graph``; ``python -m memory.graph`` is
its older spelling). Like `memory.__main__` and `memory.mcp`, it sits on top: it opens a store
through `EpisodicMemory`, which the graph package itself never imports.
"""

from memory.cli import graph

__all__ = ["graph"]
