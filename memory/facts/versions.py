"""Fact versions: the immutable records of a belief, their ids, and the latest or full history of each fact."""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, NamedTuple

from memory.errors import IntegrityError
from memory.timeline import format_timestamp, parse_timestamp


class FactStatus(StrEnum):
    """Whether a fact version is a usable belief (a string: compares, formats and serializes as its value)."""

    ACTIVE = "active"  # the version is a usable belief
    RETIRED = "retired"  # no revision passed the usefulness check; kept for history


class FactKind(StrEnum):
    """Where a fact came from (a string, like `FactStatus`)."""

    RULE = "rule"  # a fact induced from terms shared by confirmed episodes (`memory.facts.rules`)
    LESSON = "lesson"  # a fact taught by a correction (`memory.facts.lessons`)


ACTIVE, RETIRED = FactStatus.ACTIVE, FactStatus.RETIRED
RULE, LESSON = FactKind.RULE, FactKind.LESSON


class Usefulness(NamedTuple):
    """Measured discrimination of a condition for a conclusion on past episodes."""

    coverage: int  # matching episodes confirming the conclusion
    matched: int  # matching labelled episodes (confirming it or labelled otherwise)
    precision: float  # coverage / matched
    base_rate: float  # share of all labelled episodes confirming the conclusion
    lift: float  # precision / base_rate
    passed: bool  # meets every threshold of the config


@dataclass(frozen=True)
class Wording:
    """How the observations wrote a fact's terms, for its text: one word per condition term, in the condition's
    order, and one per exception (``unless``) term; a part is () when its words are not known (the terms stand)."""

    condition: tuple[str, ...] = ()
    unless: tuple[str, ...] = ()  # only recorded with the condition's words

    def __bool__(self) -> bool:
        return bool(self.condition or self.unless)

    def written(self, condition: Sequence[str], unless: Sequence[str]) -> dict[str, str]:
        """Term → word for the terms these words are known for (`condition` and `unless` are the fact's terms)."""
        return {**dict(zip(condition, self.condition)), **dict(zip(unless, self.unless))}

    def to_record(self) -> dict[str, list[str]]:
        """JSON form: the parts that hold words."""
        return {name: list(words) for name, words in (("condition", self.condition), ("unless", self.unless)) if words}

    @classmethod
    def from_record(
        cls, data: Mapping[str, Any] | Sequence[str], condition: Sequence[str], unless: Sequence[str]
    ) -> Wording:
        """Inverse of `to_record`, checked against the fact's terms; also reads the list of records stored before
        this type (the condition's words, followed by the exceptions' when every one of those was known).

        Raises:
            ValueError: a part holds another number of words than the fact has terms there.
        """
        if not isinstance(data, Mapping):  # an older record: a list told apart by its length
            words = tuple(data)
            if len(words) not in (len(condition), len(condition) + len(unless)):
                return cls()  # no layout the code wrote: the terms stand
            return cls(words[: len(condition)], words[len(condition) :])
        wording = cls(tuple(data.get("condition", ())), tuple(data.get("unless", ())))
        for part, terms in ((wording.condition, condition), (wording.unless, unless)):
            if part and len(part) != len(terms):
                raise ValueError(f"wording holds {len(part)} words for {len(terms)} terms")
        if wording.unless and not wording.condition:
            raise ValueError("wording holds the exceptions' words without the condition's")
        return wording


def _rejected_in_text(text: str) -> tuple[str, ...]:
    """The choices a lesson's text rules out ("… → c, not a or b"): how records stored before
    `FactVersion.rejected` say them."""
    _, sep, tail = text.partition(" → ")[2].partition(", not ")
    return tuple(tail.split(" or ")) if sep else ()


