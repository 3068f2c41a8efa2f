"""How well redaction works: recall on labelled secrets, false positives on ordinary text.

    python -m eval.redaction            # recall per corpus, false positives per kind of line
    python -m eval.redaction --show     # also every miss and every false positive

Secrets are measured on three corpora. The labelled corpus (``eval/data/redaction_secrets.jsonl``)
holds fake secrets and personal data of each class the redactor claims (international e-mails
and phones, cards, keys and tokens of common providers, ``name=value`` secrets, passwords in
URLs, PEM keys, IBANs, SSNs, and IP addresses, which are redacted on request only). The
generated corpus puts every secret class into each of a set of phrasings ("the password is …",
"api key: …", a provider's token with no word naming it…), values drawn from a seeded numpy
Generator. The hand-written corpus (``tests/data/redaction_phrasings.jsonl``) holds 200 sentences
as people write them in tickets, chats and logs. A variant counts as redacted when its value is
gone from the output.

False positives are measured on two kinds of line: ordinary incident text (the simulator's
templates filled with generated values plus generic operations text: latency lists,
timestamps, versions, hosts, ports, ids) and request-id lines (Luhn-valid 16-digit ids after
"request", "trace_id=", "order #"…, which a card pattern would take for card numbers); any
change to a line is a false positive.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np
from rich.console import Console
from rich.table import Table

from memory.timeline import PatternRedactor
from memory.timeline.redaction import luhn_ok
from simulator import families as fam
from simulator.generate import values

CORPUS = Path(__file__).resolve().parent / "data" / "redaction_secrets.jsonl"
PHRASINGS = Path(__file__).resolve().parents[1] / "tests" / "data" / "redaction_phrasings.jsonl"


class Evaluation(NamedTuple):
    """Both figures with what went wrong."""

    secrets: int  # labelled variants
    redacted: int  # variants whose value is gone
    misses: list[str]  # "class: text" of each variant left readable
    ordinary: int  # ordinary lines
    false_positives: list[tuple[str, str]]  # (line, redacted line) of each line changed

    @property
    def recall(self) -> float:
        """Share of labelled variants redacted."""
        return self.redacted / self.secrets if self.secrets else 0.0

    @property
    def false_positive_rate(self) -> float:
        """Share of ordinary lines changed."""
        return len(self.false_positives) / self.ordinary if self.ordinary else 0.0


def labelled(path: Path = CORPUS) -> list[dict[str, str]]:
    """The labelled variants of a corpus file: ``{"class", "text", "secret"}`` each.

    A line may name its value ``"secret"`` (the labelled corpus) or ``"value"`` (the hand-written one).
    """
    items = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            item = json.loads(line)
            items.append(
                {"class": item["class"], "text": item["text"], "secret": item.get("secret", item.get("value"))}
            )
    return items


def phrasings(path: Path = PHRASINGS) -> list[dict[str, str]]:
    """The hand-written corpus: sentences from tickets, chats and logs, each holding one secret."""
    return labelled(path)


# -- the generated corpus: every secret class in each of its phrasings ------------------------------

_B62 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
_HEX = "0123456789abcdef"
_B64 = _B62 + "+/"


def _chars(rng: np.random.Generator, alphabet: str, n: int) -> str:
    return "".join(alphabet[int(i)] for i in rng.integers(len(alphabet), size=n))


def _password(rng: np.random.Generator) -> str:
    """Letters, then digits, then a symbol sometimes, as people choose them."""
    word = _chars(rng, _B62[:52], int(rng.integers(5, 10)))
    return (
        word
        + _chars(rng, "0123456789", int(rng.integers(1, 5)))
        + ("" if rng.random() < 0.5 else _chars(rng, "!#$%&*@", 1))
    )


def _luhn_complete(body: str) -> str:
    """`body` with the check digit that makes it pass the redactor's own Luhn check."""
    return next(body + digit for digit in "0123456789" if luhn_ok(body + digit))


def _card_number(rng: np.random.Generator) -> str:
    prefix = str(rng.choice(["4", "51", "52", "53", "54", "55", "6011", "4", "2221"]))
    return _luhn_complete(prefix + _chars(rng, "0123456789", 15 - len(prefix)))


