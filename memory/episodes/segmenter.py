"""Layer 2, the segmenter: timeline entries → episodes with detected outcomes.

Each principal's stream is segmented on its own. For every new entry the segmenter
scores how strongly it starts a new episode; the open episode closes when::

    score = w_situation·situation + w_semantic·semantic + w_temporal·temporal + w_explicit·explicit
    score >= split_threshold

Each signal is a strength in [0, 1]:

- situation: 1 when the entry's situation label differs from the open episode's last one.
- semantic: cosine distance between the entry's embedding and the open episode's running
  centroid, ramped linearly from ``shift_onset`` (0) to ``shift_threshold`` (1). Measured
  only for entries that can open an episode (``shift_kinds``): responses (decisions,
  outcomes, corrections) naturally read differently from what they respond to.
- temporal: time since the open episode's last entry, ramped from ``gap_onset_s`` (0) to
  ``gap_threshold_s`` (1).
- explicit: 1 when an opening entry (observation, decision, action) arrives after the open
  episode already received an outcome or a correction: a new attempt or a new incident.
  Otherwise ``subject_change_strength`` when the entry's metadata names a different subject
  than the open episode.

With the default weights any one signal at full strength reaches the split threshold.

Outcomes are detected from the stream by `memory.episodes.outcomes` (see its docstring), with the
words of the `Lexicon` the segmenter is given (default: the shipped `DEFAULT_LEXICON`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from memory.episodes.model import Episode, Outcome, episode_id
from memory.episodes.outcomes import OutcomeVerdict, detect_outcome
from memory.lexicon import DEFAULT_LEXICON, Lexicon
from memory.text import split_sentences, trim
from memory.timeline import Entry, Kind

OPENING_KINDS = frozenset({Kind.OBSERVATION, Kind.DECISION, Kind.ACTION})  # can start an attempt
RESPONSE_KINDS = frozenset({Kind.OUTCOME, Kind.CORRECTION})  # close an attempt's feedback


@dataclass(frozen=True)
class SegmenterConfig:
    """Weights and thresholds of the boundary signals (see the module docstring)."""

    situation_weight: float = 1.0  # weight of a situation-label change
    semantic_weight: float = 1.0  # weight of the semantic shift
    shift_onset: float = 0.88  # cosine distance to the centroid where the shift starts counting
    shift_threshold: float = 0.98  # cosine distance at full shift strength (tuned for HashingEncoder)
    shift_kinds: frozenset[Kind] = frozenset({Kind.OBSERVATION, Kind.NOTE})  # entries whose shift is measured
    shift_min_entries: int = 2  # open-episode size before the shift is measured (one entry is too noisy)
    temporal_weight: float = 1.0  # weight of the temporal gap
    gap_onset_s: float = 3600.0  # gap (seconds) where the temporal signal starts counting
    gap_threshold_s: float = 3 * 3600.0  # gap (seconds) at full temporal strength
    explicit_weight: float = 1.0  # weight of explicit signals
    subject_change_strength: float = 0.5  # explicit strength of a change of subject in metadata
    split_threshold: float = 1.0  # score at or above which the open episode closes
    summary_part_chars: int = 140  # each summary part is trimmed to this many characters


DEFAULT_CONFIG = SegmenterConfig()


class Signals(NamedTuple):
    """Boundary signal strengths for one entry against the open episode."""

    situation: float  # situation-label change, 0 or 1
    semantic: float  # ramped embedding distance to the open centroid
    temporal: float  # ramped time gap
    explicit: float  # explicit closure or subject change
    score: float  # weighted sum
    split: bool  # score >= split_threshold


def _ramp(value: float, onset: float, full: float) -> float:
    if value <= onset:
        return 0.0
    if value >= full or full <= onset:
        return 1.0
    return (value - onset) / (full - onset)


def entry_subject(entry: Entry) -> str | None:
    """Subject named in the entry's metadata ("subject", else "service")."""
    for key in ("subject", "service"):
        value = entry.metadata.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


@dataclass
class _Open:
    """The open episode of one principal (mutable working state)."""

    entries: list[Entry] = field(default_factory=list)
    centroid: np.ndarray | None = None  # sum of embeddings (direction only matters)
    responded: bool = False  # an outcome or correction was seen
    subject: str | None = None  # first subject seen

    def add(self, entry: Entry) -> None:
        self.entries.append(entry)
        vector = np.asarray(entry.embedding, dtype=np.float64)
        if vector.size:
            if self.centroid is None or self.centroid.shape != vector.shape:
                self.centroid = vector.copy()
            else:
                self.centroid = self.centroid + vector
        self.responded = self.responded or entry.kind in RESPONSE_KINDS
        self.subject = self.subject or entry_subject(entry)


