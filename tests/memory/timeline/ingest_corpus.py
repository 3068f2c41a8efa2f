"""A seeded corpus of timeline input that exercises every part of the write path, and the digests of
what the stores make of it.

`test_ingest_golden` replays it through the stores and compares those digests with
`ingest_golden.json`, recorded from the write path as it was before its lean rewrite (the same ids,
chain and stored rows are expected of every later version). ``python -m
tests.memory.timeline.ingest_corpus`` writes that file again: only for a deliberate change of the
stored form.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import struct
import sys
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np

from memory.timeline import HashingEncoder, Kind, NoRedaction, PatternRedactor, Role, SQLiteStore, Timeline
from memory.timeline.entries import EntryDraft, embedding_digest
from memory.timeline.schema import COLUMNS

GOLDEN = Path(__file__).with_name("ingest_golden.json")
SEED = 50
START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)

# Plain operations text, varied by numbers and names filled in below.
PLAIN = (
    "GET /api/v{n}/orders returned 503 after {ms} ms",
    "pod checkout-{n} restarted: OOMKilled (limit {n}Mi)",
    "deploy of billing-service {n}.{m}.{k} finished; canary at {pct}%",
    "p99 latency of search rose from {ms} ms to {ms2} ms",
    "Rolled back release {n}.{m} after error rate hit {pct}%",
    "connection pool exhausted: {n} waiting threads on db-primary",
    "TLS handshake failed: certificate expired at 2026-0{m}-1{k}T00:00:00Z",
    "clock skew of {ms} ms between node-{n} and node-{m}",
    "cache hit ratio {pct}% (was {pct2}%) on redis-{n}",
    "Decided to restart the queue consumer; lag {n}k messages",
    "request id {digits16} timed out at the gateway",
    "trace_id={hex32} span={hex16} status=ERROR",
    "Retry {n} of {m}: upstream 10.0.{n}.{m}:8080 refused the connection",
    "disk /var/lib/postgres at {pct}% on host db-{n}.internal",
    "GC pause of {ms} ms in JVM heap (young gen {n} MB)",
)
# Text outside ASCII: accents, other scripts, emoji, combining marks, right-to-left, the four
# characters that match an ASCII letter ignoring case.
UNICODE = (
    "Fehler beim Schreiben: Datenträger voll (größe {n} GB)",
    "服务 {n} 超时，正在重试",
    "サーバー{n}が応答しません",
    "🔥 incident {n} escalated 🚨 — on-call paged",
    "e\u0301tat de\u0301grade\u0301 sur le nœud {n}",
    "خطأ في الاتصال بقاعدة البيانات {n}",
    "İstanbul ılık ſtate \u212aelvin {n}",
    "Ошибка: превышен лимит соединений ({n})",
    "tab\tseparated\tvalues and a newline\nsecond line {n}",
)
# Sensitive values the default redactor replaces (some only with IP redaction on), and look-alikes it keeps.
SENSITIVE = (
    "contact alice.ng{n}@example.org about the outage",
    "mail ünïcödé{n}@exämple.de now",
    "call me at +44 20 7946 0{n:03d}",
    "phone: (415) 555-01{k}{m}",
    "card 4111 1111 1111 1111 was declined",
    "visa 4012888888881881 charged twice",
    "amex 3782 822463 10005 refund",
    "IBAN GB82 WEST 1234 5698 7654 32 bounced",
    "SSN 123-45-67{k}{m} in the ticket",
    "used key sk-ant-abcdefghij{n:06d}klmnop to call the API",
    "AWS AKIAIOSFODNN7EXAMPLE with wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY leaked",
    "token ghp_abcdefghijklmnopqrstuvwxyz0123456789 pushed",
    "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.sflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV",
    "password=Hunter2xyz{n} in the config",
    "the password for the admin account is Tr0ub4dor&3",
    "temp password (expires friday): 'correct horse'",
    "DSN postgres://app:s3cr3tPass{n}@db.internal:5432/prod",
    "mysql -u root -pS3cretpw{n} -h db",
    "curl -u deploy:pa55word{n} https://ci.example.com",
    "-----BEGIN RSA PRIVATE KEY-----\nMIIBOgIBAAJBAKj34GkxFhD90vcNLYLInFEX6Ppy1tPf9Cnzj4p4WGeKLs1Pt8Qu\n"
    "-----END RSA PRIVATE KEY-----",
    "<password>hunter22{n}</password> in the XML",
    '{{"api_key": "zzz123abc{n}", "user": "svc"}}',
    "webhook https://hooks.slack.com/services/T000{n}/B000/XXXXXXXX",
    "Twilio AC0123456789abcdef0123456789abcdef with 0123456789abcdef0123456789abcd{k}{m}",
    "host 10.1.{n}.{m} and 2001:db8::{n} answered",
    "Basic troubleshooting of token expiration",
    "order #4111111111111111 shipped",
    "build 1000 2000 3000 4000 done",
)
NAMES = ("payments", "checkout", "search", "auth", "billing", "ledger", "gateway", "queue")
PRINCIPALS = ("default", "team-core", "tenant/ü", "t" * 256)
SITUATIONS = ("incident_response", "planning", "on-call: db", "password=Hunter2xyz", "ζ-situation")
ZONES = (UTC, timezone(timedelta(hours=5, minutes=30)), timezone(-timedelta(hours=8)), timezone(timedelta(0)))


def _fill(template: str, rng: random.Random) -> str:
    n, m, k = rng.randrange(100), rng.randrange(10), rng.randrange(10)
    return template.format(
        n=n,
        m=m,
        k=k,
        ms=rng.randrange(1, 5000),
        ms2=rng.randrange(5000, 90000),
        pct=rng.randrange(101),
        pct2=rng.randrange(101),
        digits16="".join(rng.choice("0123456789") for _ in range(16)),
        hex32=f"{rng.getrandbits(128):032x}",
        hex16=f"{rng.getrandbits(64):016x}",
    )


def _text(rng: random.Random, index: int) -> str:
    special = index % 37
    if special == 0:
        return ""
    if special == 1:
        return "   "
    if special == 2:
        return " ".join(_fill(rng.choice(PLAIN), rng) for _ in range(60))  # a few thousand characters
    if special == 3:
        return "!!! ... --- ???"
    pools = (PLAIN, PLAIN, UNICODE, SENSITIVE)
    parts = [_fill(rng.choice(rng.choice(pools)), rng) for _ in range(rng.randrange(1, 4))]
    text = rng.choice((" ", "; ", "\n", " | ")).join(parts)
    return text.upper() if index % 29 == 5 else text


def _metadata(rng: random.Random, index: int) -> Mapping[str, Any] | None:
    shape = index % 12
    name = rng.choice(NAMES)
    if shape == 0:
        return None
    if shape == 1:
        return {}
    if shape in (2, 3, 4):  # flat strings that repeat from entry to entry
        return {"service": name, "host": f"{name}-{rng.randrange(3)}"}
    if shape == 5:
        return {f"k{i}": f"v{rng.randrange(4)}" for i in range(9)}  # more items than a memo keeps
    if shape == 6:
        return {
            "attempt": rng.randrange(5),
            "scores": [0.5, 1e-7, -3.25, rng.random()],
            "ok": rng.random() < 0.5,
            "none": None,
            "nested": {"a": [1, {"b": "c", "z": [True, None]}], "big": 2**62, "neg": -(2**63) + 1},
            "floats": [0.1, -0.0, 1e300, 5e-324],
        }
    if shape == 7:
        return {"сервис": "платежи", "emoji": "🔥", "combining": "e\u0301", "b": 1, "a": 2}
    if shape == 8:
        return {"api_key": "abc123", "password": "", "db_password": f"pw{index}", "service": name}
    if shape == 9:
        return {"owner": f"bob{index}@example.com", "note": "card 4111 1111 1111 1111", "tags": ["x", "y"]}
    if shape == 10:
        return {"choice": rng.choice(NAMES), "alternatives": (name, "cache"), "confidence": 0.75}
    return {"ticket": f"INC-{index}", "links": [{"rel": "runbook", "href": f"https://wiki/{name}"}]}


def _timestamp(rng: random.Random, index: int) -> datetime:
    if index % 53 == 7:
        return datetime(1970, 1, 1, 0, 0, 0, 1, tzinfo=UTC)
    if index % 53 == 8:
        return datetime(9998, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)
    moment = START + timedelta(seconds=index * 37, microseconds=rng.randrange(1_000_000))
    return moment.astimezone(ZONES[index % len(ZONES)])


def items(n: int, seed: int = SEED) -> list[dict[str, Any]]:
    """`n` keyword-argument dicts of `Timeline.append` covering every kind and role, labels, metadata
    shapes, timestamps in several zones, unicode, empty text and secrets the redactor must catch."""
    rng = random.Random(seed)
    kinds, roles = list(Kind), list(Role)
    out = []
    for index in range(n):
        kind, role = kinds[index % len(kinds)], roles[(index // len(kinds)) % len(roles)]
        item: dict[str, Any] = {
            "text": _text(rng, index),
            "kind": kind if index % 3 else kind.value,
            "role": role if index % 4 else role.value,
            "timestamp": _timestamp(rng, index),
            "situation": SITUATIONS[rng.randrange(len(SITUATIONS))],
        }
        if index % 5:
            item["principal"] = PRINCIPALS[rng.randrange(len(PRINCIPALS))]
        metadata = _metadata(rng, index)
        if metadata is not None:
            item["metadata"] = metadata
        out.append(item)
    return out


class DigestEncoder:
    """A deterministic encoder that is not the hashing encoder (its vectors are never rebuilt from text)."""

    name = "test-digest-d32"
    dim = 32

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            if not text.strip():
                continue  # a zero vector
            raw = hashlib.sha256(text.encode("utf-8")).digest()
            values = np.frombuffer(raw, dtype=np.int8).astype(np.float32)
            values[values == 0] = -0.0
            out[row] = values / np.linalg.norm(values)
        return out


def precomputed_drafts(n: int, seed: int = SEED) -> list[EntryDraft]:
    """Drafts with embeddings made by the caller: dense, sparse, zeros, -0.0, a hashing encoder's name
    on a vector that is not its text's encoding, and one that is but is not marked as such."""
    rng = np.random.default_rng(seed)
    hashing = HashingEncoder()
    source = items(n, seed + 1)
    drafts = []
    for index, item in enumerate(source):
        shape = index % 6
        if shape == 0:
            vector, encoder = rng.standard_normal(1024).astype(np.float32), "caller-dense-1024"
        elif shape == 1:
            vector = np.zeros(1024, dtype=np.float32)
            vector[rng.choice(1024, 40, replace=False)] = rng.standard_normal(40).astype(np.float32)
            encoder = "caller-sparse-1024"
        elif shape == 2:
            vector, encoder = np.zeros(16, dtype=np.float32), "caller-zero-16"
        elif shape == 3:
            vector, encoder = np.array([-0.0, 1.0, -0.0, 0.0] * 4, dtype=np.float32), "caller-signed-zero-16"
        elif shape == 4:
            vector, encoder = rng.standard_normal(1024).astype(np.float32), hashing.name
        else:
            vector, encoder = hashing.encode([item["text"]])[0], hashing.name  # no `encoded`: kept as packed
        drafts.append(
            EntryDraft(
                timestamp=item["timestamp"].astimezone(UTC),
                principal=item.get("principal", "default"),
                situation=item["situation"],
                role=Role(item["role"]),
                kind=Kind(item["kind"]),
                text=item["text"],
                metadata=dict(item.get("metadata") or {}),
                embedding=vector,
                encoder=encoder,
            )
        )
    return drafts


