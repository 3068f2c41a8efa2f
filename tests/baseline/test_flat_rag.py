"""The windowed flat-RAG baseline, the shared budget, and the run log's provenance and explanations."""

import pytest

from agent.agents import Budget, fit_budget
from agent.reasoner import Evidence
from baseline import WindowedRAGMemory
from eval import runlog
from eval.compare import main
from eval.merge import records
from eval.metrics import evidence_hits
from memory.timeline import HashingEncoder
from tests.builders import T0


def test_windows_keep_a_decision_its_outcome_and_the_correction_together_and_only_committed():
    memory = WindowedRAGMemory(HashingEncoder(), window=4, stride=2)
    texts = ["checkout slow", "Decision: a — x", "no change", "it was b", "next round symptom"]
    for i, text in enumerate(texts[:4]):
        memory.append(text, source=i)
    memory.commit()
    for start in range(1, 4):  # any three consecutive events share a window
        assert any(set(range(start, min(start + 3, 4))) <= set(w.sources) for w, _ in memory.search("x", k=10))
    memory.append(texts[4], source=4)  # appended, not committed: never retrieved
    assert all(4 not in w.sources for w, _ in memory.search("next round symptom", k=10))
    memory.commit()
    assert 4 in memory.search("next round symptom", k=1)[0][0].sources
    with pytest.raises(ValueError):
        WindowedRAGMemory(HashingEncoder(), window=2, stride=3)


def test_one_budget_in_items_and_characters_counts_facts():
    items = [Evidence(id=str(i), source="fact" if i % 2 else "chunk", text="x" * 100, relevance=0.5) for i in range(10)]
    assert len(fit_budget(items, Budget(items=9, chars=10_000))) == 9
    assert len(fit_budget(items, Budget(items=9, chars=350))) == 3
    assert len(fit_budget(items, Budget(items=9, chars=10))) == 1  # one item always fits


def test_long_incidents_cannot_crowd_the_facts_out_of_the_budget():
    incidents = [Evidence(id=f"i{i}", source="incident", text="y" * 1400, relevance=0.5) for i in range(3)]
    facts = [Evidence(id=f"f{i}", source="fact", text="when x → a, not b", relevance=1.0) for i in range(2)]
    change = Evidence(id="c", source="change", text="this started after the capacity change", relevance=0.5)
    kept = fit_budget(incidents + [change] + facts, Budget(items=9, chars=3000))
    assert [item.id for item in kept] == ["i0", "i1", "c", "f0", "f1"]  # the given order, facts and changes kept
    assert sum(len(item.text) for item in kept) <= 3000


def test_run_log_explains_decisions_and_traces_retrieval_to_rounds(tmp_path):
    path = tmp_path / "log.json"
    assert (
        main(
            [
                "dns-tls-clock",
                "--seeds",
                "1",
                "--agents",
                "episodic",
                "flat_rag",
                "no_memory",
                "--quiet",
                "--json",
                str(path),
            ],
            now=lambda: T0,
        )
        == 0
    )
    log = runlog.read(path)
    for agent in ("episodic", "flat_rag"):
        rows = log["agents"][agent]["rounds"]
        order = [row["round"] for row in rows]
        truth = {row["round"]: row["truth"] for row in rows}
        for row in rows:
            assert row["rationale"] and {"prior", "memory", "facts", "feedback", "total"} <= set(
                row["candidate_scores"][row["first_decision"]]
            )
            for item in row["retrieved_items"]:
                assert {"id", "source", "score", "why", "round", "same_cause"} <= set(item) and item["why"]
                if item["round"] is not None:  # only earlier rounds: the live round is never retrieved
                    assert order.index(item["round"]) < order.index(row["round"])
                    assert item["same_cause"] == (truth[item["round"]] == row["truth"])
        retrieval = log["agents"][agent]["summary"]["retrieval"]
        assert retrieval == {**retrieval, **evidence_hits(records(log, agent))}
        assert 0 < retrieval["evidence_rounds"] < len(rows) and retrieval["evidence_hitk"] >= retrieval["evidence_hit1"]
        per_kind = log["agents"][agent]["summary"]["per_kind"]
        recall = [r for r in records(log, agent) if r.kind == "recall"]
        assert per_kind["recall"]["evidence_hitk"] == evidence_hits(recall)["evidence_hitk"]
    assert log["agents"]["no_memory"]["summary"]["retrieval"]["evidence_hitk"] == 0
    versus = log["comparisons"]["versus"]
    assert set(versus) == {"flat_rag", "no_memory"} and versus["flat_rag"]["n_rounds"] == len(order)
