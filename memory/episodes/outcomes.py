"""Outcome detection: how an episode ended, read from its entries (never from ground truth).

Outcomes are detected in this order of precedence:

1. structured status: the last outcome entry whose metadata holds a status-like key
   (``status``, ``state``, ``result``, ``conclusion``, ``verdict``, ``outcome``, at any
   depth) with a known value: success/passed/ok/green → SUCCESS, failure/failed/error/red →
   FAILURE, partial/degraded/flaky/unstable → PARTIAL;
2. a correction after a decision ⇒ FAILURE of that attempt;
3. outcome text, then correction text, through the cue lexicon of `memory.text`; the last
   clause (split at ``; . : !`` and "but") that holds a cue decides: success cues only →
   SUCCESS, failure cues only → FAILURE, partial cues or both → PARTIAL. A negator ("not",
   "no", "no longer", "never", "without", "n't", …) among the three words before a cue flips
   success ↔ failure ("not fixed", "did not help", "no longer failing"); a negated symptom
   noun is a success cue ("no errors", "no more failures"). A success clause
   undercut by "but" and a clause without a success cue ("green, but stale prices
   reported") is a FAILURE, or PARTIAL when that clause holds a partial cue. What describes
   the state before the fix holds no cue: a past-perfect relative clause ("whose regulator had
   failed"), a cue word used as an adjective ("the failed disk"), what a new thing does
   ("added a check that fails the deploy on …"), and a failure clause before a later action
   whose result is reported after it, or that says what was or had been wrong ("the seal was
   broken, so … Replaced the seal; pressure holds at 4 bar"). "no-reads" is a noun, not a
   negation, and "no … work needed" says what was not needed;
4. an outcome report with no cue at all after a decision or action in the same episode
   (a change reported without any problem) ⇒ SUCCESS, marked as such in the evidence;
5. nothing ⇒ UNKNOWN.
"""

from __future__ import annotations

import re
from typing import Any, Mapping, NamedTuple, Sequence

from memory.episodes.model import Outcome
from memory.text import FAILURE_CUES, NEGATORS, PARTIAL_CUES, SUCCESS_CUES, SYMPTOM_NOUNS, trim, words
from memory.timeline import Entry, Kind


class OutcomeVerdict(NamedTuple):
    """A detected outcome and what it was detected from."""

    outcome: Outcome  # detected outcome
    evidence: str  # metadata status or text cue, with the source text


_STATUS_KEYS = ("status", "state", "result", "conclusion", "verdict", "outcome")
_STATUS_VALUES = {
    **dict.fromkeys(("success", "succeeded", "successful", "passed", "pass", "ok", "green", "fixed", "resolved"),
                    Outcome.SUCCESS),
    **dict.fromkeys(("failure", "failed", "fail", "error", "errored", "red", "broken"), Outcome.FAILURE),
    **dict.fromkeys(("partial", "partially", "degraded", "flaky", "unstable", "mixed"), Outcome.PARTIAL),
}