_VALUES = {  # class -> a value of that class
    "password": _password,
    "api_key": lambda rng: _chars(rng, _HEX if rng.random() < 0.5 else _B62, int(rng.integers(24, 41))),
    "token": lambda rng: _chars(rng, _B62 + "-_", int(rng.integers(20, 41))),
    "secret": lambda rng: _chars(rng, _B62 + "-_~.", int(rng.integers(16, 41))),
    "bearer": lambda rng: _chars(rng, _B62 + "-._~", int(rng.integers(16, 41))),
    "basic_auth": lambda rng: _chars(rng, _B64, 4 * int(rng.integers(5, 11))),
    "connection_string": _password,
    "jdbc": _password,
    "private_key": lambda rng: "MII" + _chars(rng, _B64, 61),
    "github": lambda rng: str(rng.choice(["ghp_", "gho_", "ghs_", "ghu_"])) + _chars(rng, _B62, 36),
    "github_pat": lambda rng: "github_pat_" + _chars(rng, _B62, 22) + "_" + _chars(rng, _B62, 59),
    "slack": lambda rng: (
        f"xox{rng.choice(list('bpars'))}-{_chars(rng, '0123456789', 12)}-"
        f"{_chars(rng, '0123456789', 13)}-{_chars(rng, _B62, 24)}"
    ),
    "aws_access_key": lambda rng: str(rng.choice(["AKIA", "ASIA"])) + _chars(rng, _B62[:26] + "234567", 16),
    "aws_secret_key": lambda rng: _chars(rng, _B64, 40),
    "stripe": lambda rng: str(rng.choice(["sk_live_", "rk_live_", "sk_test_"])) + _chars(rng, _B62, 24),
    "google": lambda rng: "AIza" + _chars(rng, _B62 + "-_", 35),
    "openai": lambda rng: str(rng.choice(["sk-", "sk-proj-"])) + _chars(rng, _B62 + "-_", 48),
    "anthropic": lambda rng: "sk-ant-api03-" + _chars(rng, _B62 + "-_", 93) + "AA",
    "jwt": lambda rng: (
        f"eyJ{_chars(rng, _B62, int(rng.integers(15, 30)))}.eyJ{_chars(rng, _B62, int(rng.integers(20, 60)))}"
        f".{_chars(rng, _B62 + '-_', 43)}"
    ),
    "twilio": lambda rng: "SK" + _chars(rng, _HEX, 32),
    "sendgrid": lambda rng: f"SG.{_chars(rng, _B62 + '-_', 22)}.{_chars(rng, _B62 + '-_', 43)}",
}
# Labelled classes: the words people put before the value
_LABELS = {
    "password": ["password", "Password", "passwd", "pwd", "db password", "admin password", "passphrase", "pw"],
    "api_key": ["api key", "API key", "api_key", "API-Key", "apikey", "x-api-key", "license key"],
    "token": ["token", "access token", "auth token", "refresh token", "bot token", "Token"],
    "secret": ["secret", "client secret", "shared secret", "webhook secret", "client_secret", "Secret"],
}
_LABELLED_PHRASINGS = [
    "the {label} is {value}",
    "{label}: {value}",
    "{label}={value}",
    "{label} = '{value}'",
    "{label} was {value}",
    "set the {label} to {value}",
    "the {label} for the billing service is {value}",
    "{upper}={value}",
    '"{snake}": "{value}"',
    "{label} -> {value}",
    "new {label}: {value} (rotate monthly)",
    "{label} {value}",
    "FYI {label} is now {value}, don't share it",
    "{label} (staging): {value}",
]
# Classes recognised by their own format: phrasings without a word naming them
_FORMAT_PHRASINGS = [
    "{value}",
    "found {value} in the build log",
    "leaked {value} in a public gist",
    "rotate {value} asap",
    "config.yaml had {value} hardcoded",
    "`{value}`",
    "'{value}',",
    "(was {value})",
    "{value}, please revoke",
    "CI printed {value} when set -x was on",
]
_PHRASINGS = {  # other classes: their phrasings, {value} the secret (and {id} an AWS access key id)
    "bearer": [
        "Authorization: Bearer {value}",
        "bearer {value}",
        "curl -H 'Authorization: Bearer {value}' https://api",
        "headers={{'Authorization': 'Bearer {value}'}}",
        "BEARER {value} rejected with 401",
    ],
    "basic_auth": [
        "Authorization: Basic {value}",
        "-H 'Authorization: Basic {value}'",
        "auth=Basic {value}",
        "Proxy-Authorization: basic {value}",
    ],
    "connection_string": [
        "postgres://app:{value}@db.internal:5432/orders",
        "DATABASE_URL=postgresql://ro:{value}@10.0.0.5/dw",
        "mongodb+srv://admin:{value}@cluster0.example.net/db?retryWrites=true",
        "redis://:{value}@cache:6379/0 timed out",
        "amqp://worker:{value}@rabbit:5672/ down",
        "could not connect to mysql://root:{value}@mysql-ro:3306/sales",
        "host=pg port=5432 user=etl password={value} sslmode=require",
        "Server=sql01;Database=crm;User ID=app;Password={value};",
    ],
    "jdbc": [
        "jdbc:postgresql://pg:5432/inv?user=inv&password={value}",
        "jdbc:mysql://db:3306/shop?password={value}&useSSL=false",
        "jdbc:sqlserver://mssql:1433;databaseName=hr;user=hr;password={value};",
        "jdbc:oracle:thin:scott/{value}@//ora:1521/ORCL",
        "spring.datasource.password={value}",
    ],
    "private_key": [
        "-----BEGIN RSA PRIVATE KEY-----\n{value}\n-----END RSA PRIVATE KEY-----",
        "-----BEGIN PRIVATE KEY----- {value} -----END PRIVATE KEY-----",
        "-----BEGIN OPENSSH PRIVATE KEY-----\n{value}",
        '{{"private_key": "-----BEGIN PRIVATE KEY-----\\n{value}\\n-----END PRIVATE KEY-----\\n"}}',
        "pasted -----BEGIN EC PRIVATE KEY----- {value} (truncated)",
    ],
    "aws_secret_key": [
        "{id} {value}",
        "aws creds: {id} / {value}",
        "aws_secret_access_key = {value}",
        "AWS_SECRET_ACCESS_KEY={value}",
        "id {id} secret {value}",
        "the aws secret key is {value}",
    ],
    "card": [
        "visa {grouped}",
        "customer card {grouped} was charged twice",
        "{grouped} declined with code 05",
        "card {plain} declined",
        "cc: {plain} exp 12/27",
        '"card_number": "{plain}"',
        "Visa {plain} refunded",
        "pan={plain}",
        "mastercard ending in 4444, full number {plain}",
    ],
}


