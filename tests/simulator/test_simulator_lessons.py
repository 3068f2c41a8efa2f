"""Lesson scenarios: valid, deterministic, split by family, worded without markers, not solved by the runbook."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import scenarios
from agent.agents import NoMemoryAgent
from agent.heuristic import HeuristicReasoner
from eval.runner import play
from memory.text import stems
from simulator import families as fam
from simulator import lesson_pools as pools
from simulator.generate import generate, main, to_yaml
from simulator.lessons import BLOCK, LESSONS, MAX_SHARED, generate_lessons, lesson_overlap, longest_shared_phrase


def test_lesson_scenario_is_valid_deterministic_and_uses_only_its_split():
    doc = generate_lessons(100, seed=3, families="test")
    assert to_yaml(doc) == to_yaml(generate_lessons(100, seed=3, families="test"))
    assert to_yaml(doc) != to_yaml(generate_lessons(100, seed=4, families="test"))
    scenario = scenarios.loads(to_yaml(doc))
    assert set(scenario.root_causes) == set(fam.TEST_FAMILIES)
    assert set(generate_lessons(20, seed=3, families="train")["root_causes"]) == set(fam.TRAIN_FAMILIES)
    kinds = {r.kind for r in scenario.rounds}
    assert {"lesson", "lesson_recur", "red_herring", "caused", "plain", "drift"} <= kinds
    assert all(r.caused_by for r in scenario.rounds if r.kind == "caused")
    with pytest.raises(ValueError):
        generate_lessons(10, seed=0, families="holdout")


def test_recurrences_are_paraphrased_and_the_runbook_does_not_solve_them():
    doc = generate_lessons(60, seed=5, families="test")
    overlap = float(doc["description"].rsplit(": ", 1)[1].rstrip("."))
    assert 0.0 < overlap <= 0.3
    assert lesson_overlap(
        [
            {"id": "a", "kind": "lesson", "observations": ["extra disk full"]},
            {"id": "b", "kind": "lesson_recur", "observations": ["disk full"]},
        ],
        {"a": 0, "b": 0},
    ) == pytest.approx(2 / 3)
    rounds = play(scenarios.loads(to_yaml(doc)), 0, NoMemoryAgent(HeuristicReasoner())).rounds
    assert sum(r.first_correct for r in rounds) / len(rounds) <= 0.6
    assert not any(r.first_correct for r in rounds if r.kind in ("lesson", "lesson_recur"))


def test_cli_lessons_and_families_flags(tmp_path, capsys):
    out = tmp_path / "l.yaml"
    assert main(["--lessons", "--families", "train", "--rounds", "20", "--seed", "1", "--out", str(out)]) == 0
    assert scenarios.load(out).name == "lessons-train-20-s1"
    assert "stem-Jaccard" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        main(["--families", "test", "--rounds", "5"])
    assert exit_.value.code == 2


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), rounds=st.integers(7, 90), families=st.sampled_from(["train", "test"]))
def test_a_causal_hint_names_a_service_whose_only_change_since_is_the_cause(seed, rounds, families):
    # The hint names the cause's service ("yesterday's fix to X", "the only recent change was the
    # remediation applied to X"): no round on that service may come between the cause and its incident.
    check_caused_referents(generate_lessons(rounds, seed=seed, families=families)["rounds"])


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), rounds=st.integers(8, 90))
def test_a_plain_scenario_s_causal_hint_names_one_change(seed, rounds):
    check_caused_referents(generate(rounds, seed)["rounds"])


def check_caused_referents(rounds):
    at = {r["id"]: n for n, r in enumerate(rounds)}
    caused = [(n, at[r["caused_by"]]) for n, r in enumerate(rounds) if r.get("caused_by")]
    assert caused
    for n, cause in caused:
        service = rounds[cause]["service"]
        between = [r["id"] for r in rounds[cause + 1 : n] if r["service"] == service]
        assert not between, (
            f"{rounds[n]['id']} is caused by {rounds[cause]['id']} on {service}, changed again in {between}"
        )


# -- the lesson families carry no marker: a recurrence tells its lesson's incident in other words --

SEEDS = (0, 3, 11, 29)


def lesson_rounds(doc):
    """(lesson round, its component, [its recurrence and drift rounds]) per lesson of `doc`, found
    from the block layout and the component's system name in the lesson's observations."""
    taught, later = {}, {}
    for n, r in enumerate(doc["rounds"]):
        if BLOCK[n % len(BLOCK)] not in ("lesson", "lesson_recur"):
            continue
        k = (n // len(BLOCK)) % LESSONS
        if k in taught:
            later[k].append(r)
        else:
            taught[k], later[k] = r, []
    out = []
    for k, lesson in taught.items():
        assert lesson["kind"] in ("lesson", "drift")
        text = " ".join(lesson["observations"])
        (comp,) = [c for c in pools.COMPONENTS if f"({c['name']})" in text]
        out.append((lesson, comp, later[k]))
    return out


def mimic_of(doc, comp):
    """The cause the lesson on `comp` looks like, as the description says."""
    (mimic,) = re.findall(rf"looks like (\w+), told apart by activity of {re.escape(comp['name'])}", doc["description"])
    return mimic


def words(text):
    return " ".join(re.findall(r"\w+", text.lower()))


def mentions(text, comp):
    text = text.lower()
    return comp["name"] in text or any(d.lower() in text for d in comp["descriptions"])


def framed(line, frames):
    """Whether `line` is one of `frames` filled in (any field)."""
    for frame in frames:
        pattern = re.escape(frame[0].lower() + frame[1:])
        pattern = re.sub(r"\\\{\w+\\\}", ".+", pattern)
        if re.fullmatch(pattern, line[0].lower() + line[1:]):
            return True
    return False


def test_longest_shared_phrase_counts_words_runs_of_content_and_frees_the_system_name():
    assert longest_shared_phrase("the envoy sidecar was redeployed", "the envoy sidecar restarted") == 3
    assert longest_shared_phrase("It was in the morning", "it was in the evening") == 0  # stop words only
    assert longest_shared_phrase("Disk-full: on the host", "disk full on the host") == 5  # split on non-word
    allowed = ["cron-runner-2"]
    assert longest_shared_phrase("cron-runner-2 was redeployed", "then cron-runner-2 was redeployed", allowed) == 2
    assert longest_shared_phrase("cron-runner-2 restarted", "cron-runner-2 crashed", allowed) == 0
    assert longest_shared_phrase("runner 2 restarted", "runner 2 restarted", allowed) == 3  # free only as the name
    # observations are read line by line: no run crosses a line break
    assert longest_shared_phrase(["disk full", "now"], ["full now"]) == 1
    assert longest_shared_phrase([], ["anything"]) == 0


@pytest.mark.parametrize("families", ["train", "test"])
def test_recurrences_share_no_phrase_beyond_two_words_with_their_lesson(families):
    worst, where = 0, None
    for seed in SEEDS:
        doc = generate_lessons(100, seed=seed, families=families)
        doc_worst = 0
        for lesson, comp, later in lesson_rounds(doc):
            assert later and {r["kind"] for r in later} <= {"lesson_recur", "drift"}
            for r in later:
                shared = longest_shared_phrase(lesson["observations"], r["observations"], allowed=[comp["name"]])
                doc_worst = max(doc_worst, shared)
                if shared > worst:
                    worst, where = shared, (seed, lesson["id"], r["id"], lesson["observations"], r["observations"])
        reported = re.search(r"shares with its lesson: (\d+) words?;", doc["description"])
        assert reported and int(reported.group(1)) == doc_worst, doc["description"]
    assert worst <= MAX_SHARED == 2, f"longest phrase a recurrence shares with its lesson: {worst} words in {where}"


@pytest.mark.parametrize("families", ["train", "test"])
def test_a_recurrence_names_the_component_otherwise_and_tells_other_symptoms(families):
    for seed in SEEDS:
        doc = generate_lessons(100, seed=seed, families=families)
        for lesson, comp, later in lesson_rounds(doc):
            text = " ".join(lesson["observations"]).lower()
            (told,) = [d for d in comp["descriptions"] if d.lower() in text]  # one description, with the name
            mimic = mimic_of(doc, comp)
            signals = [s for s in fam.FAMILIES[mimic]["signals"] if s.lower() in text]
            assert signals, lesson["observations"]  # the lesson shows its mimic's runbook signals
            for r in later:
                other = " ".join(r["observations"]).lower()
                assert mentions(other, comp) and told.lower() not in other, (told, r["observations"])
                assert not [s for s in signals if s.lower() in other], (signals, r["observations"])
                assert [s for s in fam.FAMILIES[mimic]["signals"] if s.lower() in other]  # in runbook terms still
                change = [o for o in r["observations"] if mentions(o, comp)]
                assert len(change) == 1 and framed(change[0], pools.CHANGE_FRAMES + comp["changes"]), change


def test_red_herrings_and_plain_rounds_name_lesson_components_only_as_normal():
    red_lines, plain, plain_mentions = set(), 0, 0
    for families in ("train", "test"):
        for seed in SEEDS:
            doc = generate_lessons(100, seed=seed, families=families)
            comps = [comp for _, comp, _ in lesson_rounds(doc)]
            normal = pools.NORMAL_FRAMES + [f for c in comps for f in c["normal"]]
            for n, r in enumerate(doc["rounds"]):
                named = [(o, c) for o in r["observations"] for c in comps if mentions(o, c)]
                if r["kind"] == "red_herring":
                    lesson_comp = comps[(n // len(BLOCK)) % LESSONS]
                    assert [o for o, c in named if c is lesson_comp], r["observations"]
                    assert r["truth"] == mimic_of(doc, lesson_comp)
                if r["kind"] in ("red_herring", "plain"):
                    assert all(framed(o, normal) for o, _ in named), named
                    assert len(named) <= 1
                if r["kind"] == "red_herring":
                    red_lines.add(next(f for f in normal if framed(named[0][0], [f])))
                if r["kind"] == "plain":
                    plain += 1
                    plain_mentions += bool(named)
    assert len(red_lines) >= 5  # ruled out in many wordings, not one fixed frame
    assert 0.2 <= plain_mentions / plain <= 0.45, plain_mentions / plain


def test_corrections_describe_the_component_in_varied_words():
    for families in ("train", "test"):
        doc = generate_lessons(100, seed=7, families=families)
        for lesson, comp, later in lesson_rounds(doc):
            rounds = [lesson, *later]
            corrections = [r["correction"] for r in rounds]
            assert all(mentions(c, comp) for c in corrections), corrections
            kinds = {r["kind"] for r in rounds}
            frames = pools.LESSON_CORRECTIONS + pools.DRIFT_CORRECTIONS
            used = {f for c in corrections for f in frames if framed(c, [f])}
            assert len(used) >= 3, corrections
            refs = {d for c in corrections for d in [comp["name"], *comp["descriptions"]] if d.lower() in c.lower()}
            assert len(refs) >= 3, corrections
            if "drift" in kinds:
                drifts = [r["correction"] for r in rounds if r["kind"] == "drift"]
                assert all(framed(c, pools.DRIFT_CORRECTIONS) for c in drifts), drifts


def test_pools_name_each_component_in_many_ways_and_keep_the_runbook_words_to_the_symptoms():
    names = [c["name"] for c in pools.COMPONENTS]
    assert len(set(names)) == len(names) and all(re.fullmatch(r"[a-z0-9-]+", n) for n in names)
    runbook = {k: stems(" ".join([f["description"], *f["signals"]])) for k, f in fam.FAMILIES.items()}
    everyone = frozenset().union(*runbook.values())
    for comp in pools.COMPONENTS:
        assert len(comp["descriptions"]) >= 4 and len(set(comp["descriptions"])) == len(comp["descriptions"])
        for a in comp["descriptions"]:
            assert len(re.findall(r"\w+", a)) >= 3
            for b in comp["descriptions"]:
                assert a == b or longest_shared_phrase(a, b) <= MAX_SHARED, (a, b)
        wording = [*comp["descriptions"], *comp["changes"], *comp["normal"], comp["name"]]
        assert not stems(" ".join(wording)) & everyone, stems(" ".join(wording)) & everyone
    frames = pools.CHANGE_FRAMES + pools.NORMAL_FRAMES
    assert not stems(" ".join(frames)) & everyone
    for family, paraphrases in pools.SIGNAL_PARAPHRASES.items():
        assert list(paraphrases) == list(fam.FAMILIES[family]["signals"])
        for text in (p for ps in paraphrases.values() for p in ps):
            bare = re.sub(r"\{\w+\}", " ", text)
            assert stems(bare) & runbook[family], text  # the family's words...
            for signal in fam.FAMILIES[family]["signals"]:  # ...but none of its signal phrases
                assert longest_shared_phrase(signal, bare) <= MAX_SHARED, (signal, text)
                assert f" {words(signal)} " not in f" {words(bare)} ", (signal, text)
