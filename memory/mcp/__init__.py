"""The memory as an MCP server: ``python -m memory.mcp --store PATH --principal NAME`` (stdio).

`build_server` puts one `EpisodicMemory` behind MCP tools (record observation, decision,
outcome and correction; end an episode; recall; list facts with history; verify the store)
on the official ``mcp`` SDK, an optional dependency (``pip install 'episodic-memory[mcp]'``).
"""

from memory.mcp.server import build_server

__all__ = ["build_server"]
