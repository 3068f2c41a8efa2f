"""Research outputs of a run log: CSV rows, figures (PNG/SVG), a self-contained HTML report.

Everything is computed from the log alone (`curves`), then rendered (`console`: the terminal
report; `csv`, `plots`, `html`); every file is written atomically with its parent folders created, and checked before
a run (`cli.check_outputs`, with `memory.outputs`: never over a store or the command's input).
"""

from eval.outputs.csv import write_csv
from eval.outputs.html import write_html
from eval.outputs.plots import PlotsUnavailable, write_plots

__all__ = ["PlotsUnavailable", "write_csv", "write_html", "write_plots"]
