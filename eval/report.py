"""``python -m eval.report LOG [LOG ...]``: print a saved run's report again, exactly as
`eval.compare` printed it, or merge several logs of one mode into one report whose statistics
are recomputed from the merged rounds (`eval.merge`); it writes the same --csv, --plots and
--html outputs as `eval.compare` (`eval.outputs`).

The report itself is `eval.outputs.console.Report`; `Report`, `report_console` and `records`
are named here too for the importers that take them from this module.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from eval import runlog
from eval.merge import MergeError, merge, records
from eval.outputs.cli import add_output_arguments, check_outputs, write_outputs
from eval.outputs.console import Report, report_console

__all__ = ["Report", "main", "records", "report_console"]


_EXAMPLES = """examples:
  python -m eval.report runs/pool.json                        # the report eval.compare printed
  python -m eval.report runs/pool.json runs/ci.json --json runs/both.json   # merged, statistics recomputed
  python -m eval.report runs/*.json --csv runs/rounds.csv --plots runs/plots --html runs/report.html

Logs merge when they share a mode and no scenario × seed × agent run appears twice."""


def main(argv: Sequence[str] | None = None) -> int:
    """Render (or merge) run logs; 0 on success, 2 on a usage error (unreadable or unmergeable logs)."""
    parser = argparse.ArgumentParser(
        prog="python -m eval.report",
        description="Show, merge and export saved comparison runs.",
        epilog=_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("logs", nargs="+", metavar="LOG", help="run logs written by eval.compare --json")
    parser.add_argument("--json", default=None, metavar="PATH", help="write the (merged) run log here")
    add_output_arguments(parser)
    parser.add_argument(
        "--quiet", action="store_true", help="print no report; only write the outputs (a line on stderr for each)"
    )
    args = parser.parse_args(argv)
    problem = check_outputs(args, [("a run log this command reads", path) for path in args.logs])
    logs = []
    for path in args.logs:
        try:
            logs.append(runlog.read(path))
        except OSError as exc:
            problem = problem or f"{path}: cannot read: {exc.strerror or exc}"
        except ValueError as exc:  # not JSON, or not a schema-1 log
            problem = problem or (str(exc) if str(exc).startswith(str(path)) else f"{path}: not a run log: {exc}")
    if not problem:
        try:
            log = merge(logs, args.logs)
        except MergeError as exc:
            problem = str(exc)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    if not args.quiet:
        report_console().print(Report(log))
    if args.json:
        runlog.write(log, args.json)
    written = write_outputs(log, args)
    sys.stdout.flush()  # the report first, then what was written, when both go to one file
    for line in ([f"wrote {args.json} (run log)"] if args.json else []) + written.lines:
        print(line, file=sys.stderr)
    if written.error:
        print(f"error: {written.error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