def signals(open_: _Open, entry: Entry, config: SegmenterConfig = DEFAULT_CONFIG) -> Signals:
    """Score `entry` as the start of a new episode after the open one (pure)."""
    if not open_.entries:
        return Signals(0.0, 0.0, 0.0, 0.0, 0.0, False)
    last = open_.entries[-1]
    situation = 1.0 if entry.situation != last.situation else 0.0
    semantic = 0.0
    vector = np.asarray(entry.embedding, dtype=np.float64)
    if (
        entry.kind in config.shift_kinds
        and len(open_.entries) >= config.shift_min_entries
        and open_.centroid is not None
        and vector.shape == open_.centroid.shape
    ):
        norm = float(np.linalg.norm(open_.centroid)) * float(np.linalg.norm(vector))
        if norm > 0.0:
            distance = 1.0 - float(open_.centroid @ vector) / norm
            semantic = _ramp(distance, config.shift_onset, config.shift_threshold)
    gap = (entry.timestamp - last.timestamp).total_seconds()
    temporal = _ramp(gap, config.gap_onset_s, config.gap_threshold_s)
    explicit = 0.0
    if entry.kind in OPENING_KINDS and open_.responded:
        explicit = 1.0
    else:
        subject = entry_subject(entry)
        if subject is not None and open_.subject is not None and subject != open_.subject:
            explicit = config.subject_change_strength
    score = (
        config.situation_weight * situation
        + config.semantic_weight * semantic
        + config.temporal_weight * temporal
        + config.explicit_weight * explicit
    )
    return Signals(situation, semantic, temporal, explicit, score, score >= config.split_threshold - 1e-9)


# -- episode building --------------------------------------------------------------------


def _assumptions(entries: Sequence[Entry]) -> tuple[str, ...]:
    found: list[str] = []
    for entry in entries:
        if entry.kind == Kind.DECISION:
            stated = entry.metadata.get("assumptions")
            if isinstance(stated, str):
                stated = [stated]
            if isinstance(stated, list):
                found.extend(str(item) for item in stated if str(item).strip())
        if entry.kind in (Kind.DECISION, Kind.ACTION, Kind.NOTE):
            for sentence in split_sentences(entry.text):
                if sentence.strip().lower().startswith("assum"):
                    found.append(sentence.strip())
    return tuple(dict.fromkeys(found))


def _subject(entries: Sequence[Entry]) -> str | None:
    counts = Counter(s for s in (entry_subject(e) for e in entries) if s is not None)
    if not counts:
        return None
    best = max(counts.values())
    return next(s for s in counts if counts[s] == best)  # Counter keeps first-seen order


def summarize(entries: Sequence[Entry], verdict: OutcomeVerdict, *, part_chars: int = 140) -> str:
    """Extractive summary: first observation (or entry), first decision, outcome sentence."""
    parts: list[str] = []
    first = next((e for e in entries if e.kind == Kind.OBSERVATION), entries[0])
    parts.append(first.text)
    decision = next((e for e in entries if e.kind == Kind.DECISION), None)
    if decision is not None and decision is not first:
        parts.append(decision.text)
    closing = [e for e in entries if e.kind in RESPONSE_KINDS and e is not first]
    if closing:
        parts.append(
            closing[-1].text
            if verdict.outcome == Outcome.UNKNOWN
            else next((e.text for e in reversed(closing) if e.kind == Kind.OUTCOME), closing[-1].text)
        )
    return " → ".join(trim(p, part_chars) for p in parts)


