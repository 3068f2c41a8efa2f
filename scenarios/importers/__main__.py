"""Command line: import a public incident dataset folder as a schema-1 scenario file.

    python -m scenarios.importers petshop ../shared/datasets/petshop/high_traffic --out runs/petshop-high.yaml
    python -m scenarios.importers itbench ../shared/datasets/itbench-sre --out runs/itbench.yaml

Exit 0 on success; 2 with every problem (file and expectation) on bad input, nothing written.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from memory.outputs import output_problem
from scenarios.importers import itbench, petshop
from scenarios.importers.common import DatasetError, write_scenario

EXIT_OK = 0
EXIT_INVALID = 2

ROUND_HELP = {
    "petshop": (
        "A round is one injected performance issue (train/ and test/ issue_N folders, in the order of "
        "their symptom timestamps): the observations are the symptom (target node, metric, statistic) "
        "and the metrics that deviate from normal operation (noissue/metrics.csv, or a baseline derived "
        "from the issues' own data where that file is absent); the candidates are the target and every "
        "component it calls, directly or through others, in graph.csv; the truth is target.json's "
        "root_cause.node; the runbook is anomaly detection plus call-graph traversal."
    ),
    "itbench": (
        "A round is one scenario_N/groundtruth_v1.yaml (in scenario-number order): the observations are "
        "the alerts that fired, as an alert list shows them; the candidates are the scenario's entities "
        "under stable names; the truth is the entity flagged root_cause; the correction states the fault "
        "and its mechanism; the runbook ranks the entities by the alerts alone (infrastructure alerts on an "
        "entity first, then its other alerts, then missing-traffic alerts)."
    ),
}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m scenarios.importers",
        description="Turn a public incident dataset folder into a schema-1 scenario file "
        "(deterministic: the same folder gives byte-identical output).",
        epilog="examples:\n"
        "  python -m scenarios.importers petshop ../shared/datasets/petshop/high_traffic --out petshop-high.yaml\n"
        "  python -m scenarios.importers itbench ../shared/datasets/itbench-sre --out itbench.yaml",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="dataset", required=True, metavar="DATASET")
    for name, module, folder in (
        ("petshop", petshop, "a PetShop traffic-scenario folder (graph.csv, noissue/, train/, test/)"),
        ("itbench", itbench, "a folder of ITBench scenario_N/ folders"),
    ):
        command = sub.add_parser(
            name, help=(module.__doc__ or "").strip().splitlines()[0], description=ROUND_HELP[name]
        )
        command.add_argument("folder", type=Path, metavar="DIR", help=folder)
        command.add_argument(
            "--out",
            type=Path,
            required=True,
            metavar="FILE.yaml",
            help="where to write the scenario (replaced atomically; never an SQLite file)",
        )
        command.add_argument("--name", default=None, help="the scenario's name ([a-z0-9-]+); default from the folder")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Imports one dataset folder; returns the exit code."""
    args = _parser().parse_args(argv)
    module = petshop if args.dataset == "petshop" else itbench
    refused = output_problem("--out", args.out, sources=[("the dataset folder being imported", args.folder)])
    if refused:
        print(f"error: {refused}", file=sys.stderr)
        return EXIT_INVALID
    try:
        text = module.import_folder(args.folder, name=args.name)
    except DatasetError as exc:
        print(str(exc), file=sys.stderr)
        return EXIT_INVALID
    write_scenario(text, args.out)
    print(f"wrote {args.out}")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
