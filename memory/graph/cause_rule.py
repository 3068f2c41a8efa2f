"""The CAUSED_BY rule: an incident's causes ranked among the changes in place, linked and revised.

An episode that opens an incident (observations, no attempt chain) is linked to the earlier
change `memory.graph.causes` finds most probable (`caused_by`); a later attempt at the same
incident that adds corrections or a fix ranks the causes again and gives the edge a new record
(`later_evidence`). Each CAUSED_BY edge comes with its LED_TO mirror. The rules are written out
in `memory.graph.rules`, which applies them.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Mapping, Sequence

from memory.episodes import Episode, Outcome
from memory.graph.attempts import DEFAULT_GRAPH_CONFIG, GraphConfig, change_candidates
from memory.graph.causes import (
    DEFAULT_CAUSE_WEIGHTS,
    CauseWeights,
    Hypothesis,
    best_cause,
    explain,
    rank_causes,
)
from memory.graph.changes import TermWeights, fix_text, made_change
from memory.graph.edges import Edge, EdgeType
from memory.lexicon import DEFAULT_LEXICON, Lexicon


def learned_share(history: Sequence[Episode], caused: Container[str]) -> Callable[[Episode], float]:
    """Share of the changes resolving a choice that are already linked as causes (what past changes led to).

    Counted on the first call (a ranking asks only about the changes its text points to, often none)."""

    def count() -> tuple[dict[str, int], dict[str, int]]:
        made: dict[str, int] = {}
        linked: dict[str, int] = {}
        for ep in history:
            if ep.choices and made_change(ep):
                made[ep.choices[-1]] = made.get(ep.choices[-1], 0) + 1
                linked[ep.choices[-1]] = linked.get(ep.choices[-1], 0) + (ep.id in caused)
        return linked, made

    return _Share(count)


def led_to_share(
    history: Sequence[Episode], caused: Container[str], resolved_as: str | None
) -> Callable[[Episode], float]:
    """Share of the resolved incidents linked to changes resolving a choice that were resolved as
    `resolved_as` (0 for every change while the incident is not resolved).

    `caused` maps each change already linked as a cause to what its incidents were resolved as
    (`memory.graph.queries.cause_links`); a plain set of ids carries no resolutions and gives 0.
    """
    if resolved_as is None or not isinstance(caused, Mapping):
        return lambda ep: 0.0

    def count() -> tuple[dict[str, int], dict[str, int]]:
        linked: dict[str, int] = {}
        alike: dict[str, int] = {}
        for ep in history:
            answers = caused.get(ep.id, ()) if ep.choices else ()
            if answers:
                linked[ep.choices[-1]] = linked.get(ep.choices[-1], 0) + len(answers)
                alike[ep.choices[-1]] = alike.get(ep.choices[-1], 0) + sum(a == resolved_as for a in answers)
        return alike, linked

    return _Share(count)


class _Share:
    """A share per change's last choice, ``part / (whole + 2)``, from counts made on the first call."""

    def __init__(self, count: Callable[[], tuple[dict[str, int], dict[str, int]]]) -> None:
        self.count = count
        self.counts: tuple[dict[str, int], dict[str, int]] | None = None

    def __call__(self, ep: Episode) -> float:
        if not ep.choices:
            return 0.0
        if self.counts is None:
            self.counts = self.count()
        part, whole = self.counts
        return part.get(ep.choices[-1], 0) / (whole.get(ep.choices[-1], 0) + 2)


def resolved_choice(ep: Episode) -> str | None:
    """What an attempt resolved its incident as: its last choice when it succeeded, else None."""
    return ep.choices[-1] if ep.outcome is Outcome.SUCCESS and ep.choices else None


def rank_incident_causes(
    incident: Episode,
    history: Sequence[Episode],
    *,
    corrections: Sequence[str] = (),
    fixes: Sequence[str] = (),
    resolved_as: str | None = None,
    caused: Container[str] = (),
    config: GraphConfig = DEFAULT_GRAPH_CONFIG,
    weights: CauseWeights = DEFAULT_CAUSE_WEIGHTS,
    lexicon: Lexicon = DEFAULT_LEXICON,
) -> list[Hypothesis]:
    """The earlier changes that may have caused `incident`, most probable first (see `memory.graph.causes`).

    Args:
        incident: the episode that opened the incident (its observations are the symptoms).
        history: the principal's episodes before it, in time order.
        corrections: corrections the incident received, read with the observations.
        fixes: what the incident's fixes did (read for shared terms only).
        resolved_as: what the incident was finally resolved as, once known.
        caused: ids of episodes already linked as causes (for the learned share); a mapping
            from those ids to what their incidents were resolved as (`cause_links`) adds the
            led-to share.
        lexicon: the words the hypotheses are read with.
    """
    return _Suspects(incident, history, caused, config).rank(
        corrections=corrections, fixes=fixes, resolved_as=resolved_as, weights=weights, lexicon=lexicon
    )


