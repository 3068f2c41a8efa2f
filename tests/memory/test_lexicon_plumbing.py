"""A memory handed a lexicon reads with it everywhere (segmenter, graph rules, facts, replays), and a store
opens only with the lexicon its derived records were read with."""

from __future__ import annotations

import sqlite3
from datetime import timedelta

import pytest

from memory import DEFAULT_LEXICON, EdgeType, EpisodicMemory, EpisodicMemoryError, Lexicon, Outcome, load_lexicon
from memory.persistence.lexicons import LEXICON, LexiconMismatch, check_lexicon, record_lexicon, recorded_lexicon
from memory.timeline import SQLiteStore
from tests.builders import T0

BANJAXED = DEFAULT_LEXICON.with_words("failure_cues", ["banjaxed"], "tests: a site's word for broken")


def play(memory: EpisodicMemory, start=T0) -> None:
    """Two incidents whose failed attempts say only that the pump is banjaxed (no structured status)."""
    clock = start
    for symptom, wrong, right in (
        ("borehole pump silent, tank level falling", "restart", "fuse"),
        ("borehole pump silent again, tank level falling", "fuse", "fuse"),
    ):
        clock += timedelta(days=1)
        memory.observe(symptom, timestamp=clock, situation="ops", metadata={"service": "pump"})
        for choice in dict.fromkeys((wrong, right)):
            clock += timedelta(minutes=3)
            memory.decide(
                f"Decision: {choice}", choice=choice, timestamp=clock, situation="ops", metadata={"service": "pump"}
            )
            clock += timedelta(minutes=5)
            memory.outcome(
                "the pump is fixed, water flowing" if choice == right else "the pump is banjaxed",
                timestamp=clock,
                situation="ops",
                metadata={"service": "pump"},
            )
    memory.flush()


def test_the_face_exports_the_lexicon():
    assert isinstance(DEFAULT_LEXICON, Lexicon) and load_lexicon().fingerprint == DEFAULT_LEXICON.fingerprint
    assert BANJAXED.fingerprint != DEFAULT_LEXICON.fingerprint


def test_a_memory_handed_a_lexicon_reads_an_outcome_the_default_memory_does_not():
    with EpisodicMemory() as plain, EpisodicMemory(lexicon=BANJAXED) as site:
        for memory in (plain, site):
            memory.observe("borehole pump silent", timestamp=T0, situation="ops")
            memory.decide("Decision: restart", choice="restart", timestamp=T0 + timedelta(minutes=1), situation="ops")
            memory.outcome("the pump is banjaxed", timestamp=T0 + timedelta(minutes=5), situation="ops")
            memory.flush()
        assert [e.outcome for e in plain.episodes()] == [Outcome.SUCCESS]  # no problem cue after a change
        assert [e.outcome for e in site.episodes()] == [Outcome.FAILURE]
        assert site.lexicon is BANJAXED and site.state.lexicon is BANJAXED and plain.lexicon is DEFAULT_LEXICON


def test_the_rebuild_and_a_reopening_equal_the_live_projection_under_the_lexicon(tmp_path):
    path = tmp_path / "site.sqlite"
    with EpisodicMemory(path, lexicon=BANJAXED) as site:
        play(site)
        live = site.projection()
        assert live == site.rebuild()  # the replay reads with the same lexicon
        assert EdgeType.RETRY_OF in {e.type for e in site.edges()}  # the banjaxed attempt failed: a retry
    with EpisodicMemory() as plain:
        play(plain)
        assert plain.projection() != live and EdgeType.RETRY_OF not in {e.type for e in plain.edges()}
    with EpisodicMemory(path, lexicon=BANJAXED) as reopened:
        assert reopened.projection() == live == reopened.rebuild()


def test_a_store_opens_only_with_the_lexicon_that_derived_it(tmp_path):
    path = tmp_path / "site.sqlite"
    with EpisodicMemory(path, lexicon=BANJAXED) as site:
        play(site)
    with pytest.raises(EpisodicMemoryError) as refused:
        EpisodicMemory(path)
    assert isinstance(refused.value, LexiconMismatch)
    assert BANJAXED.fingerprint in str(refused.value) and DEFAULT_LEXICON.fingerprint in str(refused.value)
    same_words = DEFAULT_LEXICON.with_words("failure_cues", ["banjaxed"], "another copy, the same words")
    with EpisodicMemory(path, lexicon=same_words) as again:  # a lexicon is its words, not the object
        assert len(again.episodes()) == 3
    shipped = tmp_path / "shipped.sqlite"
    with EpisodicMemory(shipped) as memory:
        play(memory)
    with pytest.raises(LexiconMismatch):
        EpisodicMemory(shipped, lexicon=BANJAXED)
    with EpisodicMemory(shipped, lexicon=load_lexicon()) as memory:  # the shipped words, read again
        assert len(memory.episodes()) == 3


