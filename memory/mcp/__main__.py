"""``python -m memory.mcp``: serve a memory store to an MCP client over stdio."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

from memory.timeline import ENCODER_NAMES, named_encoder

_EXAMPLES = """examples:
  python -m memory.mcp --store ~/.agent-memory/memory.sqlite --principal team-a
  python -m memory.mcp --store runs/memory.sqlite --principal me --transport streamable-http --port 8765
  python -m memory.mcp --store ~/.agent-memory/semantic.sqlite --encoder semantic

The process speaks MCP on stdin/stdout; an MCP client starts it (see the README's configuration block)."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m memory.mcp", description="Serve a memory store over MCP.",
                                     epilog=_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--store", required=True, metavar="PATH",
                        help="SQLite memory store (created with its folder when missing)")
    parser.add_argument("--principal", default="default", metavar="NAME",
                        help="tenant every tool reads and writes (default: default)")
    parser.add_argument("--encoder", choices=ENCODER_NAMES, default="hashing",
                        help="text encoder; a store opens only with the one that wrote it (semantic: "
                             "pip install '.[embeddings]')")
    parser.add_argument("--transport", choices=("stdio", "streamable-http"), default="stdio",
                        help="stdio (default; what MCP clients start) or streamable HTTP on 127.0.0.1")
    parser.add_argument("--port", type=int, default=8765, help="port for streamable HTTP (default 8765)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Serve until the client closes the connection; 2 on a usage error."""
    args = _parser().parse_args(argv)
    try:
        from memory.mcp.server import build_server
    except ImportError as exc:
        print(f"error: the MCP server needs the mcp SDK: pip install 'mcp>=2' ({exc})", file=sys.stderr)
        return 2
    from memory import EpisodicMemory
    from memory.errors import MemoryError_

    try:
        Path(args.store).expanduser().parent.mkdir(parents=True, exist_ok=True)
        memory = EpisodicMemory(Path(args.store).expanduser(), principal=args.principal,
                                encoder=named_encoder(args.encoder))
    except (OSError, MemoryError_) as exc:
        print(f"error: {args.store}: {exc}", file=sys.stderr)
        return 2
    with memory:
        server = build_server(memory)
        if args.transport == "stdio":
            server.run("stdio")
        else:
            server.run("streamable-http", host="127.0.0.1", port=args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