class _Suspects:
    """The changes in place when an incident started, with what ranking them reads of its history whatever the
    incident's later texts: `rank_incident_causes` in two steps, so that one incident is ranked again with other
    corrections and fixes without finding its candidates and term weights twice."""

    def __init__(
        self, incident: Episode, history: Sequence[Episode], caused: Container[str], config: GraphConfig
    ) -> None:
        self.incident, self.history, self.caused = incident, history, caused
        self.candidates = change_candidates(incident.start, history, config)
        self.terms = TermWeights([*history, incident], compared=2) if self.candidates else None
        self.learned = learned_share(history, caused) if self.candidates else None

    def rank(
        self,
        *,
        corrections: Sequence[str],
        fixes: Sequence[str],
        resolved_as: str | None,
        weights: CauseWeights,
        lexicon: Lexicon,
    ) -> list[Hypothesis]:
        """`rank_incident_causes` of the incident with these corrections, fixes and resolution."""
        if self.terms is None or self.learned is None:
            return []
        return rank_causes(
            list(self.incident.observations),
            self.incident.subject,
            self.incident.start,
            self.candidates,
            terms=self.terms,
            corrections=corrections,
            fixes=fixes,
            learned=self.learned,
            led_to=led_to_share(self.history, self.caused, resolved_as),
            weights=weights,
            lexicon=lexicon,
        )


def _caused_edges(incident: Episode, best: Hypothesis, note: str) -> list[Edge]:
    evidence = f"{note}{explain(best)}"
    return [
        Edge(incident.id, best.episode_id, EdgeType.CAUSED_BY, round(best.probability, 3), evidence),
        Edge(
            best.episode_id,
            incident.id,
            EdgeType.LED_TO,
            round(best.probability, 3),
            f"inverse of CAUSED_BY: {evidence}",
        ),
    ]


def _corrections(episodes: Sequence[Episode]) -> list[str]:
    return [t for ep in episodes for t in ep.corrections]


def _fixes(episodes: Sequence[Episode]) -> list[str]:
    return [t for t in map(fix_text, episodes) if t]


def caused_by(
    new: Episode,
    history: Sequence[Episode],
    config: GraphConfig,
    caused: Container[str],
    weights: CauseWeights,
    lexicon: Lexicon,
) -> list[Edge]:
    if not new.observations:
        return []
    ranked = rank_incident_causes(
        new,
        history,
        corrections=_corrections([new]),
        fixes=_fixes([new]),
        resolved_as=resolved_choice(new),
        caused=caused,
        config=config,
        weights=weights,
        lexicon=lexicon,
    )
    best = best_cause(ranked, weights)
    return _caused_edges(new, best, "") if best is not None else []


def later_evidence(
    new: Episode,
    chain: Sequence[Episode],
    history: Sequence[Episode],
    config: GraphConfig,
    caused: Container[str],
    weights: CauseWeights,
    lexicon: Lexicon,
) -> list[Edge]:
    """New versions of an incident's CAUSED_BY edge once a later attempt adds corrections or a fix.

    The incident's causes are ranked again with the later texts (corrections naming or denying
    the change, a fix that undoes it); the linked change's edge gets a new record with its new
    probability, higher (confirmed) or lower (weakened; below ``link_at`` the link is withdrawn,
    its history kept). A correction that names or describes another change links that one.
    """
    opener = chain[-1] if chain and chain[-1].observations else None
    if opener is None or not (new.corrections or fix_text(new)):
        return []
    attempts = [*reversed(chain), new]
    before_history = [ep for ep in history if ep.last_seq < opener.first_seq]
    suspects = _Suspects(opener, before_history, caused, config)  # ranked before and after the later texts
    before = suspects.rank(
        corrections=_corrections([opener]), fixes=_fixes([opener]), resolved_as=None, weights=weights, lexicon=lexicon
    )
    after = suspects.rank(
        corrections=_corrections(attempts),
        fixes=_fixes(attempts),
        resolved_as=resolved_choice(new),
        weights=weights,
        lexicon=lexicon,
    )
    if not after:
        return []
    edges: list[Edge] = []
    old, new_best = best_cause(before, weights), best_cause(after, weights)
    if old is not None:
        now = next(h for h in after if h.episode_id == old.episode_id)
        if abs(now.probability - old.probability) >= 0.01:
            verb = "confirmed" if now.probability >= old.probability else "weakened"
            edges += _caused_edges(opener, now, f"{verb} by later evidence: ")
    named = new_best is not None and any(k in ("named", "described") for k, _ in new_best.factors)
    if named and new_best is not None and (old is None or new_best.episode_id != old.episode_id):
        edges += _caused_edges(opener, new_best, "linked by later evidence: ")
    return edges
