"""What `python -m memory verify` finds beyond `memory.timeline.audit` (read-only): records a
memory cannot read, and the state of the vectors sidecar."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from urllib.parse import quote

import numpy as np

from memory.persistence.record_fields import problem
from memory.persistence.runs import RUN, Corrupt, body_digest, sidecar_rows
from memory.persistence.sparse_rows import row_digests
from memory.persistence.vectors import VectorFile
from memory.timeline.record_body import parse


def record_findings(store_path: str) -> list[str]:
    """Every derived record that lacks a field its readers need or holds one of another type
    (`memory.persistence.record_fields`), each naming its row; [] when the file cannot be read
    (`memory.timeline.audit` says why, and names bodies that are not JSON objects)."""
    found = []
    try:
        db = sqlite3.connect(f"file:{quote(str(Path(store_path).resolve()))}?mode=ro", uri=True)
    except sqlite3.Error:
        return []
    db.text_factory = lambda data: data.decode("utf-8", "surrogateescape")  # damaged text is reported, not raised
    try:
        for seq, kind, record_id, body in db.execute("SELECT seq, kind, id, body FROM records ORDER BY seq"):
            read = parse(body)
            wrong = "" if read.problem else problem(kind, read.body)
            if wrong:
                found.append(f"records seq={seq} kind={kind} id={record_id}: malformed: {wrong}")
    except sqlite3.Error:
        return []
    finally:
        db.close()
    return found


def sidecar_findings(store_path: str) -> list[str]:
    """What is wrong with the vectors sidecar the store's runs point into (read-only; [] when nothing).

    The sidecar is derived data: a row that is missing or fails its digest is recomputed on
    read, so these are notes for `python -m memory verify`, not corruption of the memory.
    """
    uri = f"file:{quote(str(Path(store_path).resolve()))}?mode=ro"
    db = sqlite3.connect(uri, uri=True)
    files: dict[int, VectorFile] = {}  # by row width
    checked = bad = 0
    try:
        for meta_text, body in db.execute("SELECT meta, body FROM snapshots WHERE kind = ? ORDER BY seq", (RUN,)):
            try:
                meta = json.loads(meta_text)
                if meta.get("format") not in (2, 3, 4) or body_digest(body) != meta["digest"]:
                    continue  # a run without sidecar rows, or one that opening ignores anyway
                dim = int(meta["dim"])
                file = files.setdefault(dim, VectorFile(f"{store_path}-vectors", dim))
                sections = {
                    name: np.frombuffer(body[offset : offset + length], dtype=dtype).reshape(shape)
                    for name, (offset, length, dtype, shape) in meta["sections"].items()
                    if name.startswith(("digests:", "counts:", "palettes:"))
                }
                for principal in meta["vectors"]:
                    digests = sections[f"digests:{principal}"]
                    checked += len(digests)
                    rows = file.read(*sidecar_rows(meta, principal, sections, dim))
                    bad += int((row_digests(rows) != digests).any(axis=1).sum())
            except (Corrupt, KeyError, TypeError, ValueError):
                continue
    except sqlite3.Error:
        return []
    finally:
        db.close()
        for file in files.values():
            file.close()
    if not bad:
        return []
    return [
        f"vectors sidecar: {bad:,} of the {checked:,} rows state runs point to are missing or fail their digest "
        f"(derived data: recall recomputes them from the entries; delete {store_path}-vectors to have the runs "
        "written again)"
    ]