_CLAUSES = re.compile(r"[;.!?:]\s+|[;!?]|\bbut\b|\n")
_NEGATED_SYMPTOM = re.compile(rf"\b(?:no|zero|without)\s+(?:[\w-]+\s+){{0,2}}?(?:{SYMPTOM_NOUNS})\b")
# "the alternator, whose regulator had failed" / "the test that had been failing": a relative
# clause in the past perfect describes the state before, not how the attempt ended
_EARLIER_STATE = re.compile(r"\b(?:whose|which|that|who)\s+(?:[\w-]+\s+){0,3}?had\s+(?:been\s+)?[\w-]+(?:ed|en|ing)\b")
# "replaced the failed disk": a cue word used as an adjective names the part, not how the attempt ended
_ATTRIBUTIVE = re.compile(r"\b(?:the|a|an|its|their|[a-z]+'s)\s+(?:failed|broken|failing)\s+(?=[a-z])")
# "no further work needed": a negated cue followed by this says what was not needed, not how it ended
_NOT_NEEDED = re.compile(r"\s+(?:was\s+|were\s+)?(?:needed|required|necessary)\b")
# "no-reads", "non-zero": a negator joined to its word by a hyphen makes a noun or adjective, not a negation
_NEGATOR_COMPOUND = re.compile(r"\b(?:no|non|not)-(?=[a-z0-9])")
# A fault found before the fix: a clause stating what was or had been wrong ("the seal was broken",
# "found the job still reading the old path") ...
_FOUND_STATE = re.compile(r"\b(?:was|were|had been|found|turned out)\b")
# ... followed by a later clause that reports the next action in the subjectless style of a log
# ("Replaced the seal", "Re-seated the card", "Took the node out of the pool")
_ACTION_START = re.compile(r"^\s*(?:(?:re-?)?[a-z]+ed|took|put|set|reset|rebuilt|rewound|cut|made|gave|ran|re-ran|"
                           r"brought|refit|after (?:a|an|the)|once (?:it|the))\b")
# "added an alert that fires when the queue passes 1,000", "a check that stops the deploy when fewer than …":
# what a new thing does, not how the attempt ended
_DESCRIBED = re.compile(r"\b(?:a|an)\s+(?:[\w-]+\s+){0,3}?(?:that|which)\s.*$")


def _cue_pattern(cues: Sequence[str]) -> re.Pattern[str]:
    ordered = sorted(cues, key=len, reverse=True)  # multi-word phrases before their words
    return re.compile(r"\b(?:" + "|".join(ordered) + r")\b")


_CUES = ((Outcome.FAILURE, _cue_pattern(FAILURE_CUES)), (Outcome.PARTIAL, _cue_pattern(PARTIAL_CUES)),
         (Outcome.SUCCESS, _cue_pattern(SUCCESS_CUES)))
_FLIP = {Outcome.SUCCESS: Outcome.FAILURE, Outcome.FAILURE: Outcome.SUCCESS, Outcome.PARTIAL: Outcome.PARTIAL}


def _blank(text: str, match: re.Match[str]) -> str:
    """`text` with the match replaced by spaces, so later patterns cannot reuse its words."""
    return text[: match.start()] + " " * len(match.group(0)) + text[match.end():]


def _clause_cues(clause: str) -> list[tuple[Outcome, str]]:
    found: list[tuple[Outcome, str]] = []
    masked = _NEGATOR_COMPOUND.sub(lambda m: " " * len(m.group(0)), clause)
    for pattern in (_EARLIER_STATE, _ATTRIBUTIVE, _DESCRIBED):
        for match in pattern.finditer(clause):
            masked = _blank(masked, match)
    for match in _NEGATED_SYMPTOM.finditer(masked):
        found.append((Outcome.SUCCESS, match.group(0)))
        masked = _blank(masked, match)
    for polarity, pattern in _CUES:
        for match in pattern.finditer(masked):
            before = words(masked[: match.start()])[-3:]
            negated = any(word in NEGATORS or word.endswith("n't") for word in before)
            if negated and _NOT_NEEDED.match(masked, match.end()):
                masked = _blank(masked, match)
                continue
            phrase = " ".join(before[-1:] + [match.group(0)]) if negated else match.group(0)
            found.append((_FLIP[polarity] if negated else polarity, phrase))
            masked = _blank(masked, match)
    return found


def _clause_verdict(cues: list[tuple[Outcome, str]]) -> Outcome:
    kinds = {polarity for polarity, _ in cues}
    if Outcome.PARTIAL in kinds or kinds == {Outcome.SUCCESS, Outcome.FAILURE}:
        return Outcome.PARTIAL
    return kinds.pop() if kinds else Outcome.UNKNOWN


