"""Draw a store's episode graph: ``python -m memory graph STORE --principal NAME --out graph.png``.

``--chain EPISODE_ID`` draws only the causal chain of one episode (an id prefix is enough).
`main` runs the same command on a parser of its own.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from memory.agent_memory import EpisodicMemory
from memory.errors import EpisodicMemoryError
from memory.graph import causal_chain, render_graph
from memory.outputs import output_problem
from memory.persistence.progress import shown_on_stderr

SUMMARY = "Draw a store's episode graph."
EXAMPLE = "runs/memory.sqlite --principal team-a --out graph.png"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The command's arguments, on its own parser or on `python -m memory`'s ``graph`` subcommand."""
    parser.add_argument("store", help="a SQLite file or a postgresql:// URL")
    parser.add_argument("--principal", default="default", help="the tenant whose graph to draw")
    parser.add_argument("--out", required=True, help="output picture (.png or .svg)")
    parser.add_argument("--chain", metavar="EPISODE_ID", help="draw only this episode's causal chain")
    parser.add_argument("--engine", choices=("auto", "dot", "matplotlib"), default="auto")


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m memory graph`` on a parser of its own (argv without ``graph``); returns the exit code."""
    parser = argparse.ArgumentParser(
        prog="python -m memory graph", description=SUMMARY, epilog=f"example: python -m memory graph {EXAMPLE}"
    )
    add_arguments(parser)
    return run(parser.parse_args(argv))


def run(args: argparse.Namespace) -> int:
    """Draw the picture the parsed arguments ask for; returns the exit code (2: a user error)."""
    if Path(args.out).suffix not in (".png", ".svg"):
        print(f"error: --out must end in .png or .svg, got {args.out!r}", file=sys.stderr)
        return 2
    if "://" not in args.store and not Path(args.store).exists():
        print(f"error: no store at {args.store}", file=sys.stderr)
        return 2
    refused = output_problem("--out", args.out, sources=[("the store being drawn", args.store)])
    if refused:
        print(f"error: {refused}", file=sys.stderr)
        return 2
    try:
        with shown_on_stderr():  # a store without state runs indexes its episodes first
            memory = EpisodicMemory(args.store, principal=args.principal)
        with memory:
            graph = memory.graph_of(args.principal)
            nodes = None
            if args.chain:
                match = [n for n in graph.nodes if str(n).startswith(args.chain)]
                if len(match) != 1:
                    print(f"error: {len(match)} episodes start with {args.chain!r}", file=sys.stderr)
                    return 2
                nodes = causal_chain(graph, match[0], episodes=memory.episode).episode_ids
            engine = render_graph(
                graph,
                args.out,
                episodes=memory.episode,
                nodes=nodes,
                engine=args.engine,
                title=f"{args.principal}: episode graph",
            )
    except EpisodicMemoryError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {args.out} ({engine})")
    return 0
