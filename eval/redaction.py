"""How well redaction works: recall on labelled secrets, false positives on ordinary incident text.

    python -m eval.redaction            # both figures
    python -m eval.redaction --show     # also every miss and every false positive

The labelled corpus (``eval/data/redaction_secrets.jsonl``) holds fake secrets and personal
data of each class the redactor claims (international e-mails and phones, cards, keys and
tokens of common providers, ``name=value`` secrets, passwords in URLs, PEM keys, IBANs,
SSNs, and IP addresses, which are redacted on request only). A variant counts as redacted
when its value is gone from the output. The ordinary lines are the simulator's incident
templates filled with generated values plus generic operations text (latency lists,
timestamps, versions, hosts, ports, ids); any change to one is a false positive.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import NamedTuple, Sequence

import numpy as np

from memory.timeline import PatternRedactor
from simulator import families as fam
from simulator.generate import values

CORPUS = Path(__file__).resolve().parent / "data" / "redaction_secrets.jsonl"


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
    """The labelled variants: ``{"class", "text", "secret"}`` each."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _templates() -> list[str]:
    texts: list[str] = []
    for family in fam.FAMILIES.values():
        texts += [family["description"], family["fix"], family["correction"], *family["signals"],
                  *family["surface"], *family["tells"]]
    texts += fam.CUES + fam.NOISE + [t for group in fam.INTERLUDES.values() for t in group]
    return texts


_GENERIC = [
    "backoff {a} {b} {c} {d} ms", "retry delays {a}, {b}, {c}, {d} ms", "p50 {a} ms p95 {b} ms p99 {c} ms max {d} ms",
    "latency buckets {a} {b} {c} {d} {e}", "GC pauses {a} {b} {c} ms over the last hour",
    "{ts} ERROR {svc} request {uuid} failed after {a} ms", "{ts} WARN {svc} queue depth {b} (limit {d})",
    "deployed {svc} {ver} at {ts}; {a} pods restarted", "connection to {dep} at {ip}:{port} refused ({a} attempts)",
    "host {host} disk at {pct}% ({b} GB of {d} GB)", "commit {sha} reverted; build {build} green",
    "order {order} stuck in state PENDING for {a} s", "trace id {trace} spans {a} services",
    "{a} of {d} requests failed between {hh}:{mm} and {hh2}:{mm}", "heap {a} MB -> {b} MB -> {c} MB -> {d} MB",
    "thread pool {a}/{d} busy, {b} queued, {c} rejected", "rate limit {a} req/s, burst {b}, window {c} s",
    "TTL set to {a} s; {b} keys evicted, {c} expired", "kafka lag {a} {b} {c} {d} on partitions 0-3",
    "error codes 500 502 503 504 seen {a} {b} {c} {d} times", "sizes {a} KB {b} KB {c} KB {d} KB",
    "ran {a} {b} {c} {d} {e} {f} iterations", "IDs {a}{b} and {c}{d} were retried", "exit code {small} after {a} ms",
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
    steps = sorted(int(x) for x in rng.choice([50, 100, 125, 200, 250, 400, 500, 750, 1000, 1500, 2000, 3000,
                                                4000, 5000, 8000, 10000, 16000, 30000], 6, replace=False))
    day, hour, minute = int(rng.integers(1, 29)), int(rng.integers(0, 24)), int(rng.integers(0, 60))
    hexes = "".join(rng.choice(list("0123456789abcdef"), 40))
    return {
        **dict(zip("abcdef", steps)), "ts": f"2026-03-{day:02d}T{hour:02d}:{minute:02d}:{int(rng.integers(60)):02d}Z",
        "uuid": f"{hexes[:8]}-{hexes[8:12]}-{hexes[12:16]}-{hexes[16:20]}-{hexes[20:32]}", "sha": hexes[:12],
        "ip": f"10.{int(rng.integers(256))}.{int(rng.integers(256))}.{int(rng.integers(1, 255))}",
        "port": int(rng.choice([80, 443, 5432, 6379, 9092, 3306, 8080])), "build": int(rng.integers(10**6, 10**9)),
        "order": int(rng.integers(10**5, 10**8)), "trace": hexes[:32], "hh": f"{hour:02d}", "mm": f"{minute:02d}",
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
    return Evaluation(len(secrets), len(secrets) - len(misses), misses, len(lines),
                      [(a, b) for a, b in changed if a != b])


def main(argv: Sequence[str] | None = None) -> int:
    """Print recall on the labelled corpus and the false-positive rate on ordinary lines."""
    parser = argparse.ArgumentParser(prog="python -m eval.redaction", description=__doc__.split("\n\n")[0],
                                     epilog="example: python -m eval.redaction --show",
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", type=int, default=2400, help="ordinary lines to generate (default 2400)")
    parser.add_argument("--show", action="store_true", help="list every miss and every false positive")
    args = parser.parse_args(argv)
    if args.lines < 1:
        print("error: --lines must be at least 1", file=sys.stderr)
        return 2
    result = evaluate(labelled(), ordinary_lines(args.lines))
    print(f"secrets redacted: {result.redacted}/{result.secrets} ({100 * result.recall:.1f}%)")
    print(f"false positives:  {len(result.false_positives)}/{result.ordinary} "
          f"({100 * result.false_positive_rate:.2f}%)")
    if args.show:
        for miss in result.misses:
            print(f"  miss {miss}")
        for line, out in result.false_positives:
            print(f"  false positive {line!r} -> {out!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
