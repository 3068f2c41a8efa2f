"""Command line for stores: ``python -m memory verify|export|import|stats``."""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from memory.errors import MemoryError_
from memory.timeline import Store, open_store

_EXAMPLES = """examples:
  python -m memory verify runs/memory.sqlite
  python -m memory export runs/memory.sqlite backup.jsonl
  python -m memory import backup.jsonl restored.sqlite
  python -m memory stats runs/memory.sqlite
  python -m memory import backup.jsonl postgresql://app@db.internal/memory

A store is a SQLite file or a postgresql:// URL (pip install '.[postgres]').
"""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m memory", description="Inspect and move memory stores.",
                                     epilog=_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    verify = commands.add_parser("verify", help="recompute the hash chain; exit 1 naming the first bad entry")
    verify.add_argument("store")
    export = commands.add_parser("export", help="write every timeline entry as JSON lines")
    export.add_argument("store")
    export.add_argument("out")
    imp = commands.add_parser("import", help="append a JSONL export to a store, all or nothing")
    imp.add_argument("source")
    imp.add_argument("store")
    stats = commands.add_parser("stats", help="counts of entries, tenants, situations, derived records")
    stats.add_argument("store")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the process exit code (0 ok, 1 integrity failure, 2 user error)."""
    args = _parser().parse_args(argv)
    try:
        if args.command == "verify":
            with open_store(args.store, create=False) as store:
                brk = store.verify()
                if brk is None:
                    print(f"OK {args.store}: {len(store)} entries, chain intact")
                    return 0
                print(f"CORRUPT {args.store}: entry seq={brk.seq} id={brk.id}: {brk.reason}")
                return 1
        if args.command == "export":
            with open_store(args.store, create=False) as store:
                count = store.export_jsonl(args.out)
            print(f"exported {count} entries to {args.out}")
            return 0
        if args.command == "import":
            with open_store(args.store) as store:
                count = store.import_jsonl(args.source)
            print(f"imported {count} entries into {args.store}")
            return 0
        with open_store(args.store, create=False) as store:
            _print_stats(args.store, store)
        return 0
    except MemoryError_ as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _print_stats(path: str, store: Store) -> None:
    from rich.console import Console
    from rich.table import Table

    stats = store.stats()
    table = Table(title=f"memory store {path}", show_header=False)
    table.add_row("entries", str(stats.entries))
    table.add_row("principals", str(stats.principals))
    table.add_row("first / last", f"{stats.first} / {stats.last}")
    table.add_row("encoders", ", ".join(stats.encoders) or "-")
    for situation, count in stats.situations.items():
        table.add_row(f"situation {situation}", str(count))
    for kind, count in stats.records.items():
        table.add_row(f"records {kind}", str(count))
    Console().print(table)


if __name__ == "__main__":
    sys.exit(main())
