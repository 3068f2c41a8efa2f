"""Segmenter: golden fixtures per boundary signal and outcome path, batch == incremental."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory.episodes import Episode, Outcome, Segmenter, SegmenterConfig, classify_text, detect_outcome, segment
from memory.episodes.segmenter import DEFAULT_CONFIG
from tests.builders import entries_from

GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "segmenter"


def load_case(path: Path) -> tuple[dict, list]:
    case = json.loads(path.read_text(encoding="utf-8"))
    assert set(case) >= {"description", "entries", "expected"}, path.name
    return case, entries_from(case["entries"])


@pytest.mark.parametrize("path", sorted(GOLDEN.glob("*.json")), ids=lambda p: p.stem)
def test_golden(path: Path) -> None:
    case, entries = load_case(path)
    expected = case["expected"]
    episodes = segment(entries)
    position = {e.id: i for i, e in enumerate(entries)}
    assert [[position[i] for i in ep.entry_ids] for ep in episodes] == expected["episodes"]
    if "outcomes" in expected:
        assert [ep.outcome.value for ep in episodes] == expected["outcomes"]
    for ep, fragment in zip(episodes, expected.get("evidence", [])):
        assert fragment in ep.outcome_evidence
    for ep, fields in zip(episodes, expected.get("fields", [])):
        for name, value in fields.items():
            got = getattr(ep, name)
            assert (list(got) if isinstance(got, tuple) else got) == value, name


def test_golden_covers_every_signal_and_outcome_path() -> None:
    names = {p.stem for p in GOLDEN.glob("*.json")}
    assert {
        "boundary_situation_change",
        "boundary_semantic_shift",
        "boundary_temporal_gap",
        "boundary_explicit_signal",
        "outcome_structured",
        "outcome_text",
        "outcome_correction",
        "outcome_none",
    } <= names


@pytest.mark.parametrize(
    "signal, case",
    [
        ("situation_weight", "boundary_situation_change"),
        ("semantic_weight", "boundary_semantic_shift"),
        ("temporal_weight", "boundary_temporal_gap"),
        ("explicit_weight", "boundary_explicit_signal"),
    ],
)
def test_each_signal_is_what_splits(signal: str, case: str) -> None:
    _, entries = load_case(GOLDEN / f"{case}.json")
    assert len(segment(entries)) > 1
    assert len(segment(entries, replace(DEFAULT_CONFIG, **{signal: 0.0}))) == 1


def test_feed_returns_the_closed_episode_and_flush_the_rest() -> None:
    _, entries = load_case(GOLDEN / "boundary_explicit_signal.json")
    seg = Segmenter()
    closed = [[ep.first_seq for ep in seg.feed(e)] for e in entries]
    assert closed == [[], [], [], [0], [], [], [3]]
    assert seg.open_entries("default") == (entries[6],)
    assert [ep.first_seq for ep in seg.peek()] == [6]
    assert [ep.first_seq for ep in seg.flush()] == [6]
    assert seg.flush() == []


def test_feed_rejects_entries_out_of_order() -> None:
    entries = entries_from([{"at": 0, "kind": "note", "text": "a"}, {"at": 1, "kind": "note", "text": "b"}])
    seg = Segmenter()
    seg.feed(entries[1])
    with pytest.raises(ValueError, match="seq 0 fed after seq 1 of principal 'default'"):
        seg.feed(entries[0])


def test_episode_round_trips_through_its_record() -> None:
    _, entries = load_case(GOLDEN / "episode_fields.json")
    (ep,) = segment(entries)
    assert Episode.from_record(json.loads(json.dumps(ep.to_record()))) == ep
    assert ep.observations == (entries[0].text, entries[1].text)


@pytest.mark.parametrize(
    "text, outcome",
    [
        ("Metrics back to baseline; incident resolved", Outcome.SUCCESS),
        ("Errors persist after the change", Outcome.FAILURE),
        ("Alert still firing 15 minutes after the change", Outcome.FAILURE),
        ("No improvement after applying the fix", Outcome.FAILURE),
        ("The checkout flow is no longer failing", Outcome.SUCCESS),
        ("Froze the clock in the test; no more midnight failures", Outcome.SUCCESS),
        ("Shrinking the heap did not stop the kills", Outcome.FAILURE),
        ("Raising the heap only delayed the crash by a day", Outcome.FAILURE),
        ("Partially recovered: 2% of requests still fail", Outcome.FAILURE),
        ("Errors gone, but latency slightly higher", Outcome.PARTIAL),
        ("Degraded but serving", Outcome.PARTIAL),
        ("Rolled back; errors stopped within a minute. 3.8.0 had the same key mismatch.", Outcome.SUCCESS),
        ("We looked at the dashboards", Outcome.UNKNOWN),
        # a relative clause in the past perfect tells the state before the fix, not how it ended
        ("Replaced the pump that had been failing and the flow is back to normal", Outcome.SUCCESS),
        ("Replaced the alternator, whose regulator had failed; charging at 28.2 V since", Outcome.UNKNOWN),
        ("The rollback, which had no effect, was undone", Outcome.FAILURE),
        # a hyphen makes "no-reads" a noun (failed reads), not a negation of what follows
        ("Re-tensioned the encoder arm; no-reads back to 2%", Outcome.SUCCESS),
        ("No further false jams through the morning peak", Outcome.SUCCESS),
        # the fault found before the fix, then the fix: the fault is not how the attempt ended
        (
            "The return spring was broken, so the arm hung open. Replaced the spring; drops on target again",
            Outcome.UNKNOWN,
        ),
        ("Found the tracking still using the old constant. Updated the constant; misses under 1%", Outcome.UNKNOWN),
        ("Replaced the dryer's failed thermostat; towels came out soft", Outcome.UNKNOWN),
        ("Re-timed the offset; the arm still hung half out", Outcome.FAILURE),
        ("Still failing after the restart. Escalated to the vendor", Outcome.FAILURE),
        # a stop is a symptom noun ("without a stop"), and what was not needed says nothing of how it ended
        ("Fitted a card from stores; WTG-21 ran the rest of the week without a stop", Outcome.SUCCESS),
        ("Moved the amplifier to the UPS rail. No imbalance stops over the next three evenings", Outcome.SUCCESS),
        ("WTG-18 reset and ran; no converter work needed", Outcome.UNKNOWN),
        ("The fan did not work", Outcome.FAILURE),
        # what a new safeguard does, and a fault found before an action whose result is reported after it
        ("Added a schema check that fails loudly on unknown fields. The rerun went through at 11:02", Outcome.UNKNOWN),
        ("Added a guard that blocks the load when fewer than 95% of files are present", Outcome.UNKNOWN),
        (
            "The solver still said nginx. Pointed the solver at nginx-public, new cert in 90s. Added an alert",
            Outcome.UNKNOWN,
        ),
        ("Restarted the job; it still failed. Escalated to the vendor", Outcome.FAILURE),
        # what came before the fix: a past-perfect verb, a state found before the action, a cue word as a noun
        ("The second circuit had gone live on the 14th but nobody moved the PSUs. Moved them", Outcome.UNKNOWN),
        ("The rollback, which had no effect, was undone", Outcome.FAILURE),
        ("The broker's volume was degraded. Moved leadership off it and replaced the broker", Outcome.UNKNOWN),
        ("Pressure back to 1.9 and the rattle stopped. No work on the pump", Outcome.SUCCESS),
        ("Pinned the driver; the regression came back on Monday", Outcome.FAILURE),
        ("Re-sent the batch that failed at 8k/s; done by 13:10", Outcome.SUCCESS),
        ("Two pods still held the old key that was rotated. `creds reload --all` brought errors down", Outcome.UNKNOWN),
        ("`systemctl restart api` changed nothing; errors persist", Outcome.FAILURE),
        ("The patch did not work on the second server", Outcome.FAILURE),
        ("Pool raised to 25 (still under the server limit); acquisition waits disappeared by 11:40", Outcome.SUCCESS),
        ("Errors have not disappeared", Outcome.FAILURE),
        ("Restarted the pods; a partial recovery only", Outcome.PARTIAL),
        ("The fix was partial.", Outcome.PARTIAL),
        # 'partial' as an adjective of a thing, and a safeguard described from now on
        ("Shipped a fix to resume partial downloads", Outcome.UNKNOWN),
        ("Re-ran the planner. It now fails loudly if input covers less than 95% of the fleet", Outcome.UNKNOWN),
        ("It still fails when the cache is cold", Outcome.FAILURE),
        ("Latency went back to normal", Outcome.SUCCESS),
    ],
)
def test_cue_lexicon(text: str, outcome: Outcome) -> None:
    assert classify_text(text).outcome == outcome


def test_cueless_outcome_after_a_change_is_success_but_not_without_one() -> None:
    with_change = entries_from(
        [
            {"at": 0, "kind": "decision", "text": "Decision: x", "metadata": {"choice": "x"}},
            {"at": 5, "kind": "outcome", "text": "Pinned the base image by digest"},
        ]
    )
    assert detect_outcome(with_change).outcome == Outcome.SUCCESS
    assert "no problem cue" in detect_outcome(with_change).evidence
    alone = entries_from([{"at": 0, "kind": "outcome", "text": "Pinned the base image by digest"}])
    assert detect_outcome(alone).outcome == Outcome.UNKNOWN


def test_an_outcome_the_summary_trims_is_kept_whole_and_a_short_one_is_not_stored_twice() -> None:
    report = "Swapped the seal. " + "The right size is on order, so a close match went in for now. " * 3
    long, short = (
        entries_from(
            [
                {"at": 0, "kind": "observation", "text": "Leak test failed"},
                {"at": 2, "kind": "decision", "text": "Decision: seal", "metadata": {"choice": "seal"}},
                {"at": 9, "kind": "outcome", "text": text},
            ]
        )
        for text in (report, "Swapped the seal.")
    )
    (kept,), (plain,) = segment(long), segment(short)
    assert kept.outcome_text == report and report not in kept.summary  # the summary keeps a trimmed part
    assert plain.outcome_text == "" and "outcome_text" not in plain.to_record()  # the summary holds it whole
    assert Episode.from_record(kept.to_record()) == kept
    assert Episode.from_record(plain.to_record()) == plain  # a record written before the field reads as ""


# -- property: batch == incremental ---------------------------------------------------------

_KINDS = ["observation", "decision", "action", "outcome", "correction", "note"]
_item = st.fixed_dictionaries(
    {
        "gap": st.sampled_from([0.5, 3, 20, 90, 150, 400, 3000]),
        "kind": st.sampled_from(_KINDS),
        "situation": st.sampled_from(["incident_response", "planning"]),
        "principal": st.sampled_from(["default", "beta", "gamma"]),
        "service": st.sampled_from([None, "checkout-api", "search"]),
        "vector": st.lists(st.sampled_from([0.0, 0.2, 1.0]), min_size=3, max_size=3).filter(any),
        "status": st.sampled_from([None, None, "success", "failure"]),
        "text": st.sampled_from(
            ["Errors persist", "incident resolved", "Decision: a", "looked around", "partially ok"]
        ),
    }
)


def _stream(items: list[dict]) -> list:
    at, out = 0.0, []
    for item in items:
        at += item["gap"]
        metadata: dict = {}
        if item["service"]:
            metadata["service"] = item["service"]
        if item["kind"] == "decision":
            metadata["choice"] = item["text"][-1]
        if item["status"] and item["kind"] == "outcome":
            metadata["check"] = {"status": item["status"]}
        out.append(
            {
                "at": at,
                "kind": item["kind"],
                "text": item["text"],
                "situation": item["situation"],
                "principal": item["principal"],
                "metadata": metadata,
                "vector": item["vector"],
            }
        )
    return entries_from(out)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(_item, max_size=40),
    st.sampled_from([DEFAULT_CONFIG, SegmenterConfig(shift_onset=0.2, shift_threshold=0.6)]),
)
def test_batch_equals_incremental(items: list[dict], config: SegmenterConfig) -> None:
    entries = _stream(items)
    seg = Segmenter(config)
    live: list[Episode] = []
    for entry in entries:
        live.extend(seg.feed(entry))
    live.extend(seg.flush())
    batch = segment(reversed(entries), config)  # batch sorts by seq itself
    assert sorted(live, key=lambda ep: ep.first_seq) == batch
    covered = sorted(i for ep in batch for i in ep.entry_ids)
    assert covered == sorted(e.id for e in entries)  # a partition of the stream
    for ep in batch:
        assert len({e.principal for e in entries if e.id in set(ep.entry_ids)}) == 1


def test_the_segmenter_reads_outcomes_with_the_lexicon_it_is_given() -> None:
    from memory.lexicon import DEFAULT_LEXICON

    entries = entries_from(
        [
            {"at": 0, "kind": "observation", "text": "Dryer 3 stops mid-cycle"},
            {"at": 1, "kind": "outcome", "text": "Dryer 3 is kaput"},
        ]
    )
    assert [ep.outcome for ep in segment(entries)] == [Outcome.UNKNOWN]
    site = DEFAULT_LEXICON.with_words("failure_cues", ["kaput"], "a site's own word for broken (test)")
    assert [ep.outcome for ep in segment(entries, lexicon=site)] == [Outcome.FAILURE]
    seg = Segmenter(lexicon=site)
    for entry in entries:
        seg.feed(entry)
    assert [ep.outcome for ep in seg.flush()] == [Outcome.FAILURE]