def generated(seed: int = 0, draws: int = 3) -> list[dict[str, str]]:
    """Every secret class in each of its phrasings, `draws` values each (the same for a seed)."""
    rng = np.random.default_rng(seed)
    items = []
    for cls in sorted(_VALUES):
        if cls in _LABELS:
            templates = [(t, label) for t in _LABELLED_PHRASINGS for label in _LABELS[cls]]
        elif cls in _PHRASINGS:
            templates = [(t, "") for t in _PHRASINGS[cls]]
        else:
            templates = [(t, "") for t in _FORMAT_PHRASINGS]
        for template, label in templates:
            for _ in range(draws):
                value = _VALUES[cls](rng)
                text = template.format(
                    value=value,
                    label=label,
                    upper=label.upper().replace(" ", "_").replace("-", "_"),
                    snake=label.lower().replace(" ", "_").replace("-", "_"),
                    id=_VALUES["aws_access_key"](rng),
                )
                items.append({"class": cls, "text": text, "secret": value})
    for template in _PHRASINGS["card"]:
        for _ in range(draws):
            number = _card_number(rng)
            grouped = " ".join(number[i : i + 4] for i in range(0, 16, 4))
            if rng.random() < 0.5:
                grouped = grouped.replace(" ", "-")
            value = grouped if "{grouped}" in template else number
            items.append({"class": "card", "text": template.format(grouped=grouped, plain=number), "secret": value})
    return items


_ID_LINES = [
    "request {id} failed with 502",
    "trace_id={id}",
    "order #{id} stuck in PENDING",
    "GET /api/orders/{id} 404",
    "job {id} retried 3 times",
    "txn {id} rolled back",
    "span_id: {id} parent 0",
    "correlation-id {id}",
    "payment request {id} retried after timeout",
    "card-service: request {id} timed out",
    "refund for order {id} (card payment) queued",
    "invoice {id} sent to billing",
    "user_id={id} locked out",
    "ticket {id}: checkout hangs",
    "event {id} dropped by consumer",
    "req={id} status=499 upstream=checkout",
]