def build_episode(
    entries: Sequence[Entry], config: SegmenterConfig = DEFAULT_CONFIG, lexicon: Lexicon = DEFAULT_LEXICON
) -> Episode:
    """Make the (immutable) episode of a closed run of one principal's entries (outcome read with `lexicon`)."""
    if not entries:
        raise ValueError("an episode needs at least one entry")
    ids = tuple(e.id for e in entries)
    verdict = detect_outcome(entries, lexicon)
    decisions = [e for e in entries if e.kind == Kind.DECISION]
    outcome = next((e.text for e in reversed(entries) if e.kind == Kind.OUTCOME), "")
    return Episode(
        id=episode_id(ids),
        entry_ids=ids,
        first_seq=entries[0].seq,
        last_seq=entries[-1].seq,
        principal=entries[0].principal,
        situation=entries[0].situation,
        subject=_subject(entries),
        start=entries[0].timestamp,
        end=entries[-1].timestamp,
        summary=summarize(entries, verdict, part_chars=config.summary_part_chars),
        outcome=verdict.outcome,
        outcome_evidence=verdict.evidence,
        decisions=tuple(e.text for e in decisions),
        choices=tuple(str(e.metadata["choice"]) for e in decisions if e.metadata.get("choice") not in (None, "")),
        assumptions=_assumptions(entries),
        corrections=tuple(e.text for e in entries if e.kind == Kind.CORRECTION),
        actions=tuple(e.text for e in entries if e.kind == Kind.ACTION),
        observations=tuple(e.text for e in entries if e.kind == Kind.OBSERVATION),
        outcome_text=outcome if len(outcome) > config.summary_part_chars else "",
    )


# -- incremental and batch segmentation -----------------------------------------------------


class Segmenter:
    """Incremental segmenter: feed entries as they are appended; state per principal.

    Args:
        config: signal weights and thresholds.
        lexicon: the words outcomes are read with.
    """

    def __init__(self, config: SegmenterConfig = DEFAULT_CONFIG, lexicon: Lexicon = DEFAULT_LEXICON) -> None:
        self.config = config
        self.lexicon = lexicon
        self._open: dict[str, _Open] = {}
        self._last_seq: dict[str, int] = {}

    def feed(self, entry: Entry) -> list[Episode]:
        """Add one entry; returns the episode it closed (zero or one).

        Raises:
            ValueError: the entry does not come after the previous entry of its principal.
        """
        last = self._last_seq.get(entry.principal)
        if last is not None and entry.seq <= last:
            raise ValueError(f"entry seq {entry.seq} fed after seq {last} of principal {entry.principal!r}")
        self._last_seq[entry.principal] = entry.seq
        open_ = self._open.setdefault(entry.principal, _Open())
        closed: list[Episode] = []
        if open_.entries and signals(open_, entry, self.config).split:
            closed.append(build_episode(open_.entries, self.config, self.lexicon))
            open_ = self._open[entry.principal] = _Open()
        open_.add(entry)
        return closed

    def peek(self) -> list[Episode]:
        """The episodes `flush` would return, without closing them (ordered by first seq)."""
        episodes = [build_episode(o.entries, self.config, self.lexicon) for o in self._open.values() if o.entries]
        return sorted(episodes, key=lambda ep: ep.first_seq)

    def flush(self) -> list[Episode]:
        """Close every open episode (end of stream); ordered by first seq."""
        episodes = self.peek()
        self._open.clear()
        return episodes

    def has_open(self) -> bool:
        """Whether any principal has an open episode (what `flush` would close)."""
        return bool(self._open)

    def open_entries(self, principal: str) -> tuple[Entry, ...]:
        """Entries of the principal's open episode."""
        open_ = self._open.get(principal)
        return tuple(open_.entries) if open_ else ()


def boundaries(entries: Sequence[Entry], config: SegmenterConfig = DEFAULT_CONFIG) -> list[int]:
    """Positions in `entries` (one principal's stream, in order) where an episode starts."""
    starts: list[int] = []
    open_ = _Open()
    for position, entry in enumerate(entries):
        if not open_.entries or signals(open_, entry, config).split:
            starts.append(position)
            open_ = _Open()
        open_.add(entry)
    return starts


def segment(
    entries: Iterable[Entry], config: SegmenterConfig = DEFAULT_CONFIG, lexicon: Lexicon = DEFAULT_LEXICON
) -> list[Episode]:
    """Batch segmentation of a stored stream: same episodes as feeding `Segmenter` then flushing.

    Returns:
        Every episode (the last one of each principal included), ordered by first seq.
    """
    streams: dict[str, list[Entry]] = {}
    for entry in sorted(entries, key=lambda e: e.seq):
        streams.setdefault(entry.principal, []).append(entry)
    episodes: list[Episode] = []
    for stream in streams.values():
        starts = boundaries(stream, config) + [len(stream)]
        episodes.extend(build_episode(stream[a:b], config, lexicon) for a, b in zip(starts, starts[1:]))
    return sorted(episodes, key=lambda ep: ep.first_seq)
