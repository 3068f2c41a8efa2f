"""Draw the episode graph the full episodic agent builds on a scenario.

    python -m eval.graph pool-vs-deploy --out docs/pool-vs-deploy-graph.png
    python -m eval.graph scenarios/memory-gc.yaml --seed 1 --out /tmp/gc.svg --edges

Plays the scenario in heuristic mode with the ``episodic`` preset (as `python -m eval.compare`
does), then renders its memory's graph with `memory.graph.render_graph` (Graphviz when
installed, else matplotlib). ``--edges`` also prints every CAUSED_BY edge with its evidence.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import scenarios
from agent.agents import EpisodicAgent
from eval.parallel import build_reasoner
from eval.runner import play
from memory import EdgeType, EpisodicMemory, HashingEncoder
from memory.graph import render_graph
from memory.outputs import output_problem


class _PictureAgent(EpisodicAgent):
    """The full episodic agent, its memory left open after the play so that the picture can read it."""

    def close(self) -> None:
        self.memory.flush()


def main(argv: Sequence[str] | None = None) -> int:
    """Command line; returns the exit code."""
    parser = argparse.ArgumentParser(
        prog="python -m eval.graph",
        description=__doc__.split("\n\n")[0],
        epilog="example: python -m eval.graph pool-vs-deploy --out docs/pool-vs-deploy-graph.png",
    )
    parser.add_argument("scenario", help="a shipped scenario's name or a scenario file")
    parser.add_argument("--out", required=True, help="output picture (.png or .svg)")
    parser.add_argument("--seed", type=int, default=0, help="simulator seed (default 0)")
    parser.add_argument("--engine", choices=("auto", "dot", "matplotlib"), default="auto")
    parser.add_argument("--edges", action="store_true", help="print the CAUSED_BY edges with their evidence")
    args = parser.parse_args(argv)
    if Path(args.out).suffix not in (".png", ".svg"):
        print(f"error: --out must end in .png or .svg, got {args.out!r}", file=sys.stderr)
        return 2
    loaded, problems = scenarios.load_all([args.scenario])
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return 2
    scenario = loaded[0]
    refused = output_problem("--out", args.out, sources=[("the scenario being drawn", scenario.source)])
    if refused:
        print(f"error: {refused}", file=sys.stderr)
        return 2
    encoder = HashingEncoder()
    memory = EpisodicMemory(None, principal="agent", encoder=encoder)  # the episodic preset's memory
    agent = _PictureAgent(build_reasoner("heuristic", encoder), memory)
    try:
        play(scenario, args.seed, agent)
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        engine = render_graph(
            memory.graph,
            args.out,
            episodes=memory.episode,
            engine=args.engine,
            title=f"{scenario.name}: episode graph (seed {args.seed})",
        )
        if args.edges:
            for u, v, key, data in memory.graph.edges(keys=True, data=True):
                if key == EdgeType.CAUSED_BY.value:
                    print(f"{u[:10]} → {v[:10]} {data['weight']:.2f} {data['evidence']}")
    finally:
        memory.close()
    print(f"wrote {args.out} ({engine})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
