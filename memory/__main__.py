"""Command line for stores: ``python -m memory verify|export|import|stats|erase|retain|graph``."""

from __future__ import annotations

import argparse
import re
import sqlite3
import sys
import textwrap
from collections.abc import Sequence
from contextlib import closing
from datetime import timedelta
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import quote

from memory.agent_memory import EpisodicMemory
from memory.cli import graph as graph_command
from memory.errors import EpisodicMemoryError
from memory.outputs import output_problem
from memory.persistence.audit import record_findings, sidecar_findings
from memory.persistence.progress import shown_on_stderr
from memory.retention import RetentionPolicy, parse_age, summary
from memory.retrieval.neighbour_store import index_findings
from memory.timeline import Entry, HashingEncoder, Store, audit, open_store
from memory.timeline.erasure import MAX_REASON, is_erased
from memory.timeline.format_version import rewound_version

_EXAMPLES = """examples:
  python -m memory verify runs/memory.sqlite
  python -m memory export runs/memory.sqlite backup.jsonl
  python -m memory import backup.jsonl restored.sqlite
  python -m memory import more.jsonl restored.sqlite --append
  python -m memory stats runs/memory.sqlite
  python -m memory import backup.jsonl postgresql://app@db.internal/memory
  python -m memory erase runs/memory.sqlite --principal team-a --reason "tenant left" --by dpo
  python -m memory erase runs/memory.sqlite --entry ENTRY_ID --reason "request 12"
  python -m memory retain runs/memory.sqlite --principal team-a --max-age 90d --dry-run
  python -m memory graph runs/memory.sqlite --principal team-a --out graph.png

A store is a SQLite file or a postgresql:// URL (pip install '.[postgres]').
"""


_STORE_HELP = "a SQLite store file, or a postgresql:// URL"
_SHOWN = 8  # principals named when a principal is not found


class _Subcommands(Protocol):
    """The subcommands of a parser (what `ArgumentParser.add_subparsers` returns), as this module adds to them."""

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser: ...


def _command(commands: _Subcommands, name: str, summary: str, *examples: str) -> argparse.ArgumentParser:
    """A subcommand whose --help ends with its examples."""
    epilog = "examples:\n" + "".join(f"  python -m memory {name} {example}\n" for example in examples)
    return commands.add_parser(
        name,
        help=summary,
        description=textwrap.fill(summary, 79),
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m memory",
        description="Inspect and move memory stores.",
        epilog=_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True)
    for add in (_verify_parser, _export_parser, _import_parser, _stats_parser, _erase_parser, _retain_parser):
        add(commands)
    graph = _command(
        commands,
        "graph",
        "draw a store's episode graph, or one episode's causal chain, as a .png or .svg picture",
        graph_command.EXAMPLE,
        "runs/memory.sqlite --principal team-a --out chain.svg --chain EPISODE_ID",
    )
    graph_command.add_arguments(graph)
    return parser


def _verify_parser(commands: _Subcommands) -> None:
    verify = _command(
        commands,
        "verify",
        "check the store read-only (chain, digests, triggers, anchor, schema version); exit 1 naming each finding",
        "runs/memory.sqlite",
    )
    verify.add_argument("store", help=f"the store to check: {_STORE_HELP}")


def _export_parser(commands: _Subcommands) -> None:
    export = _command(
        commands,
        "export",
        "write every timeline entry as JSON lines (not importable when the "
        "store holds erasures: copy the store file instead)",
        "runs/memory.sqlite backups/memory.jsonl",
    )
    export.add_argument("store", help=f"the store to read: {_STORE_HELP}")
    export.add_argument(
        "out",
        help="the JSON lines file to write (replaced atomically; missing folders are created; "
        "never an SQLite file, a store's sidecar or the store itself)",
    )


def _import_parser(commands: _Subcommands) -> None:
    imp = _command(
        commands,
        "import",
        "append a JSONL export to a store, all or nothing",
        "backup.jsonl restored.sqlite",
        "more.jsonl restored.sqlite --append",
        "backup.jsonl postgresql://app@db.internal/memory",
    )
    imp.add_argument("source", help="a JSON lines file written by `python -m memory export`")
    imp.add_argument("store", help=f"the store to write, created when missing: {_STORE_HELP}")
    imp.add_argument(
        "--append", action="store_true", help="continue a non-empty store whose head the export's chain follows"
    )