class DyingRedactor:
    """The default redactor, in a process that ends itself (SIGKILL) when it meets the text `DIE`: a worker
    killed mid-batch. Never used by the process that runs the tests."""

    DIE = "the worker dies here"

    def __init__(self) -> None:
        self._redactor = PatternRedactor()

    def redact(self, text: str) -> str:
        if text == self.DIE:
            os.kill(os.getpid(), signal.SIGKILL)
        return self._redactor.redact(text)


# Batch sizes replayed in turn (0: a single `Timeline.append`).
BATCHES = (1, 7, 0, 64, 3, 0, 0, 128, 2, 0, 31)


def replay(timeline: Timeline, source: Sequence[Mapping[str, Any]]) -> list[str]:
    """Append `source` through `timeline`, alternating batches of `BATCHES` sizes and single appends; the ids."""
    ids: list[str] = []
    at, turn = 0, 0
    while at < len(source):
        size = BATCHES[turn % len(BATCHES)]
        turn += 1
        if size == 0:
            ids.append(timeline.append(**source[at]).id)
            at += 1
        else:
            ids.extend(entry.id for entry in timeline.append_many(source[at : at + size]))
            at += size
    return ids


def row_digest(row: Sequence[Any]) -> str:
    """A digest of one stored timeline row, exactly as SQLite holds it (bytes, text and integers told apart)."""
    digest = hashlib.sha256()
    for value in row:
        if isinstance(value, bytes):
            digest.update(b"B" + struct.pack("<Q", len(value)) + value)
        elif isinstance(value, str):
            raw = value.encode("utf-8")
            digest.update(b"S" + struct.pack("<Q", len(raw)) + raw)
        else:
            digest.update(b"I" + struct.pack("<q", value))
    return digest.hexdigest()