@dataclass(frozen=True)
class FactVersion:
    """One immutable version of a fact; a changed belief is a new version."""

    fact_id: str  # stable identity across versions
    version: int  # 1, 2, ...
    principal: str  # tenant the fact belongs to
    text: str  # human-readable "when <terms> → <conclusion>"
    condition: tuple[str, ...]  # normalized terms that must all be present in the observations
    conclusion: str  # the choice the evidence converged on
    confidence: float  # posterior mean of Beta(α0 + support, β0 + contradict)
    support: tuple[str, ...]  # ids of supporting episodes (sorted, unique)
    contradict: tuple[str, ...]  # ids of contradicting episodes (sorted, unique)
    created_at: datetime  # end of the episode whose closing produced this version
    supersedes: int | None  # previous version number, None for the first
    status: FactStatus  # ACTIVE or RETIRED
    reason: str  # why this version exists (extracted, reinforced, specialized, drift, retired)
    usefulness: Usefulness  # measured when the version was made
    since: datetime | None = None  # evidence before this time is ignored (set by drift)
    kind: FactKind = RULE  # RULE (induced from co-occurrence) or LESSON (taught by a correction)
    unless: tuple[str, ...] = ()  # terms that, present in the matched observation, stop the fact applying
    wording: Wording = Wording()  # the terms as the observations wrote them, for the text
    rejected: tuple[str, ...] = ()  # the choices a lesson rules out where it applies (() for rules)

    def __post_init__(self) -> None:  # a status or kind given as its string is stored as the member
        object.__setattr__(self, "status", FactStatus(self.status))
        object.__setattr__(self, "kind", FactKind(self.kind))

    @property
    def condition_words(self) -> tuple[str, ...]:
        """The condition's terms as the observations wrote them (the terms themselves when not recorded)."""
        return self.wording.condition or self.condition

    @property
    def id(self) -> str:
        """Identifier of this version, used in decision metadata ("retrieved")."""
        return f"{self.fact_id}@{self.version}"

    def to_record(self) -> dict[str, Any]:
        """JSON form for the store."""
        return {
            "fact_id": self.fact_id,
            "version": self.version,
            "principal": self.principal,
            "text": self.text,
            "condition": list(self.condition),
            "conclusion": self.conclusion,
            "confidence": round(self.confidence, 6),
            "support": list(self.support),
            "contradict": list(self.contradict),
            "created_at": format_timestamp(self.created_at),
            "supersedes": self.supersedes,
            "status": self.status.value,
            "reason": self.reason,
            "usefulness": {
                **self.usefulness._asdict(),
                "precision": round(self.usefulness.precision, 6),
                "base_rate": round(self.usefulness.base_rate, 6),
                "lift": round(self.usefulness.lift, 6),
            },
            "since": format_timestamp(self.since) if self.since else None,
            **({"kind": self.kind.value} if self.kind != RULE else {}),
            **({"unless": list(self.unless)} if self.unless else {}),
            **({"wording": self.wording.to_record()} if self.wording else {}),
            **({"rejected": list(self.rejected)} if self.kind == LESSON else {}),
        }

    @classmethod
    def from_record(cls, data: Mapping[str, Any]) -> FactVersion:
        """Inverse of `to_record`; a record stored before a field existed is read into it here, once: a
        lesson's rejected choices from its text, a list of words into the `Wording`."""
        condition, unless = tuple(data["condition"]), tuple(data.get("unless", ()))
        kind = FactKind(data.get("kind", RULE))
        rejected = data["rejected"] if "rejected" in data else _rejected_in_text(data["text"]) if kind == LESSON else ()
        return cls(
            fact_id=data["fact_id"],
            version=int(data["version"]),
            principal=data["principal"],
            text=data["text"],
            condition=condition,
            conclusion=data["conclusion"],
            confidence=float(data["confidence"]),
            # episode ids: the strings the graph already holds, not copies (a support list can be long)
            support=tuple(map(sys.intern, data["support"])),
            contradict=tuple(map(sys.intern, data["contradict"])),
            created_at=parse_timestamp(data["created_at"]),
            supersedes=data["supersedes"],
            status=FactStatus(data["status"]),
            reason=data["reason"],
            usefulness=Usefulness(**data["usefulness"]),
            since=parse_timestamp(data["since"]) if data.get("since") else None,
            kind=kind,
            unless=unless,
            wording=Wording.from_record(data.get("wording", ()), condition, unless),
            rejected=tuple(rejected),
        )


class EvidenceErased(NamedTuple):
    """An erasure that took evidence from a fact, as its erasure record tells it (`evidence_lost`)."""

    erasure: str  # id of the erasure record
    at: str  # when the erasure was made (ISO 8601)
    policy: bool  # a retention policy expired the evidence (else a request erased it)
    principal: str  # the fact's tenant
    fact: str  # the fact's id before the erasure
    support: tuple[int, int]  # supporting episodes before and after
    contradict: tuple[int, int]  # contradicting episodes before and after
    now: str  # the id the fact continues as ("" when none of the same conclusion and condition remains)

    @classmethod
    def of_record(cls, record_id: str, body: Mapping[str, Any]) -> list[EvidenceErased]:
        """The notes of one erasure record (none for a record written before they were kept)."""
        return [
            cls(
                record_id,
                str(body.get("at", "")),
                "policy" in body,
                str(item["principal"]),
                str(item["fact"]),
                (int(item["support"][0]), int(item["support"][1])),
                (int(item["contradict"][0]), int(item["contradict"][1])),
                str(item.get("now", "")),
            )
            for item in body.get("evidence_lost", ())
        ]