def _stats_parser(commands: _Subcommands) -> None:
    stats = _command(commands, "stats", "counts of entries, tenants, situations, derived records", "runs/memory.sqlite")
    stats.add_argument("store", help=f"the store to count: {_STORE_HELP}")


def _erase_parser(commands: _Subcommands) -> None:
    erase = _command(
        commands,
        "erase",
        "erase an entry's or a principal's content for good; verify still proves "
        "the rest (the derived state is rebuilt)",
        'runs/memory.sqlite --principal team-a --reason "tenant left" --by dpo',
        'runs/memory.sqlite --entry ENTRY_ID --reason "request 12"',
    )
    erase.add_argument("store", help=f"the store to erase in: {_STORE_HELP}")
    target = erase.add_mutually_exclusive_group(required=True)
    target.add_argument("--principal", help="erase every entry of this principal")
    target.add_argument("--entry", metavar="ID", help="erase the entry with this id")
    erase.add_argument("--reason", default="", help="why (kept in the erasure record; no content)")
    erase.add_argument("--by", default="", help="who asked (kept in the erasure record)")


def _retain_parser(commands: _Subcommands) -> None:
    retain = _command(
        commands,
        "retain",
        "erase what a retention policy expires of a principal's entries, "
        "recorded like an erasure (the record names the policy); verify still proves the rest",
        "runs/memory.sqlite --principal team-a --max-age 90d",
        "runs/memory.sqlite --principal team-a --max-entries 5000 --no-keep-lessons",
        "runs/memory.sqlite --principal team-a --max-age 90d --max-entries 5000 --dry-run",
    )
    retain.add_argument("store", help=f"the store to apply the policy to: {_STORE_HELP}")
    retain.add_argument("--principal", required=True, help="the tenant whose entries the policy covers")
    retain.add_argument(
        "--max-age",
        metavar="AGE",
        type=_age,
        help="erase entries older than this before the principal's newest entry: a number with "
        "d (days), h (hours) or m (minutes), e.g. 90d",
    )
    retain.add_argument("--max-entries", metavar="N", type=_count, help="keep only the newest N entries")
    retain.add_argument(
        "--keep-lessons",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="keep the entries of incidents that support or contradict a current fact, whatever "
        "their age (default: keep)",
    )
    retain.add_argument("--dry-run", action="store_true", help="say how many entries would be erased; change nothing")


