"""Scenario records (schema 1) and the scenario error.

These are the values the loader produces and the simulator plays. They are plain
frozen dataclasses; the loader guarantees every invariant listed on the fields.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

SCHEMA_VERSION = 1
DEFAULT_SITUATION = "incident_response"
DEFAULT_MAX_ATTEMPTS = 2


class ScenarioError(Exception):
    """A scenario file (or text) failed to load; carries every problem found.

    Each problem is one line formatted ``FILE: PATH: message``, e.g.
    ``scenarios/pool.yaml: rounds[2].truth: 'db_lock' is not a root cause ...``.
    """

    def __init__(self, problems: list[str]):
        self.problems: list[str] = list(problems)  # all problems, one line each
        super().__init__("\n".join(self.problems))


@dataclass(frozen=True)
class RootCause:
    """A candidate explanation the agent can choose: the agent's world knowledge."""

    id: str  # identifier, [a-z0-9_]+, unique within the scenario
    description: str  # one-sentence explanation of the mechanism
    signals: tuple[str, ...] = ()  # typical symptoms the author associates with it


@dataclass(frozen=True)
class Interlude:
    """Unrelated activity the simulator interleaves between rounds."""

    situation: str  # situation label of its events (e.g. planning, code_review)
    events: tuple[str, ...]  # texts of the interlude's events, in order


@dataclass(frozen=True)
class Round:
    """One incident the agent must diagnose."""

    id: str  # unique round id, e.g. r1
    kind: str  # free label; results are reported per kind (learn, red_herring...)
    situation: str  # situation label of the round's events
    service: str  # affected service
    after: timedelta | None  # gap since the previous round (exclusive with `at`)
    at: datetime | None  # absolute UTC time of the round (exclusive with `after`)
    observations: tuple[str, ...]  # what the agent sees before deciding, non-empty
    candidates: tuple[str, ...]  # root-cause ids offered; includes `truth`
    truth: str  # the correct root-cause id (evaluation only)
    max_attempts: int  # attempts before the round ends unsolved, >= 1
    on_success: str | None  # outcome text after a correct attempt
    on_failure: str | None  # outcome text after a wrong attempt
    correction: str | None  # user correction shown after each wrong attempt
    caused_by: str | None  # id of an earlier round whose fix caused this incident
    runbook: tuple[str, ...] = ()  # the site's standard method's ranking of candidates, best first (empty: none given)


@dataclass(frozen=True)
class Scenario:
    """A loaded, validated schema-1 scenario."""

    name: str  # [a-z0-9-]+; shipped scenarios use their file stem
    title: str  # short human title ("" when absent)
    description: str  # free text ("" when absent)
    start: datetime | None  # UTC time of the first round, if given
    root_causes: dict[str, RootCause]  # all root causes by id, file order
    interludes: tuple[Interlude, ...]  # unrelated activity to interleave
    rounds: tuple[Round, ...]  # the rounds, in play order
    source: str  # file path it was read from, or "<string>"
    sha256: str  # hex SHA-256 of the source bytes

    def round(self, round_id: str) -> Round:
        """Returns the round with this id (KeyError if none)."""
        for r in self.rounds:
            if r.id == round_id:
                return r
        raise KeyError(round_id)
