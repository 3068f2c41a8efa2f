"""One self-contained HTML file of a run: tables, figures inline (base64 PNG), the configuration.

Nothing is fetched when it opens: styles are inline, figures are data URIs, so the file
can be attached to a paper or a pull request as it is.
"""

from __future__ import annotations

import base64
import html
import io
import json
from pathlib import Path
from typing import Any

from rich.console import Console

from eval.outputs import curves, plots
from eval.outputs.console import Report
from memory.outputs import write_atomic

_STYLE = """body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #bbb;padding:.25em .6em;text-align:right}
th:first-child,td:first-child{text-align:left}img{max-width:100%;display:block;margin:1em 0}
pre{background:#f7f7f7;padding:1em;overflow-x:auto;font-size:12px}.note{color:#555}"""


def _pct(value: float | None) -> str:
    return "—" if value is None or value != value else f"{100 * value:.1f}%"


def accuracy_table(log: dict[str, Any]) -> str:
    """First-attempt accuracy per kind and overall, with 95% intervals, as an HTML table."""
    agents = list(log["agents"])
    head = "".join(f"<th>{html.escape(a)}</th>" for a in agents)
    body = []
    for kind, row in curves.kind_accuracy(log).items():
        cells = "".join(
            f"<td>{_pct(row[a][0])} [{_pct(row[a][1])}–{_pct(row[a][2])}] n={row[a][3]}</td>"
            if a in row
            else "<td>—</td>"
            for a in agents
        )
        body.append(f"<tr><td>{html.escape(kind)}</td>{cells}</tr>")
    overall = []
    for agent in agents:
        s = log["agents"][agent]["summary"]
        low, high = s.get("first_attempt_ci95") or (None, None)
        overall.append(
            f"<td><b>{_pct(s.get('first_attempt_accuracy'))}</b> [{_pct(low)}–{_pct(high)}] n={s.get('rounds', 0)}</td>"
        )
    body.append(f"<tr><td><b>overall</b></td>{''.join(overall)}</tr>")
    solved = "".join(f"<td>{_pct(log['agents'][a]['summary'].get('solve_rate'))}</td>" for a in agents)
    body.append(f"<tr><td>solve rate</td>{solved}</tr>")
    return (
        f"<table><caption>first-attempt accuracy [95% CI]</caption><tr><th>kind</th>{head}</tr>"
        + "".join(body)
        + "</table>"
    )


def _report_html(log: dict[str, Any]) -> str:
    """The terminal report, every table of it, as inline-styled HTML."""
    console = Console(record=True, width=160, file=io.StringIO())
    console.print(Report(log))
    return console.export_html(inline_styles=True, code_format="<pre>{code}</pre>")


def _figures_html(log: dict[str, Any]) -> str:
    try:
        plt = plots.pyplot()
    except plots.PlotsUnavailable as exc:
        return f"<p class='note'>No figures: {html.escape(str(exc))}.</p>"
    parts = []
    for stem, fig in plots.figures(log):
        try:
            data = base64.b64encode(plots.render(fig, "png")).decode("ascii")
        finally:
            plt.close(fig)
        parts.append(f"<figure><img alt='{html.escape(stem)}' src='data:image/png;base64,{data}'></figure>")
    return "".join(parts)


def document(log: dict[str, Any]) -> str:
    """The whole HTML document of `log`."""
    title = html.escape(curves.title(log))
    status = (
        "" if log.get("status") == "success" else f"<p><b>run incomplete:</b> {html.escape(str(log.get('error')))}</p>"
    )
    setup = {
        key: log.get(key)
        for key in ("mode", "scenarios", "seeds", "config", "started_at", "finished_at", "environment", "merged_from")
        if log.get(key) is not None
    }
    setup["agents"] = list(log["agents"])
    return (
        f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{title}</title>"
        f"<style>{_STYLE}</style></head><body><h1>Memory comparison</h1><p>{title}</p>{status}"
        f"<h2>Accuracy</h2>{accuracy_table(log)}<h2>Figures</h2>{_figures_html(log)}"
        f"<h2>Report</h2>{_report_html(log)}"
        f"<h2>Configuration</h2><pre>{html.escape(json.dumps(setup, indent=2, default=str), quote=False)}</pre>"
        "</body></html>\n"
    )


def write_html(log: dict[str, Any], path: str | Path) -> Path:
    """Write the HTML report of `log` to `path` (atomically); the path."""
    return write_atomic(path, document(log))
