"""Layer 4, facts: versioned heuristics generalized from episodes with confirmed outcomes.

Each closed episode that tested a choice contributes one `EpisodeEvidence` (`evidence`),
kept in an indexed `EvidenceLog`; the pure functions of `rules` (whose docstring writes the
rules out: labels, extraction, usefulness, confidence, revision) turn that evidence into
immutable `FactVersion` records (`versions`), and a changed belief is a new version. A version
holds its parts as data: status and kind as enums (`FactStatus`, `FactKind`), the terms' words
as a `Wording`, a lesson's ruled-out choices as `rejected`; records stored before those fields
are read into them once, on load (`FactVersion.from_record`).
`lessons` holds the facts taught by one correction (negation-aware conditions, narrowed or
revised when contradicted).
"""

from memory.facts.evidence import EpisodeEvidence, EvidenceLog, evidence_from
from memory.facts.lessons import (
    LessonIncident,
    affirmed_lines,
    learn_lesson,
    lesson_applies,
    rarity,
    rejected_choices,
    update_lesson,
)
from memory.facts.rules import (
    DEFAULT_FACTS,
    FactConfig,
    ProposalHook,
    extract_facts,
    matches,
    propose_fact,
    update_fact,
)
from memory.facts.versions import (
    ACTIVE,
    LESSON,
    RETIRED,
    RULE,
    EvidenceErased,
    FactKind,
    FactStatus,
    FactVersion,
    Usefulness,
    Wording,
    current_facts,
    evidence_lost,
    fact_id_of,
    history,
    resolve_records,
    stored_records,
)
from memory.text import terms

__all__ = [
    "ACTIVE",
    "EvidenceErased",
    "evidence_lost",
    "LESSON",
    "LessonIncident",
    "affirmed_lines",
    "learn_lesson",
    "lesson_applies",
    "rarity",
    "rejected_choices",
    "update_lesson",
    "DEFAULT_FACTS",
    "RETIRED",
    "RULE",
    "EpisodeEvidence",
    "EvidenceLog",
    "FactConfig",
    "FactKind",
    "FactStatus",
    "FactVersion",
    "ProposalHook",
    "Usefulness",
    "current_facts",
    "evidence_from",
    "extract_facts",
    "fact_id_of",
    "history",
    "matches",
    "propose_fact",
    "resolve_records",
    "stored_records",
    "terms",
    "update_fact",
    "Wording",
]