def _age(text: str) -> timedelta:
    try:
        return parse_age(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _count(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected a whole number of entries, not {text!r}")
    return int(text)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the process exit code (0 ok, 1 integrity failure, 2 user error)."""
    args = _parser().parse_args(argv)
    try:
        if args.command == "verify":
            return _verify(args.store)
        if args.command == "export":
            return _export(args.store, args.out)
        if args.command == "import":
            return _import(args.source, args.store, append=args.append)
        if args.command == "erase":
            return _erase(args)
        if args.command == "retain":
            return _retain(args)
        if args.command == "graph":
            return graph_command.run(args)
        with closing(open_store(args.store, create=False, read_only=True)) as store:
            _print_stats(args.store, store)
        return 0
    except EpisodicMemoryError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (sqlite3.DatabaseError, ValueError) as exc:  # a damaged store: what verify is for
        print(
            f"error: {args.store}: the store cannot be read ({exc}); run `python -m memory verify {args.store}`",
            file=sys.stderr,
        )
        return 1


def _export(path: str, out: str) -> int:
    """Export a store; a store with erasures is exported too, with a warning that the file cannot be imported."""
    refused = output_problem("", out, sources=[("the store being exported", path)])
    if refused:
        print(f"error: {refused}", file=sys.stderr)
        return 2
    try:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        print(f"error: {out}: a file stands where a folder of this path should be", file=sys.stderr)
        return 2
    with closing(open_store(path, create=False, read_only=True)) as store:  # a damaged store exports too
        count = store.export_jsonl(out)
        erased = store.stats().erased
    print(f"exported {count} entries to {out}")
    if erased:
        rows = "1 erased entry, a blank row" if erased == 1 else f"{erased} erased entries, blank rows"
        copy = "with pg_dump" if _is_url(path) else "by copying the store file (with its -anchor file)"
        print(
            f"warning: {out} cannot be imported by this version: it holds {rows} whose content cannot be "
            f"re-hashed, and an export does not carry the erasure records that vouch for them; back up or move "
            f"{path} {copy} instead",
            file=sys.stderr,
        )
    return 0


def _import(source: str, path: str, *, append: bool) -> int:
    """Import an export; a store this call created is removed again when the import fails."""
    created = not _is_url(path) and not Path(path).exists()
    try:
        with closing(open_store(path)) as store:
            if len(store) and not append:
                print(
                    f"error: {path} already holds {len(store)} entries; import into a new store, "
                    f"or pass --append to continue this one",
                    file=sys.stderr,
                )
                return 2
            count = store.import_jsonl(source)
    except BaseException:
        if created:
            for leftover in ("", "-wal", "-shm", "-anchor", "-journal"):
                Path(f"{path}{leftover}").unlink(missing_ok=True)
        raise
    print(f"imported {count} entries into {path}")
    return 0


def _erase(args: argparse.Namespace) -> int:
    """Erase through the memory facade, with the encoder the store's entries name and default settings."""
    with closing(open_store(args.store, create=False)) as store:
        encoders = store.stats().encoders
        entry = store.get(args.entry) if args.entry else None
        refused = _nothing_to_erase(args, store, entry)
    if refused:
        print(f"error: {args.store}: {refused}", file=sys.stderr)
        return 2
    encoder = _hashing_encoder(encoders)
    if encoder is None:
        print(
            f"error: {args.store}: entries made by {', '.join(encoders)}; erase with EpisodicMemory.forget "
            f"and that encoder",
            file=sys.stderr,
        )
        return 2
    principal = entry.principal if entry is not None else args.principal
    with shown_on_stderr():  # a store without state runs indexes its episodes first
        memory = EpisodicMemory(args.store, principal=principal, encoder=encoder)
    with memory:
        done = memory.forget(
            entry_id=args.entry, principal=None if args.entry else principal, reason=args.reason, requested_by=args.by
        )
    noun = "entry" if done.entries == 1 else "entries"
    print(
        f"erased {done.entries} {noun} of {principal} (erasure record {done.record_id[:16]}…); "
        f"{done.records} derived records rebuilt; "
        + (
            "no copy left in the store's files"
            if done.purged
            else "old copies may remain until the store is vacuumed (another process held it, or not the owner)"
        )
    )
    return 0


def _hashing_encoder(encoders: Sequence[str]) -> HashingEncoder | None:
    """The hashing encoder a store's entries name (the default one for a store without entries); None for another."""
    match = re.fullmatch(r"hashing-v2-d(\d+)-c([0-9.e-]+)", encoders[0]) if len(encoders) == 1 else None
    if encoders and match is None:
        return None
    return HashingEncoder(int(match[1]), float(match[2])) if match else HashingEncoder()


def _retain(args: argparse.Namespace) -> int:
    """Apply a retention policy through the memory facade, with the store's hashing encoder and default settings."""
    if args.max_age is None and args.max_entries is None:
        print("error: a retention policy needs --max-age or --max-entries (or both)", file=sys.stderr)
        return 2
    with closing(open_store(args.store, create=False)) as store:
        encoders, present = store.stats().encoders, store.principals()
    encoder = _hashing_encoder(encoders)
    refused = (
        f"principal {args.principal!r} has no entries here (principals: {_named(present)})"
        if args.principal not in present
        else ""
        if encoder
        else f"entries made by {', '.join(encoders)}; retain with EpisodicMemory.retain and that encoder"
    )
    if refused:
        print(f"error: {args.store}: {refused}", file=sys.stderr)
        return 2
    policy = RetentionPolicy(max_age=args.max_age, max_entries=args.max_entries, keep_lessons=args.keep_lessons)
    with shown_on_stderr():  # a store without state runs indexes its episodes first
        memory = EpisodicMemory(args.store, principal=args.principal, encoder=encoder)
    with memory:
        done = memory.retain(policy, dry_run=args.dry_run)
    print(summary(done, args.principal))
    return 0


def _named(present: Sequence[str]) -> str:
    """Some of the principals of a store, for a message."""
    shown = ", ".join(present[:_SHOWN]) + (f" and {len(present) - _SHOWN} more" if len(present) > _SHOWN else "")
    return shown or "none"


def _nothing_to_erase(args: argparse.Namespace, store: Store, entry: Entry | None) -> str:
    """Why an erase request finds nothing to erase in `store` ("" when it does)."""
    long = [
        f"{name} of {len(value):,} characters"
        for name, value in (("--reason", args.reason), ("--by", args.by))
        if len(value) > MAX_REASON
    ]
    if long:
        return f"{' and '.join(long)} exceeds the limit of {MAX_REASON}"
    if args.entry:
        if entry is None:
            return f"no entry {args.entry[:16]}… in this store"
        return f"entry {entry.id[:16]}… is already erased" if is_erased(entry) else ""
    present = store.principals()
    if args.principal not in present:
        return (
            f"nothing of principal {args.principal!r} to erase: it has no entries here (principals: {_named(present)})"
        )
    if all(is_erased(e) for e in store.entries(principal=args.principal)):
        return f"nothing of principal {args.principal!r} to erase: its entries are already erased"
    return ""


def _is_url(path: str) -> bool:
    return path.startswith(("postgresql://", "postgres://"))


def _verify(path: str) -> int:
    """Audit a store read-only: 0 when intact, 1 naming each finding (a server store: `postgres_audit`)."""
    if _is_url(path):
        try:
            from memory.timeline.postgres import shown_url
            from memory.timeline.postgres_audit import audit as audit_server
        except ImportError as exc:
            raise EpisodicMemoryError(
                f"a postgresql:// store needs psycopg: pip install '.[postgres]' ({exc})"
            ) from exc
        shown = shown_url(path)
        served = audit_server(path, shown)
        for note in served.notes:
            print(f"note {shown}: {note}")
        if not served.findings:
            print(f"OK {shown}: {served.entries} entries, chain intact, head {served.head}")
            return 0
        for finding in served.findings:
            print(f"CORRUPT {shown}: {finding}")
        return 1
    report = audit(path)
    for note in [*report.notes, *sidecar_findings(path), *index_findings(path)]:
        print(f"note {path}: {note}")
    findings = [*report.findings, *_version_findings(path), *record_findings(path)]
    if not findings:
        print(f"OK {path}: {report.entries} entries, chain intact, head {report.head}")
        return 0
    for finding in findings:
        print(f"CORRUPT {path}: {finding}")
    return 1


def _version_findings(path: str) -> list[str]:
    """`rewound_version` of the store file, opened read-only ([] when it cannot be opened: audit says why)."""
    try:
        db = sqlite3.connect(f"file:{quote(str(Path(path).resolve()))}?mode=ro", uri=True)
    except sqlite3.Error:
        return []
    try:
        return rewound_version(db)
    except sqlite3.Error:
        return []
    finally:
        db.close()


def _print_stats(path: str, store: Store) -> None:
    from rich.console import Console
    from rich.table import Table

    stats = store.stats()
    table = Table(title=f"memory store {path}", show_header=False)
    table.add_row("entries", str(stats.entries))
    table.add_row("principals", str(stats.principals))
    table.add_row("first / last", f"{stats.first} / {stats.last}")
    table.add_row("encoders", ", ".join(stats.encoders) or "-")
    if stats.erased:  # blank rows: no situation, no encoder
        table.add_row("erased entries", str(stats.erased))
    for situation, count in stats.situations.items():
        table.add_row(f"situation {situation}", str(count))
    for kind, count in stats.records.items():
        table.add_row(f"records {kind}", str(count))
    Console().print(table)


if __name__ == "__main__":
    sys.exit(main())