def request_id_lines(count: int = 1000, seed: int = 0) -> list[str]:
    """Lines holding a random Luhn-valid 16-digit id in a request-id context (distinct).

    Ids start with a card brand's digit (2-6, mostly 4 and 5) so that a card pattern could take them.
    """
    rng = np.random.default_rng(seed)
    lines: dict[str, None] = {}
    while len(lines) < count:
        first = str(rng.choice(list("4455623")))
        number = _luhn_complete(first + _chars(rng, "0123456789", 14))
        lines[_ID_LINES[int(rng.integers(len(_ID_LINES)))].format(id=number)] = None
    return list(lines)


def _templates() -> list[str]:
    texts: list[str] = []
    for family in fam.FAMILIES.values():
        texts += [
            family["description"],
            family["fix"],
            family["correction"],
            *family["signals"],
            *family["surface"],
            *family["tells"],
        ]
    texts += fam.CUES + fam.NOISE + [t for group in fam.INTERLUDES.values() for t in group]
    return texts


_GENERIC = [
    "backoff {a} {b} {c} {d} ms",
    "retry delays {a}, {b}, {c}, {d} ms",
    "p50 {a} ms p95 {b} ms p99 {c} ms max {d} ms",
    "latency buckets {a} {b} {c} {d} {e}",
    "GC pauses {a} {b} {c} ms over the last hour",
    "{ts} ERROR {svc} request {uuid} failed after {a} ms",
    "{ts} WARN {svc} queue depth {b} (limit {d})",
    "deployed {svc} {ver} at {ts}; {a} pods restarted",
    "connection to {dep} at {ip}:{port} refused ({a} attempts)",
    "host {host} disk at {pct}% ({b} GB of {d} GB)",
    "commit {sha} reverted; build {build} green",
    "order {order} stuck in state PENDING for {a} s",
    "trace id {trace} spans {a} services",
    "{a} of {d} requests failed between {hh}:{mm} and {hh2}:{mm}",
    "heap {a} MB -> {b} MB -> {c} MB -> {d} MB",
    "thread pool {a}/{d} busy, {b} queued, {c} rejected",
    "rate limit {a} req/s, burst {b}, window {c} s",
    "TTL set to {a} s; {b} keys evicted, {c} expired",
    "kafka lag {a} {b} {c} {d} on partitions 0-3",
    "error codes 500 502 503 504 seen {a} {b} {c} {d} times",
    "sizes {a} KB {b} KB {c} KB {d} KB",
    "ran {a} {b} {c} {d} {e} {f} iterations",
    "IDs {a}{b} and {c}{d} were retried",
    "exit code {small} after {a} ms",
]


def ordinary_lines(count: int = 2400, seed: int = 0) -> list[str]:
    """Ordinary incident text: filled simulator templates and generic operations lines (distinct)."""
    rng = np.random.default_rng(seed)
    templates = _templates()
    lines: dict[str, None] = {}
    while len(lines) < count:
        fill = dict(values(rng))
        fill.update(_generic_values(rng))
        pool = templates if rng.random() < 0.5 else _GENERIC
        text = pool[int(rng.integers(len(pool)))]
        try:
            lines[text.format(**fill)] = None
        except (KeyError, IndexError):
            continue
    return list(lines)


def _generic_values(rng: np.random.Generator) -> dict[str, object]:
    steps = sorted(
        int(x)
        for x in rng.choice(
            [50, 100, 125, 200, 250, 400, 500, 750, 1000, 1500, 2000, 3000, 4000, 5000, 8000, 10000, 16000, 30000],
            6,
            replace=False,
        )
    )
    day, hour, minute = int(rng.integers(1, 29)), int(rng.integers(0, 24)), int(rng.integers(0, 60))
    hexes = "".join(rng.choice(list("0123456789abcdef"), 40))
    return {
        **dict(zip("abcdef", steps)),
        "ts": f"2026-03-{day:02d}T{hour:02d}:{minute:02d}:{int(rng.integers(60)):02d}Z",
        "uuid": f"{hexes[:8]}-{hexes[8:12]}-{hexes[12:16]}-{hexes[16:20]}-{hexes[20:32]}",
        "sha": hexes[:12],
        "ip": f"10.{int(rng.integers(256))}.{int(rng.integers(256))}.{int(rng.integers(1, 255))}",
        "port": int(rng.choice([80, 443, 5432, 6379, 9092, 3306, 8080])),
        "build": int(rng.integers(10**6, 10**9)),
        "order": int(rng.integers(10**5, 10**8)),
        "trace": hexes[:32],
        "hh": f"{hour:02d}",
        "mm": f"{minute:02d}",
        "hh2": f"{(hour + 1) % 24:02d}",
    }


