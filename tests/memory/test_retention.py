"""Retention by policy: what a policy expires is erased like a request (recorded, sealed, purged), the store
verifies, and recall and facts equal those of a store built from the kept entries alone."""

import re
import sqlite3
from datetime import timedelta

import pytest

from eval.bench import retention as bench
from memory.__main__ import main
from memory.retention import RetentionPolicy, expired, lesson_evidence
from memory.timeline import audit
from memory.timeline.erasure import is_erased
from tests.builders import T0, copy_store, entries_from


def _rows(path):
    """The timeline and the derived records as stored (opening a store may add state runs, nothing else)."""
    with sqlite3.connect(path) as db:
        return [db.execute(f"SELECT * FROM {table} ORDER BY seq").fetchall() for table in ("timeline", "records")]


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """A store of 1,000 entries (200 incidents over 100 days) of one principal, built once."""
    path = tmp_path_factory.mktemp("template") / "m.sqlite"
    items = bench.items(200)
    bench.build(path, items)
    return path, items


@pytest.fixture
def store(template, tmp_path):
    """A fresh copy of the template store (with its anchor); (path, items)."""
    source, items = template
    return copy_store(source, tmp_path), items


def test_expired_picks_by_age_and_rank_and_spares_kept_evidence():
    entries = entries_from([{"at": 60 * 24 * day, "kind": "observation", "text": f"day {day}"} for day in range(10)])
    ids = [e.id for e in entries]
    by_age = expired(entries, RetentionPolicy(max_age=timedelta(days=3)), kept_evidence=())
    assert [e.id for e in by_age] == ids[:6]  # older than 3 days before the newest (day 9): days 0-5
    newest = expired(entries, RetentionPolicy(max_entries=4), kept_evidence={ids[1]})
    assert [e.id for e in newest] == [ids[0], *ids[2:6]]
    later = expired(entries, RetentionPolicy(max_age=timedelta(days=3)), kept_evidence=(), now=T0 + timedelta(days=20))
    assert later == entries
    both = expired(entries, RetentionPolicy(max_age=timedelta(days=8), max_entries=3), kept_evidence=())
    assert [e.id for e in both] == ids[:7]
    assert expired(entries, RetentionPolicy(max_entries=0), kept_evidence=()) == entries


def test_a_policy_needs_a_limit_and_sane_values():
    with pytest.raises(ValueError, match="needs max_age or max_entries"):
        RetentionPolicy()
    with pytest.raises(ValueError, match="max_age must be a positive timedelta.*max_entries must be an int"):
        RetentionPolicy(max_age=timedelta(0), max_entries=-1)


def test_retain_erases_the_expired_leaves_no_trace_and_equals_a_store_of_the_kept_entries(store, tmp_path):
    path, items = store
    policy = RetentionPolicy(max_entries=300, keep_lessons=False)
    with bench.memory_of(path) as memory:
        done = memory.retain(policy)
        assert done.entries == len(items) - 300 and done.purged and done.record_id and done.kept == 0
        assert memory.projection() == memory.rebuild()
        kept = [e for e in memory.store.entries() if not is_erased(e)]
        assert len(kept) == 300 and [e.text for e in kept] == [item["text"] for item in items[-300:]]
        recalled, facts = bench.recalled(memory), bench.facts(memory)
        record = dict(memory.store.records("erasure"))[done.record_id]
        assert record["policy"] == {"max_age_seconds": None, "max_entries": 300, "keep_lessons": False, "now": None}
        assert record["principal"] == "team-a" and "by" not in record and record["entries"] == done.entries
    files = bench.files_of(path)
    gone = {item["text"] for item in items[:-300]} - {item["text"] for item in items[-300:]}
    assert len(gone) > 500 and not [text for text in gone if text.encode() in files]
    assert main(["verify", str(path)]) == 0 and audit(path).findings == []
    alone = tmp_path / "alone" / "m.sqlite"
    alone.parent.mkdir()
    bench.build(alone, items[-300:])
    with bench.memory_of(alone) as memory:
        assert bench.recalled(memory) == recalled and bench.facts(memory) == facts
    assert facts and "Past incident" in recalled[0]


def test_a_dry_run_changes_nothing_and_a_second_identical_retain_erases_nothing(store, capsys):
    path, items = store
    before = _rows(path)
    assert main(["retain", str(path), "--principal", "team-a", "--max-entries", "150", "--dry-run"]) == 0
    assert capsys.readouterr().out.startswith("would erase ") and _rows(path) == before
    with bench.memory_of(path) as memory:
        preview = memory.retain(RetentionPolicy(max_entries=150), dry_run=True)
        facts = bench.facts(memory)
        done = memory.retain(RetentionPolicy(max_entries=150))
        assert (done.entries, done.kept) == (preview.entries, preview.kept) and done.kept > 0
        left = [e for e in memory.store.entries() if not is_erased(e)]
        assert len(left) == 150 + done.kept  # the newest 150 and the incidents the current facts cite
        assert [e.id for e in left[-150:]] == [e.id for e in memory.store.entries()][-150:]
        assert bench.facts(memory) == facts  # kept evidence: every lesson stands on what it stood on
        again = memory.retain(RetentionPolicy(max_entries=150))
        assert again.entries == 0 and again.record_id == "" and len(dict(memory.store.records("erasure"))) == 1
    assert main(["verify", str(path)]) == 0


