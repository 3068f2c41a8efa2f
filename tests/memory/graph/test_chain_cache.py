"""Remembered causal chains always equal a fresh walk of the graph."""

import pytest

import scenarios
from agent.heuristic import HeuristicReasoner
from eval.presets import PRESETS, build_agent
from memory.graph import ChainCache, Edge, EdgeType, causal_chain
from memory.timeline import HashingEncoder
from simulator import DebugEnv
from simulator.generate import generate, to_yaml


def fresh(graph, episode_id, hops, most=0, episodes=lambda node: None):
    chain = causal_chain(graph, episode_id, episodes=episodes, max_hops=hops, max_episodes=most)
    return chain.narrative if len(chain.episode_ids) > 1 and chain.narrative else None


@pytest.mark.parametrize("seed", [3, 8])
def test_remembered_chains_match_fresh_walks_while_a_memory_grows(seed):
    scenario = scenarios.loads(to_yaml(generate(45, seed)))
    encoder = HashingEncoder()
    agent = build_agent(PRESETS["episodic"], HeuristicReasoner(encoder), encoder)
    memory = agent.memory
    env = DebugEnv(scenario)
    prompt, _ = env.reset(seed=seed)
    checked = multi = 0
    try:
        while prompt is not None:
            turn = agent.decide(prompt)
            step = env.step(turn.decision.choice)
            agent.observe(step.events)
            chains, lookup = memory.state.chains, memory.episode
            for (episode_id, hops, most), text in chains.remembered().items():
                assert text == fresh(memory.graph, episode_id, hops, most, lookup)
                checked += 1
                multi += text is not None
            for episode_id in list(memory.graph)[-5:]:  # also ask for chains recall has not asked for
                assert chains.narrative(episode_id, 3) == fresh(memory.graph, episode_id, 3, 0, lookup)
                assert chains.narrative(episode_id, 3, 3) == fresh(memory.graph, episode_id, 3, 3, lookup)
            prompt = step.prompt
    finally:
        agent.close()
    assert checked > 100 and multi > 10  # the check saw remembered chains, many joining several episodes


def test_an_edge_into_a_reached_episode_forgets_exactly_the_chains_through_it():
    import networkx as nx

    from memory.graph import add_edges

    graph = nx.MultiDiGraph()
    for node in "abcd":
        graph.add_node(node, start=None, first_seq=ord(node))
    add_edges(graph, [Edge("b", "a", EdgeType.CAUSED_BY, 1.0, "t")])
    cache = ChainCache(graph, lambda node: None)
    assert cache.narrative("b", 3) == fresh(graph, "b", 3) and cache.narrative("d", 3) is None
    new = Edge("a", "c", EdgeType.RETRY_OF, 1.0, "t")  # a new backward step out of a, which b's chain reached
    add_edges(graph, [new])
    cache.edges_added([new])
    assert ("b", 3, 0) not in cache.remembered() and ("d", 3, 0) in cache.remembered()
    assert cache.narrative("b", 3) == fresh(graph, "b", 3)
    led = Edge("d", "c", EdgeType.LED_TO, 1.0, "t")  # LED_TO is walked backwards: from c to d
    add_edges(graph, [led])
    cache.edges_added([led])
    assert ("b", 3, 0) not in cache.remembered() and cache.narrative("b", 3) == fresh(graph, "b", 3)
    assert set(causal_chain(graph, "b", episodes=lambda node: None, max_hops=3).episode_ids) == set("abcd")


def test_the_cache_is_bounded():
    import networkx as nx

    graph = nx.MultiDiGraph()
    graph.add_nodes_from(str(i) for i in range(50))
    cache = ChainCache(graph, lambda node: None, capacity=8)
    for i in range(50):
        cache.narrative(str(i), 3)
    assert len(cache) == 8 and cache.reached() == {str(i) for i in range(42, 50)}