def evidence_lost(before: Iterable[FactVersion], after: Iterable[FactVersion]) -> list[dict[str, Any]]:
    """What an erasure takes from each current fact (ids and counts only, no content): the facts of
    `before` whose evidence differs in `after` (the facts a replay without the erased entries derives),
    each with its support and contradiction counts before and after, and the id it continues as
    ("" when no fact of the same tenant, conclusion and condition remains)."""
    later = {v.fact_id: v for v in current_facts(after)}
    same = {(v.principal, v.conclusion, v.condition): v.fact_id for v in later.values()}
    lost = []
    for fact in current_facts(before):
        now = later.get(fact.fact_id) or later.get(same.get((fact.principal, fact.conclusion, fact.condition), ""))
        counts = (len(fact.support), len(fact.contradict))
        if now is not None and (now.support, now.contradict) == (fact.support, fact.contradict):
            continue
        lost.append(
            {
                "fact": fact.fact_id,
                "principal": fact.principal,
                "support": [counts[0], len(now.support) if now else 0],
                "contradict": [counts[1], len(now.contradict) if now else 0],
                "now": now.fact_id if now else "",
            }
        )
    return lost


def fact_id_of(identifier: str) -> str:
    """The fact id of a version id (``fact@3`` → ``fact``); other ids unchanged."""
    return identifier.split("@", 1)[0]


def describe(condition: Sequence[str], conclusion: str) -> str:
    """Human-readable text of a fact."""
    return f"when {' + '.join(condition)} → {conclusion}"


def new_fact_id(principal: str, conclusion: str, condition: Sequence[str], origin: str) -> str:
    """Stable identity of a fact: its tenant, first conclusion, first condition and origin episode."""
    blob = "\n".join([principal, conclusion, " ".join(condition), origin])
    return "fact-" + hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


def current_facts(versions: Iterable[FactVersion]) -> list[FactVersion]:
    """Latest version of each fact (retired ones included), in fact-id order."""
    latest: dict[str, FactVersion] = {}
    for v in versions:
        if v.fact_id not in latest or v.version > latest[v.fact_id].version:
            latest[v.fact_id] = v
    return [latest[k] for k in sorted(latest)]


def history(versions: Iterable[FactVersion], fact_id: str) -> list[FactVersion]:
    """Every version of one fact, oldest first."""
    return sorted((v for v in versions if v.fact_id == fact_id), key=lambda v: v.version)


def stored_records(
    versions: Sequence[FactVersion], previous: Mapping[str, FactVersion]
) -> list[tuple[str, dict[str, Any]]]:
    """(id, body) to store for new versions, in order.

    A version that follows one already stored (the latest of `previous`, or an earlier one of
    `versions`) stores only what changed in its support and contradict lists against that
    ``base`` version: storage grows with the evidence, not with evidence × versions.
    `resolve_records` turns the bodies back into whole versions.
    """
    latest = {v.fact_id: previous[v.fact_id] for v in versions if v.fact_id in previous}
    out = []
    for version in versions:
        body = version.to_record()
        base = latest.get(version.fact_id)
        if base is not None and base.version < version.version:
            del body["support"], body["contradict"]
            body["base"] = base.version
            for name, now, before in (
                ("support", version.support, base.support),
                ("contradict", version.contradict, base.contradict),
            ):
                body[f"{name}_add"] = sorted(set(now) - set(before))
                body[f"{name}_drop"] = sorted(set(before) - set(now))
        out.append((version.id, body))
        latest[version.fact_id] = version
    return out


def resolve_records(bodies: Iterable[Mapping[str, Any]]) -> Iterator[FactVersion]:
    """Fact versions from stored bodies in insertion order, whole (older stores) or as changes to a base.

    Raises:
        IntegrityError: a body names a base version not stored before it.
    """
    lists: dict[tuple[str, int], tuple[tuple[str, ...], tuple[str, ...]]] = {}
    for body in bodies:
        if "base" in body:
            key = (body["fact_id"], int(body["base"]))
            if key not in lists:
                raise IntegrityError(
                    f"fact version {body['fact_id']}@{body['version']} is stored as changes to "
                    f"version {body['base']}, which is not stored before it"
                )
            support, contradict = lists[key]
            body = {
                **body,
                "support": sorted((set(support) - set(body["support_drop"])) | set(body["support_add"])),
                "contradict": sorted((set(contradict) - set(body["contradict_drop"])) | set(body["contradict_add"])),
            }
        version = FactVersion.from_record(body)
        lists[(version.fact_id, version.version)] = (version.support, version.contradict)
        yield version
