"""``python -m memory.mcp``: serve a memory store to an MCP client over stdio."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

from memory.agent_memory import EpisodicMemory
from memory.errors import EpisodicMemoryError
from memory.persistence.progress import shown_on_stderr
from memory.retention import RetentionPolicy, parse_age, summary
from memory.timeline import ENCODER_NAMES, named_encoder
from memory.timeline.stores import is_server_url

_EXAMPLES = """examples:
  python -m memory.mcp --store ~/.agent-memory/memory.sqlite --principal team-a
  python -m memory.mcp --store runs/memory.sqlite --principal me --transport streamable-http --port 8765
  python -m memory.mcp --store ~/.agent-memory/semantic.sqlite --encoder semantic
  python -m memory.mcp --store "postgresql://agent@db.internal/memory" --principal team-a
  python -m memory.mcp --store ~/.agent-memory/memory.sqlite --principal team-a --retain-max-age 90d

The process speaks MCP on stdin/stdout; an MCP client starts it (see the README's configuration block)."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m memory.mcp",
        description="Serve a memory store over MCP.",
        epilog=_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--store",
        required=True,
        metavar="PATH|URL",
        help="SQLite memory store (created with its folder when missing), or a postgresql:// URL "
        "of a shared store (pip install '.[postgres]')",
    )
    parser.add_argument(
        "--principal", default="default", metavar="NAME", help="tenant every tool reads and writes (default: default)"
    )
    parser.add_argument(
        "--encoder",
        choices=ENCODER_NAMES,
        default="hashing",
        help="text encoder; a store opens only with the one that wrote it (semantic: pip install '.[embeddings]')",
    )
    parser.add_argument(
        "--transport",
        choices=("stdio", "streamable-http"),
        default="stdio",
        help="stdio (default; what MCP clients start) or streamable HTTP on 127.0.0.1",
    )
    parser.add_argument("--port", type=int, default=8765, help="port for streamable HTTP (default 8765)")
    retention = parser.add_argument_group(
        "retention",
        "a policy applied to the principal's entries when the server starts, and by its apply_retention tool",
    )
    retention.add_argument(
        "--retain-max-age",
        metavar="AGE",
        type=_age,
        help="erase entries older than this before the newest: a number with d, h or m, e.g. 90d",
    )
    retention.add_argument("--retain-max-entries", metavar="N", type=int, help="erase all but the newest N entries")
    retention.add_argument(
        "--retain-all-evidence",
        dest="keep_lessons",
        action="store_false",
        help="also erase expired entries that are evidence of a current fact (kept by default)",
    )
    return parser


def _age(text: str) -> timedelta:
    try:
        return parse_age(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def main(argv: Sequence[str] | None = None) -> int:
    """Serve until the client closes the connection; 2 on a usage error."""
    args = _parser().parse_args(argv)
    try:
        from memory.mcp.server import build_server
    except ImportError as exc:
        print(f"error: the MCP server needs the mcp SDK: pip install 'mcp>=2' ({exc})", file=sys.stderr)
        return 2

    try:
        if is_server_url(args.store):
            target: str | Path = args.store
        else:
            target = Path(args.store).expanduser()
            target.parent.mkdir(parents=True, exist_ok=True)
        with shown_on_stderr():  # stdout is the protocol's; a store without state runs indexes its episodes first
            memory = EpisodicMemory(target, principal=args.principal, encoder=named_encoder(args.encoder))
    except (OSError, EpisodicMemoryError) as exc:
        print(f"error: {args.store}: {exc}", file=sys.stderr)
        return 2
    with memory:
        policy = None
        if args.retain_max_age is not None or args.retain_max_entries is not None:
            try:
                policy = RetentionPolicy(args.retain_max_age, args.retain_max_entries, args.keep_lessons)
                print(summary(memory.retain(policy), args.principal), file=sys.stderr)
            except (ValueError, EpisodicMemoryError) as exc:
                print(f"error: {args.store}: retention: {exc}", file=sys.stderr)
                return 2
        server = build_server(memory, retention=policy)
        if args.transport == "stdio":
            server.run("stdio")
        else:
            server.run("streamable-http", host="127.0.0.1", port=args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