def test_an_empty_store_takes_the_lexicon_that_opens_it_first(tmp_path):
    path = tmp_path / "new.sqlite"
    with EpisodicMemory(path, lexicon=BANJAXED):
        pass
    with pytest.raises(LexiconMismatch):
        EpisodicMemory(path)
    store = SQLiteStore(tmp_path / "race.sqlite")  # two processes record at once: the first recorded is the store's
    record_lexicon(store, BANJAXED)
    record_lexicon(store, DEFAULT_LEXICON)
    assert recorded_lexicon(store) == (BANJAXED.fingerprint, False)
    check_lexicon(store, BANJAXED)
    with pytest.raises(LexiconMismatch):
        check_lexicon(store, DEFAULT_LEXICON)
    store.close()


def test_a_store_derived_before_lexicons_were_recorded_is_the_shipped_lexicon_s(tmp_path, monkeypatch):
    path = tmp_path / "old.sqlite"
    with monkeypatch.context() as patched:
        patched.setattr(
            "memory.persistence.lexicons.check_lexicon", lambda store, lexicon: None
        )  # as earlier versions wrote it
        with EpisodicMemory(path) as memory:
            play(memory)
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT COUNT(*) FROM snapshots WHERE kind = ?", (LEXICON,)).fetchone()[0] == 0
    with pytest.raises(LexiconMismatch):
        EpisodicMemory(path, lexicon=BANJAXED)
    with EpisodicMemory(path) as memory:
        assert len(memory.episodes()) == 3
    with sqlite3.connect(path) as db:  # recorded now
        assert db.execute("SELECT id FROM snapshots WHERE kind = ?", (LEXICON,)).fetchall() == [
            (DEFAULT_LEXICON.fingerprint,)
        ]


def test_the_shipped_lexicon_of_another_version_opens_a_store_of_the_shipped_lexicon(tmp_path):
    path = tmp_path / "older.sqlite"
    store = SQLiteStore(path)  # recorded by a version of the library whose shipped words differed
    store.add_snapshot(LEXICON, "0" * 64, {"fingerprint": "0" * 64, "shipped": True, "groups": 1}, b"{}")
    store.close()
    with EpisodicMemory(path) as memory:
        play(memory)
    with pytest.raises(LexiconMismatch):
        EpisodicMemory(path, lexicon=BANJAXED)


def test_an_erasure_keeps_the_store_s_lexicon(tmp_path):
    path = tmp_path / "site.sqlite"
    with EpisodicMemory(path, lexicon=BANJAXED) as site:
        play(site)
        secret = site.observe("the gate code is 4471", timestamp=T0 + timedelta(days=5), situation="ops")
        site.flush()
        site.forget(entry_id=secret.id)  # deletes the snapshots; the lexicon is recorded again
        assert site.projection() == site.rebuild()
    with EpisodicMemory(path, lexicon=BANJAXED) as reopened:
        assert [e.outcome for e in reopened.episodes()][:2] == [Outcome.FAILURE, Outcome.SUCCESS]
    with pytest.raises(LexiconMismatch):
        EpisodicMemory(path)


def test_recall_reads_the_query_with_the_memory_s_lexicon():
    # "tank level hunky-dory" reports a normal state only to a site that says so: its terms then do not make
    # a past incident close (closeness reads the lines' affirmed clauses)
    site = DEFAULT_LEXICON.with_words("normal_state", ["hunky-dory"], "tests: a site's word for fine")
    query = ["borehole pump silent", "tank level hunky-dory"]
    near = {}
    for name, lexicon in (("default", DEFAULT_LEXICON), ("site", site)):
        with EpisodicMemory(principal="ops", lexicon=lexicon) as memory:
            play(memory)
            near[name] = memory.recall(query, situation="ops", subject="pump").incidents[0].closeness
    assert 0 < near["site"] < near["default"]
