"""The output flags `eval.compare` and `eval.report` share: --csv, --plots, --html."""

from __future__ import annotations

import argparse
from typing import Any


def add_output_arguments(parser: argparse.ArgumentParser) -> None:
    """Add --csv PATH, --plots DIR and --html PATH (parent folders are created)."""
    parser.add_argument("--csv", default=None, metavar="PATH",
                        help="write one row per scenario × seed × agent × round (the decision fields)")
    parser.add_argument("--plots", default=None, metavar="DIR",
                        help="write the figures here as PNG and SVG (needs matplotlib: pip install '.[plots]')")
    parser.add_argument("--html", default=None, metavar="PATH",
                        help="write one self-contained HTML report (tables, figures, configuration)")


def check_outputs(args: argparse.Namespace) -> str | None:
    """What stops the requested outputs before any work is done (matplotlib missing for --plots)."""
    if args.plots:
        from eval.outputs.plots import PlotsUnavailable, pyplot

        try:
            pyplot()
        except PlotsUnavailable as exc:
            return f"--plots: {exc}"
    return None


def write_outputs(log: dict[str, Any], args: argparse.Namespace) -> str | None:
    """Write every requested output of `log`; what went wrong, or None."""
    from eval.outputs.csv import write_csv
    from eval.outputs.html import write_html
    from eval.outputs.plots import write_plots

    for flag, path, write in (("--csv", args.csv, write_csv), ("--plots", args.plots, write_plots),
                              ("--html", args.html, write_html)):
        if not path:
            continue
        try:
            write(log, path)
        except OSError as exc:
            return f"{flag} {path}: cannot write: {exc.strerror or exc}"
    return None
