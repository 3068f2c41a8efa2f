"""A long first open's progress on a command line's stderr.

Opening a store whose episodes no state run covers indexes them from their records (about a
minute at 100,000 episodes, ten at a million). The loader reports how far it is as INFO records
of its logger, each carrying ``indexed`` and ``total`` (`memory.persistence.loader`).
`shown_on_stderr` is what the command lines that open stores wrap the open in: it draws those
records as a progress bar when stderr is a terminal and writes them as lines otherwise (the log
an MCP client keeps of a server it started). A program that imports `memory` sees them through
its own logging configuration instead.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

LOADER_LOGGER = "memory.persistence.loader"


class _Bar(logging.Handler):
    """The loader's progress records as one task of a rich progress bar; other records as lines above it."""

    def __init__(self, progress: Progress) -> None:
        super().__init__(logging.INFO)
        self.progress = progress
        self.task: TaskID | None = None

    def emit(self, record: logging.LogRecord) -> None:
        done, total = getattr(record, "indexed", None), getattr(record, "total", None)
        if done is None or total is None:
            self.progress.console.print(record.getMessage(), markup=False, highlight=False)
            return
        if self.task is None:
            self.task = self.progress.add_task("indexing episodes from their records", total=total)
        self.progress.update(self.task, completed=done, total=total)


@contextmanager
def shown_on_stderr(console: Console | None = None) -> Iterator[None]:
    """While the block runs, the loader's records go to stderr (`console`): a bar on a terminal, else lines."""
    console = console or Console(stderr=True)
    logger = logging.getLogger(LOADER_LOGGER)
    handler: logging.Handler
    shown: Any
    if console.is_terminal:
        shown = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        )
        handler = _Bar(shown)
    else:
        shown, handler = nullcontext(), logging.StreamHandler(console.file)
        handler.setFormatter(logging.Formatter("%(message)s"))
    level = logger.level
    logger.addHandler(handler)
    if logger.getEffectiveLevel() > logging.INFO:
        logger.setLevel(logging.INFO)
    try:
        with shown:
            yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
