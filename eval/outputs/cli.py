"""The output flags `eval.compare` and `eval.report` share: --csv, --plots, --html (and their --json)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, NamedTuple

from eval.outputs.csv import write_csv
from eval.outputs.html import write_html
from eval.outputs.plots import PlotsUnavailable, pyplot, write_plots
from memory.outputs import Sources, output_problem


def add_output_arguments(parser: argparse.ArgumentParser) -> None:
    """Add --csv PATH, --plots DIR and --html PATH (parent folders are created)."""
    parser.add_argument(
        "--csv",
        default=None,
        metavar="PATH",
        help="write one row per scenario × seed × agent × round (the decision fields)",
    )
    parser.add_argument(
        "--plots",
        default=None,
        metavar="DIR",
        help="write the figures here as PNG and SVG (needs matplotlib: pip install '.[plots]')",
    )
    parser.add_argument(
        "--html",
        default=None,
        metavar="PATH",
        help="write one self-contained HTML report (tables, figures, configuration)",
    )


def check_outputs(args: argparse.Namespace, sources: Sources = ()) -> str | None:
    """What stops the requested outputs before any work is done (a store or one of `sources` in the
    way, a folder that takes no new file, matplotlib missing for --plots); see `memory.outputs`."""
    sources = list(sources)
    for flag, path, folder in (
        ("--json", args.json, False),
        ("--csv", args.csv, False),
        ("--plots", args.plots, True),
        ("--html", args.html, False),
    ):
        problem = output_problem(flag, path, sources=sources, folder=folder) if path else ""
        if problem:
            return problem
    if args.plots:
        try:
            pyplot()
        except PlotsUnavailable as exc:
            return f"--plots: {exc}"
    return None


class Written(NamedTuple):
    """What `write_outputs` did."""

    lines: list[str]  # ``wrote PATH (what)``, one per output written
    error: str | None  # the flag, path and reason of the output that could not be written, if one could not


def write_outputs(log: dict[str, Any], args: argparse.Namespace) -> Written:
    """Write every requested output of `log`, stopping at the first that cannot be written."""
    lines: list[str] = []
    for flag, path, write in (
        ("--csv", args.csv, write_csv),
        ("--plots", args.plots, write_plots),
        ("--html", args.html, write_html),
    ):
        if not path:
            continue
        try:
            files = write(log, path)
        except OSError as exc:
            return Written(lines, f"{flag} {path}: cannot write: {exc.strerror or exc}")
        lines.append(f"wrote {path} ({_what(flag, files)})")
    return Written(lines, None)


def _what(flag: str, files: Any) -> str:
    if flag == "--csv":
        return "CSV, one row per round"
    if flag == "--html":
        return "HTML report"
    return f"{len({Path(f).stem for f in files})} figures, PNG and SVG"