def test_lessons_whose_evidence_expired_are_rebuilt_without_it(store):
    path, _ = store
    with bench.memory_of(path) as memory:
        old = {f.conclusion: set(f.support) for f in memory.facts()}
        memory.retain(RetentionPolicy(max_entries=40, keep_lessons=False))
        episodes = {e.id for e in memory.episodes()}
        for fact in memory.facts(include_retired=True):
            for version in memory.fact_history(fact.fact_id):
                assert set(version.support) <= episodes and set(version.contradict) <= episodes
        assert all(len(f.support) < len(old[f.conclusion]) for f in memory.facts())
        # the history says so: the erasure record notes what each fact lost (counts and ids, no content)
        record_id = next(iter(dict(memory.store.records("erasure"))))
        for fact in memory.facts():
            (note,) = memory.evidence_erased(fact.fact_id)
            assert note.erasure == record_id and note.policy and note.now == fact.fact_id
            assert note.support == (len(old[fact.conclusion]), len(fact.support))
            assert memory.evidence_erased(note.fact) == [note]  # found by the id it had before, too
        assert memory.evidence_erased(fact.fact_id, principal="team-b") == []


def test_max_age_counts_from_the_newest_entry_or_now(store):
    path, items = store
    with bench.memory_of(path) as memory:
        done = memory.retain(RetentionPolicy(max_age=timedelta(days=30), keep_lessons=False))
        newest = items[-1]["timestamp"]
        assert done.entries == sum(item["timestamp"] < newest - timedelta(days=30) for item in items)
        later = memory.retain(
            RetentionPolicy(max_age=timedelta(days=30), keep_lessons=False), now=newest + timedelta(days=29, hours=23)
        )
        assert 0 < later.entries < len(items) - done.entries
        with pytest.raises(ValueError, match="timezone-aware"):
            memory.retain(RetentionPolicy(max_age=timedelta(days=1)), now=newest.replace(tzinfo=None))


def test_the_retain_command(store, capsys):
    path, _ = store
    assert main(["retain", str(path), "--principal", "team-a"]) == 2
    assert "--max-age or --max-entries" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="2"):
        main(["retain", str(path), "--principal", "team-a", "--max-age", "ninety"])
    assert "argument --max-age: expected a positive number with d, h or m" in capsys.readouterr().err
    assert main(["retain", str(path), "--principal", "nobody", "--max-entries", "5"]) == 2
    assert "no entries" in capsys.readouterr().err
    assert (
        main(
            [
                "retain",
                str(path),
                "--principal",
                "team-a",
                "--max-age",
                "90d",
                "--max-entries",
                "500",
                "--no-keep-lessons",
            ]
        )
        == 0
    )
    assert re.match(r"erased \d+ expired entries of team-a \(erasure record [0-9a-f]{16}…\)", capsys.readouterr().out)
    assert main(["retain", str(path), "--principal", "team-a", "--max-entries", "500", "--no-keep-lessons"]) == 0
    assert capsys.readouterr().out.startswith("nothing of team-a expired")
    assert main(["verify", str(path)]) == 0
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT COUNT(*) FROM timeline WHERE text != ''").fetchone()[0] == 500


def test_lesson_evidence_follows_retries_back_to_the_incident():
    from memory.facts import FactVersion, Usefulness
    from memory.graph import Edge, EdgeType
    from tests.builders import episode

    failed, retry, other = episode("failed"), episode("retry"), episode("other")
    fact = FactVersion(
        "f",
        1,
        "p",
        "when x → y",
        ("x",),
        "y",
        0.8,
        ("retry",),
        (),
        T0,
        None,
        "active",
        "extracted",
        Usefulness(1, 1, 1.0, 0.5, 2.0, True),
    )
    edges = [Edge("retry", "failed", EdgeType.RETRY_OF, 0.9, ""), Edge("other", "failed", EdgeType.LED_TO, 0.5, "")]
    episodes = {e.id: e for e in (failed, retry, other)}
    assert lesson_evidence([fact], episodes, edges, principal="p") == {"failed", "retry"}
    assert lesson_evidence([fact], episodes, edges, principal="q") == frozenset()


def test_the_retention_bench_checks_what_the_policy_promises(capsys):
    assert bench.main(["--entries", "150", "--keep", "40"]) == 0
    out = capsys.readouterr().out
    for expected in ("entries=150", "erased=110", "expired_texts_left=0", "verify_findings=0"):
        assert expected in out
    assert "recall_equals_kept_alone=True facts_equal_kept_alone=True" in out
    assert bench.main(["--entries", "150", "--keep", "150"]) == 2
    assert "--keep must be between 1 and --entries - 1, not 150" in capsys.readouterr().err