def stored(store: SQLiteStore) -> Iterator[tuple[str, str]]:
    """(row digest, embedding digest) of every stored entry, in timeline order."""
    rows = store._db.execute(f"SELECT {COLUMNS} FROM timeline ORDER BY seq").fetchall()
    for row, entry in zip(rows, store.entries()):
        yield row_digest(row), embedding_digest(entry.embedding)


ENTRIES = 240  # entries per scenario


def scenarios(folder: Path) -> dict[str, SQLiteStore]:
    """Each scenario's store, filled: the write path's variants over the corpus."""
    corpus = items(ENTRIES)
    out: dict[str, SQLiteStore] = {}

    def timeline(name: str, path: str, encoder: Any, redactor: Any) -> Timeline:
        store = SQLiteStore(path if path == ":memory:" else folder / path)
        out[name] = store
        return Timeline(store, encoder, redactor)

    replay(timeline("file-hashing-default", "a.sqlite", HashingEncoder(), PatternRedactor()), corpus)
    replay(timeline("memory-hashing-default", ":memory:", HashingEncoder(), PatternRedactor()), corpus)
    replay(
        timeline("memory-hashing-d64-ip", ":memory:", HashingEncoder(64, 0.3), PatternRedactor("salt", ip=True)),
        corpus,
    )
    replay(timeline("file-model-unredacted", "b.sqlite", DigestEncoder(), NoRedaction()), corpus)
    drafts = precomputed_drafts(ENTRIES)
    store = SQLiteStore(folder / "c.sqlite")
    out["file-precomputed"] = store
    for start in range(0, len(drafts), 50):
        store.append_many(drafts[start : start + 50])
    return out