def _clauses(lowered: str) -> list[tuple[str, bool]]:
    """Non-empty clauses of a lower-cased text, each with whether "but" introduced it."""
    clauses: list[tuple[str, bool]] = []
    position, but = 0, False
    for match in _CLAUSES.finditer(lowered):
        clauses.append((lowered[position : match.start()], but))
        position, but = match.end(), match.group(0).strip() == "but"
    clauses.append((lowered[position:], but))
    return [(c, b) for c, b in clauses if c.strip()]


def classify_text(text: str) -> OutcomeVerdict:
    """Outcome of one outcome or correction text through the cue lexicon."""
    clauses = _clauses(text.lower())
    acted = False  # whether a later clause reported an action (see `_FOUND_STATE`)
    reported = False  # whether a later action was followed by what came of it
    for index in range(len(clauses) - 1, -1, -1):
        clause = clauses[index][0]
        cues = _clause_cues(clause)
        if not cues:
            if _ACTION_START.match(clause):
                acted, reported = True, reported or index < len(clauses) - 1
            continue
        verdict = _clause_verdict(cues)
        if verdict == Outcome.FAILURE and (reported or (acted and _FOUND_STATE.search(clause))):
            continue  # the fault the later action addressed, not how the attempt ended
        shown = ", ".join(f"'{phrase}'" for _, phrase in cues)
        later = clauses[index + 1] if index + 1 < len(clauses) else None
        if verdict == Outcome.SUCCESS and later is not None and later[1]:
            return OutcomeVerdict(Outcome.FAILURE, f"text cue {shown} undercut by 'but {trim(later[0].strip(), 60)}'")
        return OutcomeVerdict(verdict, f"text cue {shown}")
    return OutcomeVerdict(Outcome.UNKNOWN, "no outcome cue")


def _structured_status(metadata: Any) -> str | None:
    if isinstance(metadata, Mapping):
        for key in _STATUS_KEYS:
            value = metadata.get(key)
            if isinstance(value, str) and value.strip().lower() in _STATUS_VALUES:
                return value.strip().lower()
        for value in metadata.values():
            found = _structured_status(value)
            if found is not None:
                return found
    elif isinstance(metadata, list):
        for value in metadata:
            found = _structured_status(value)
            if found is not None:
                return found
    return None


def _quote(text: str, limit: int = 100) -> str:
    return f'"{trim(text, limit)}"'


def detect_outcome(entries: Sequence[Entry]) -> OutcomeVerdict:
    """Detect an episode's outcome from its entries (see the module docstring)."""
    outcomes = [e for e in entries if e.kind == Kind.OUTCOME]
    for entry in reversed(outcomes):
        status = _structured_status(entry.metadata)
        if status is not None:
            return OutcomeVerdict(_STATUS_VALUES[status], f"structured status '{status}' on outcome {_quote(entry.text)}")
    first_decision = next((i for i, e in enumerate(entries) if e.kind == Kind.DECISION), None)
    if first_decision is not None:
        corrections = [e for e in entries[first_decision:] if e.kind == Kind.CORRECTION]
        if corrections:
            return OutcomeVerdict(Outcome.FAILURE, f"correction after the decision: {_quote(corrections[-1].text)}")
    for kind in (Kind.OUTCOME, Kind.CORRECTION):
        for entry in reversed([e for e in entries if e.kind == kind]):
            verdict = classify_text(entry.text)
            if verdict.outcome != Outcome.UNKNOWN:
                return OutcomeVerdict(verdict.outcome, f"{verdict.evidence} in {kind.value} {_quote(entry.text)}")
    changed = next((i for i, e in enumerate(entries) if e.kind in (Kind.DECISION, Kind.ACTION)), None)
    if changed is not None:
        report = next((e for e in reversed(entries[changed:]) if e.kind == Kind.OUTCOME), None)
        if report is not None:
            return OutcomeVerdict(Outcome.SUCCESS, f"outcome after a change with no problem cue: {_quote(report.text)}")
    return OutcomeVerdict(Outcome.UNKNOWN, "no outcome signal")
