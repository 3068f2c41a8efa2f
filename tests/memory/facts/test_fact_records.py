"""Fact records hold their structure as structure: a lesson's rejected choices, its words per part, status and
kind as enums; records stored before those fields existed open, verify and read the same, converted once on load.

`data/fact_records/old_layout.json` holds fact version bodies as the code before `FactVersion.rejected` and
`Wording` stored them (lessons from played incidents; a lesson confirmed, narrowed with its exceptions' words and
revised; one narrowed by a term no observation wrote as such; a retired one; a rule), in storing order, some whole
and some as changes to a base version, with what that code read from each (`read`).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from memory import EpisodicMemory
from memory.__main__ import main
from memory.errors import DamagedStore
from memory.facts import (
    ACTIVE,
    LESSON,
    RETIRED,
    RULE,
    FactKind,
    FactStatus,
    FactVersion,
    Wording,
    rejected_choices,
    resolve_records,
)
from memory.persistence.record_fields import problem
from memory.timeline import SQLiteStore
from memory.timeline.schema import RecordKind

OLD = json.loads(
    (Path(__file__).resolve().parents[2] / "data" / "fact_records" / "old_layout.json").read_text(encoding="utf-8")
)


def _store(path: Path, records) -> Path:
    store = SQLiteStore(path)
    store.add_records(RecordKind.FACT, [(i, body) for i, body in records])
    store.close()
    return path


def _read(memory: EpisodicMemory) -> dict[str, FactVersion]:
    principals = sorted({body["principal"] for _, body in OLD["records"]})
    return {
        v.id: v
        for who in principals
        for f in memory.facts(who, include_retired=True)
        for v in memory.fact_history(f.fact_id, principal=who)
    }


def test_a_store_of_old_fact_records_opens_verifies_and_reads_as_it_did(tmp_path, capsys):
    path = _store(tmp_path / "m.sqlite", OLD["records"])
    assert main(["verify", str(path)]) == 0, capsys.readouterr()
    with EpisodicMemory(path) as memory:
        read = _read(memory)
    assert set(read) == set(OLD["read"])
    for version_id, then in OLD["read"].items():
        fact = read[version_id]
        words, cut = tuple(then["wording"]), len(fact.condition)
        assert fact.status == then["status"] and type(fact.status) is FactStatus, version_id
        assert fact.kind == then["kind"] and type(fact.kind) is FactKind, version_id
        assert fact.text == then["text"] and fact.unless == tuple(then["unless"]), version_id
        assert fact.rejected == rejected_choices(fact) == tuple(then["rejected"]), version_id
        assert fact.condition_words == tuple(then["condition_words"]), version_id
        assert fact.wording == (Wording(words[:cut], words[cut:]) if words else Wording()), version_id
    layouts = {(bool(f.wording.condition), bool(f.unless), bool(f.wording.unless)) for f in read.values()}
    assert layouts == {(False, False, False), (True, False, False), (True, True, True), (True, True, False)}
    assert {f.status for f in read.values()} == {ACTIVE, RETIRED} and {f.kind for f in read.values()} == {RULE, LESSON}


def test_old_records_stored_again_take_the_new_layout_and_read_the_same():
    for old, version in zip((body for _, body in OLD["records"]), resolve_records(b for _, b in OLD["records"])):
        body = version.to_record()
        assert problem("fact_version", body) == ""
        assert FactVersion.from_record(body) == version
        if version.kind == LESSON:
            assert body["rejected"] == list(version.rejected) and "rejected" not in old
        else:
            assert "rejected" not in body and "kind" not in body
        if version.wording:
            assert isinstance(old["wording"], list) and body["wording"] == {
                "condition": list(version.wording.condition),
                **({"unless": list(version.wording.unless)} if version.wording.unless else {}),
            }
        assert body["status"] in ("active", "retired") and type(body["status"]) is str


def test_a_lesson_keeps_its_rejected_choices_as_a_field_not_in_its_text():
    lesson = next(v for v in resolve_records(b for _, b in OLD["records"]) if v.kind == LESSON)
    odd = replace(lesson, rejected=("drain, not flush", "retry or wait"))  # words the text's layout cannot carry
    assert rejected_choices(odd) == ("drain, not flush", "retry or wait")
    assert FactVersion.from_record(odd.to_record()).rejected == odd.rejected
    assert rejected_choices(replace(lesson, text="anything at all")) == lesson.rejected


def test_status_and_kind_are_enums_that_read_as_their_strings():
    assert ACTIVE == "active" and f"{RETIRED}" == "retired" and json.dumps([LESSON, RULE]) == '["lesson", "rule"]'
    rule = next(v for v in resolve_records(b for _, b in OLD["records"]) if v.kind == RULE)
    plain = replace(rule, status="retired", kind="lesson")  # the strings are taken as the members
    assert plain.status is RETIRED and plain.kind is LESSON


@pytest.mark.parametrize(
    "change, message",
    [
        ({"status": "dormant"}, "'dormant' is not a valid FactStatus"),
        ({"kind": "hunch"}, "'hunch' is not a valid FactKind"),
        ({"wording": {"condition": ["only-one"]}}, "wording holds 1 words for 4 terms"),
        ({"wording": {"unless": []}, "unless": []}, ""),  # an empty part is no part: not damage
    ],
)
def test_a_fact_record_holding_a_value_its_types_refuse_is_named_on_open(tmp_path, change, message):
    records = [[i, {**body, **change} if n == 0 else body] for n, (i, body) in enumerate(OLD["records"])]
    path = _store(tmp_path / "m.sqlite", records)
    if not message:
        EpisodicMemory(path).close()
        return
    with pytest.raises(DamagedStore, match=f"{records[0][0]}.*{message}"):
        EpisodicMemory(path).close()


def test_exceptions_words_without_the_condition_s_are_refused():
    body = {**OLD["records"][0][1], "unless": ["drill"], "wording": {"unless": ["Drill"]}}
    with pytest.raises(ValueError, match="without the condition's"):
        FactVersion.from_record(body)


def test_a_wording_of_another_json_type_is_a_finding():
    body = {**OLD["records"][0][1], "wording": "jobs queue"}
    assert problem("fact_version", body) == "field 'wording' holds a string, expected a list or an object"
    assert (
        problem("fact_version", {**OLD["records"][0][1], "rejected": "driver"})
        == "field 'rejected' holds a string, expected a list"
    )
