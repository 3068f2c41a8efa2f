"""Causal chain narratives remembered between recalls, forgotten exactly when they can change.

A chain through an episode (`memory.graph.causal_chain`) depends only on the episodes it
reaches backwards over causal edges and on the causal edges among them. A new causal edge
``u → v`` adds a backward step out of one episode only: ``u`` for CAUSED_BY / RETRY_OF /
LEARNED_FROM, ``v`` for LED_TO (followed against its direction). So a remembered chain is
stale only when that episode is one it reached, or when an episode it reached gets its
attributes; everything else keeps it valid. In a growing memory almost every new edge
starts at the episode that just closed, which no remembered chain reaches yet, so recall
stops re-walking the same old neighbourhoods. A chain cut at ``max_episodes`` is no
different: the walk only ever expands episodes it keeps, so it too depends on nothing else.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable

import networkx as nx

from memory.episodes import Episode
from memory.graph.edges import Edge
from memory.graph.queries import BACKWARD, FORWARD, causal_chain

DEFAULT_CAPACITY = 8192  # chains remembered at most (least recently used forgotten first)


class ChainCache:
    """Narratives of causal chains per (episode, hops), invalidated by the episodes they reached.

    Args:
        graph: the episode graph the chains are read from; report every change to it with
            `edges_added` and `episode_added`.
        episodes: episode lookup by id (the chains' times and steps).
        capacity: most chains remembered.
    """

    def __init__(
        self, graph: nx.MultiDiGraph, episodes: Callable[[str], Episode | None], capacity: int = DEFAULT_CAPACITY
    ) -> None:
        self.graph = graph
        self.episodes = episodes
        self.capacity = capacity
        self._chains: OrderedDict[tuple[str, int, int], tuple[str | None, tuple[str, ...]]] = OrderedDict()
        self._reaching: dict[str, set[tuple[str, int, int]]] = {}  # episode → remembered chains that reached it

    def __len__(self) -> int:
        return len(self._chains)

    def remembered(self) -> dict[tuple[str, int, int], str | None]:
        """The narratives held now, by (episode id, hops, max_episodes), least recently used first."""
        return {key: text for key, (text, _) in self._chains.items()}

    def reached(self) -> set[str]:
        """Episodes some remembered chain reached (a new edge or attribute there forgets it)."""
        return set(self._reaching)

    def narrative(self, episode_id: str, hops: int, max_episodes: int = 0) -> str | None:
        """The chain's narrative through `episode_id` when it joins more than one episode, else None.

        `hops` and `max_episodes` bound the chain as in `memory.graph.causal_chain`.
        """
        key = (episode_id, hops, max_episodes)
        found = self._chains.get(key)
        if found is not None:
            self._chains.move_to_end(key)
            return found[0]
        if episode_id not in self.graph:
            return None
        chain = causal_chain(self.graph, episode_id, episodes=self.episodes, max_hops=hops, max_episodes=max_episodes)
        text = chain.narrative if len(chain.episode_ids) > 1 and chain.narrative else None
        self._remember(key, text, chain.episode_ids)
        return text

    def edges_added(self, edges: Iterable[Edge]) -> None:
        """Forget the chains a batch of new edges can change."""
        for edge in edges:
            if edge.type in BACKWARD:
                self._forget(edge.source)
            elif edge.type in FORWARD:
                self._forget(edge.target)

    def episode_added(self, episode_id: str) -> None:
        """Forget the chains that reached an episode whose attributes were just set."""
        self._forget(episode_id)

    def _remember(self, key: tuple[str, int, int], text: str | None, reached: tuple[str, ...]) -> None:
        self._chains[key] = (text, reached)
        for node in reached:
            self._reaching.setdefault(node, set()).add(key)
        while len(self._chains) > self.capacity:
            old, (_, old_reached) = self._chains.popitem(last=False)
            self._unlink(old, old_reached)

    def _forget(self, node: str) -> None:
        for key in self._reaching.pop(node, ()):
            entry = self._chains.pop(key, None)
            if entry is not None:
                self._unlink(key, entry[1])

    def _unlink(self, key: tuple[str, int, int], reached: tuple[str, ...]) -> None:
        for node in reached:
            keys = self._reaching.get(node)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._reaching[node]
