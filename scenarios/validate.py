"""Command line: check scenario files against schema 1.

    python -m scenarios.validate scenarios/pool-vs-deploy.yaml my-scenario.yaml
    python -m scenarios.validate pool-vs-deploy          # a shipped scenario by name

Prints ``OK name (path)`` per valid file, every problem of the others, and exits
0 when all are valid, 2 otherwise.
"""

from __future__ import annotations

import argparse
import sys

from scenarios.loader import load
from scenarios.schema import ScenarioError

EXIT_OK = 0
EXIT_INVALID = 2


def _parser() -> argparse.ArgumentParser:
    return argparse.ArgumentParser(
        prog="python -m scenarios.validate",
        description="Validate scenario files (schema 1). Exit 0 if all are valid, 2 otherwise.",
        epilog="example: python -m scenarios.validate scenarios/pool-vs-deploy.yaml ci-failures",
    )


def main(argv: list[str] | None = None) -> int:
    """Validates each file or shipped name; returns the exit code."""
    parser = _parser()
    parser.add_argument(
        "refs", nargs="+", metavar="FILE_OR_NAME", help="scenario file path, or the name of a shipped scenario"
    )
    args = parser.parse_args(argv)
    status = EXIT_OK
    for ref in args.refs:
        try:
            scenario = load(ref)
        except ScenarioError as exc:
            print(str(exc))
            status = EXIT_INVALID
        else:
            print(f"OK {scenario.name} ({scenario.source})")
    return status


if __name__ == "__main__":
    sys.exit(main())