def evaluate(secrets: Sequence[dict[str, str]], lines: Sequence[str]) -> Evaluation:
    """Redact every labelled variant (IP addresses with ``ip=True``) and every ordinary line (defaults)."""
    default, with_ip = PatternRedactor(), PatternRedactor(ip=True)
    misses = []
    for item in secrets:
        out = (with_ip if item["class"] == "ip" else default).redact(item["text"])
        if item["secret"] in out:
            misses.append(f"{item['class']}: {item['text']!r} -> {out!r}")
    changed = [(line, default.redact(line)) for line in lines]
    return Evaluation(
        len(secrets), len(secrets) - len(misses), misses, len(lines), [(a, b) for a, b in changed if a != b]
    )


class Corpus(NamedTuple):
    """One corpus's figure."""

    name: str  # where its texts come from
    kind: str  # "secrets" (recall) or "ordinary" (false positives)
    result: Evaluation


class Report(NamedTuple):
    """Recall per secret corpus and false positives per kind of ordinary line."""

    corpora: list[Corpus]

    @property
    def recall(self) -> float:
        """Share of every secret corpus's variants redacted."""
        secrets = [c.result for c in self.corpora if c.kind == "secrets"]
        total = sum(r.secrets for r in secrets)
        return sum(r.redacted for r in secrets) / total if total else 0.0

    @property
    def false_positive_rate(self) -> float:
        """Share of every ordinary line changed."""
        ordinary = [c.result for c in self.corpora if c.kind == "ordinary"]
        total = sum(r.ordinary for r in ordinary)
        return sum(len(r.false_positives) for r in ordinary) / total if total else 0.0

    def __rich__(self) -> Table:
        table = Table(title="Redaction")
        for name in ("corpus", "measure", "count", "share"):
            table.add_column(name, justify="left" if name in ("corpus", "measure") else "right")
        for corpus in self.corpora:
            r = corpus.result
            if corpus.kind == "secrets":
                table.add_row(corpus.name, "secrets redacted", f"{r.redacted}/{r.secrets}", f"{100 * r.recall:.1f}%")
            else:
                table.add_row(
                    corpus.name,
                    "lines changed",
                    f"{len(r.false_positives)}/{r.ordinary}",
                    f"{100 * r.false_positive_rate:.2f}%",
                )
        table.add_row("all secrets", "secrets redacted", "", f"{100 * self.recall:.1f}%")
        table.add_row("all ordinary lines", "lines changed", "", f"{100 * self.false_positive_rate:.2f}%")
        return table


def measure(lines: int = 2400, ids: int = 1000, seed: int = 0) -> Report:
    """Every corpus's figure: the three secret corpora, ordinary lines and request-id lines."""
    return Report(
        [
            Corpus("labelled (eval/data/redaction_secrets.jsonl)", "secrets", evaluate(labelled(), [])),
            Corpus("generated (classes x phrasings)", "secrets", evaluate(generated(seed), [])),
            Corpus("hand-written (tests/data/redaction_phrasings.jsonl)", "secrets", evaluate(phrasings(), [])),
            Corpus("ordinary incident lines", "ordinary", evaluate([], ordinary_lines(lines, seed))),
            Corpus("request-id lines", "ordinary", evaluate([], request_id_lines(ids, seed))),
        ]
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Print recall per secret corpus and false positives per kind of ordinary line."""
    parser = argparse.ArgumentParser(
        prog="python -m eval.redaction",
        description=__doc__.split("\n\n")[0],
        epilog="example: python -m eval.redaction --show",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--lines", type=int, default=2400, help="ordinary lines to generate (default 2400)")
    parser.add_argument("--show", action="store_true", help="list every miss and every false positive")
    args = parser.parse_args(argv)
    if args.lines < 1:
        print("error: --lines must be at least 1", file=sys.stderr)
        return 2
    report = measure(args.lines)
    console = Console()
    if not console.is_terminal:
        console = Console(width=120)  # pipes and logs get the whole table
    console.print(report)
    if args.show:
        for corpus in report.corpora:
            for miss in corpus.result.misses:
                print(f"  miss [{corpus.name}] {miss}")
            for line, out in corpus.result.false_positives:
                print(f"  false positive [{corpus.name}] {line!r} -> {out!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
