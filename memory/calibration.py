"""The memory's own record of how often each kind of evidence was right here.

A reasoner that fuses evidence (runbook prior, precedents, facts, graph) needs to know how
much to trust each kind *at this site*: where the runbook is often wrong and lessons are
often right, a matching lesson should outweigh the runbook. A decision entry may carry, in
its metadata, ``favoured`` (evidence kind → the choice that kind favoured), ``attempt``
(1 for the first attempt at a problem) and ``candidates`` (how many choices there were). Once
the incident the decision belonged to is resolved (`EpisodicMemory.resolution`), each kind's
favourite counts as a hit when it was the answer that finally fixed it and as a miss otherwise.
Beside hits and misses the tally keeps the hits chance alone would have scored on the decisions
whose candidate count is known (``Σ 1/K``) and how many those were: a kind right half the time
among three candidates knows something, one right half the time between two does not, and a
site's rounds need not all offer as many choices.

The same reading keeps the runbook's track record here (`TrackRecord.track`): for each
choice the runbook favoured at a first attempt, the answers that finally fixed those incidents
("the traversal names the load balancer; twice it was the service behind it"), which is what an
engineer learns about the tools of a site.

The record is derived from stored entries only, so it is rebuilt by reading them again;
`TrackRecord.update` reads each closed episode once, and an episode whose incident is
not resolved within ``PENDING_LIMIT`` later episodes is dropped from the count.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from typing import Any

from memory.episodes import Episode
from memory.graph.queries import resolution
from memory.state import Verdict

RUNBOOK_KINDS = ("prior", "prior|lesson")  # the runbook's favourite, with and without a lesson applying
PENDING_LIMIT = 50  # closed episodes after which an unresolved one stops waiting for its resolution
COUNT_BATCH = 256  # resolved episodes whose decisions are read at once (bounds what the reading holds)


class TrackRecord:
    """Hits and misses of each evidence kind's first-attempt favourites for one principal.

    Args:
        memory: an `EpisodicMemory`.
        principal: the tenant whose decisions are counted.
    """

    def __init__(self, memory: Any, principal: str) -> None:
        self.memory = memory
        self.principal = principal
        self.tally: dict[str, tuple[int, int, float, int]] = {}  # kind → (hits, misses, chance hits, counted)
        self.track: dict[str, dict[str, int]] = {}  # the runbook's favourite → {final answer: incidents}
        self._read = 0  # closed episodes read so far
        self._pending: list[tuple[int, str]] = []  # (position, episode id) awaiting a resolution

    def update(self) -> dict[str, tuple[int, int, float, int]]:
        """Count the episodes closed since the last call; the tally (kind → (hits, misses, the hits chance would
        have scored on the decisions whose candidate count is known, how many those were))."""
        closed = self.memory.state.order.get(self.principal, ())  # ids in closing order: only new ones are read
        self._pending.extend((position, closed[position]) for position in range(self._read, len(closed)))
        self._read = len(closed)
        waiting, resolved = [], []
        graph, lookup = self.memory.graph_of(self.principal), self.memory.state.verdict_lookup  # one view for all
        for position, episode_id in self._pending:
            seen = lookup(episode_id)
            answer = resolution(graph, episode_id, lookup, known=seen)  # the ids are this principal's closed episodes
            if answer is None:
                if self._read - position < PENDING_LIMIT:
                    waiting.append((position, episode_id))
                continue
            resolved.append((seen, answer))
            if len(resolved) == COUNT_BATCH:  # counted as they come: an opened store's first count holds little
                self._count_batch(resolved)
                resolved = []
        self._pending = waiting
        self._count_batch(resolved)
        return dict(self.tally)

    def _count_batch(self, resolved: list[tuple[Episode | Verdict, str]]) -> None:
        """Count the first-attempt favourites of a batch of resolved episodes: the principal's decisions from
        their first entry to their last, their metadata read at once.
        A principal's stream is segmented on its own, so its episodes do not interleave: each decision between
        an episode's first and last entries is that episode's."""
        found = [(seen.first_seq, seen.last_seq, answer) for seen, answer in resolved if seen.choices]
        if not found:
            return
        rows = self.memory.store.decisions_between(
            self.principal, min(first for first, _, _ in found), max(last for _, last, _ in found)
        )
        seqs = [seq for seq, _ in rows]
        for first, last, answer in found:
            for _, metadata in rows[bisect_left(seqs, first) : bisect_right(seqs, last)]:
                self._tally(metadata, answer)

    def _tally(self, metadata: dict[str, Any], answer: str) -> None:
        favoured = metadata.get("favoured")
        if metadata.get("attempt") != 1 or not isinstance(favoured, dict):
            return
        count = metadata.get("candidates")
        share = 1.0 / count if isinstance(count, int) and count > 0 else None  # what chance scores on it
        for kind, choice in favoured.items():
            hits, misses, chance, counted = self.tally.get(kind, (0, 0, 0.0, 0))
            hit = choice == answer
            self.tally[kind] = (
                hits + hit,
                misses + (not hit),
                chance + (share or 0.0),
                counted + (share is not None),
            )
            if kind in RUNBOOK_KINDS and isinstance(choice, str):
                answers = self.track.setdefault(choice, {})
                answers[answer] = answers.get(answer, 0) + 1