def encodings() -> dict[str, list[str]]:
    """Digests of the hashing encoder's vectors of the corpus texts (encoded in one batch)."""
    texts = [item["text"] for item in items(ENTRIES)]
    out = {}
    for encoder in (HashingEncoder(), HashingEncoder(64, 0.3)):
        out[encoder.name] = [embedding_digest(row)[:10] for row in encoder.encode(texts)]
    return out


def redactions() -> dict[str, list[str]]:
    """Digests of each corpus text redacted by the default redactor and by a salted one that also redacts IPs."""
    texts = [item["text"] for item in items(ENTRIES)]
    return {
        name: [hashlib.sha256(redactor.redact(text).encode("utf-8")).hexdigest()[:10] for text in texts]
        for name, redactor in (("default", PatternRedactor()), ("salted-ip", PatternRedactor("salt", ip=True)))
    }


def record(folder: Path) -> dict[str, Any]:
    """What the golden file holds: per scenario its head id, a digest of all its rows and one per entry."""
    out: dict[str, Any] = {"scenarios": {}, "encodings": encodings(), "redactions": redactions()}
    for name, store in scenarios(folder).items():
        with store:
            assert store.verify() is None
            pairs = list(stored(store))
            out["scenarios"][name] = {
                "head": store._head()[1],
                "rows": hashlib.sha256("".join(row for row, _ in pairs).encode()).hexdigest(),
                "entries": [row[:10] + ":" + vector[:6] for row, vector in pairs],
            }
    return out


def dumps(value: Any, indent: str = "") -> str:
    """JSON of `value` with one line per list (a diff of the golden file then shows which lists changed)."""
    if isinstance(value, dict):
        inner = indent + "  "
        lines = [f"{inner}{json.dumps(key)}: {dumps(item, inner)}" for key, item in sorted(value.items())]
        return "{\n" + ",\n".join(lines) + f"\n{indent}}}" + ("\n" if not indent else "")
    return json.dumps(value, separators=(",", ":"))


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        GOLDEN.write_text(dumps(record(Path(tmp))))
    print(f"wrote {GOLDEN}", file=sys.stderr)
