"""Change records, CAUSED_BY hypotheses, edge versions, credit and graph evidence for decisions."""

from __future__ import annotations

import warnings
from datetime import timedelta

import networkx as nx
import pytest

from agent.graph_evidence import change_votes, is_change_cause
from agent.reasoner import CauseInfo
from memory.episodes import Outcome
from memory.graph import (
    ChangeLink,
    Edge,
    EdgeType,
    build_graph,
    cause_links,
    change_record,
    edge_history,
    infer_edges,
    recent_changes,
    render,
    render_graph,
    standing_edges,
)
from memory.graph.causes import rank_causes
from memory.graph.changes import change_kind, entity_terms, specific_words
from memory.graph.implicated import change_basis, implicated_changes
from memory.reinforcer import RECALLED, episode_credit
from tests.builders import T0, episode

OK = Outcome.SUCCESS


def fixed(eid: str, hours: int, subject: str, fix: str, *, choice: str = "c", **fields):
    """A successful episode on `subject` whose outcome sentence (what the fix did) is `fix`."""
    return episode(
        eid, OK, choice, hours=hours, subject=subject, summary=f"seen → Decision: {choice} → {fix}", **fields
    )


def incident(eid: str, hours: int, subject: str, *observations: str, **fields):
    return episode(
        eid,
        Outcome.UNKNOWN,
        None,
        hours=hours,
        subject=subject,
        observations=observations,
        summary=observations[0],
        **fields,
    )


def caused(edges):
    return [(e.source, e.target) for e in edges if e.type == EdgeType.CAUSED_BY]


def linked(new, history):
    """The CAUSED_BY pairs the rules make for `new`, and the first such edge (None when none)."""
    edges = infer_edges(new, history)
    return caused(edges), next((e for e in edges if e.type == EdgeType.CAUSED_BY), None)


def test_change_record_names_kind_and_specific_words() -> None:
    ep = fixed("a", 0, "checkout", "Raised maximumPoolSize on checkout from 20 to 60; errors gone")
    record = change_record(ep)
    assert record is not None and record.kind == "capacity" and record.where == "checkout"
    assert record.what.split()[:3] == ["maximumPoolSize", "20", "60"] and record.at == ep.end
    assert change_record(fixed("b", 0, "api", "Rolled api back to v2.13.2")).kind == "version"
    assert change_record(episode("c", Outcome.FAILURE, "x", hours=1)) is None  # a failed attempt left no change


@pytest.mark.parametrize(
    "report",
    [
        "Metrics back to baseline; incident resolved",
        "Alert cleared and stayed clear through the next hour; fix confirmed",
        "Verification passed: symptoms gone after the fix was applied",
        "Healthy again, dashboards green, recovered within minutes",
    ],
)
def test_a_report_that_the_fix_worked_names_nothing_that_changed(report) -> None:
    """A decision that worked made a change, but a report of its result only names no thing it changed: the
    record has no words for a picture to show, and a later incident shares no term with it."""
    record = change_record(fixed("a", 0, "search", report))
    assert record is not None and record.what == ""
    assert entity_terms(report) <= {"back", "hour", "next"}
    named = change_record(
        fixed("b", 0, "search", "Raised the thread pool from 30 to 120; alert cleared, dashboards green")
    )
    assert named.what.split() == ["30", "120", "Raised", "thread"]


def test_the_change_itself_is_no_word_of_what_changed() -> None:
    assert (
        change_record(fixed("a", 0, "search", "Dashboards green again after the change; closing the incident")).what
        == ""
    )
    assert change_record(fixed("b", 0, "search", "Changed the shard allocation; dashboards green")).what == "allocation"


@pytest.mark.parametrize(
    "text, kind",
    [
        ("Restarted the indexer; healthy within minutes", "component"),
        ("A minor tweak to the dashboard layout", "component"),
        ("Set minReplicas to 3", "capacity"),
        ("Raised min_pool to 10", "capacity"),
        ("Minimum heap now 2g", "capacity"),
        ("Raised maxConnPerRoute to 120", "capacity"),
    ],
)
def test_a_change_is_of_capacity_when_it_sizes_something_not_when_it_says_minutes(text, kind) -> None:
    assert change_kind(text) == kind


def test_entity_terms_split_compound_names_and_keep_versions() -> None:
    assert {"lru", "cache", "restri", "egress", "v2.14.0", "60%"} <= entity_terms(
        "lru_cache restrict-egress v2.14.0 at 60%"
    )
    assert "since" not in entity_terms("since yesterday")  # time words date a thing, never name it
    assert specific_words("Set MALLOC_ARENA_MAX=2 in the deployment", "ledger")[0] == "MALLOC_ARENA_MAX"


def test_an_incident_naming_another_service_s_change_is_caused_by_that_change_not_its_own_history() -> None:
    own = fixed("own", 0, "orders", "Restarted the orders workers; backlog drained")
    other = fixed("pay", 20, "payments", "Enabled aggressive retries in the payments client")
    new = incident(
        "new",
        30,
        "orders",
        "orders 5xx at 9% since the payments retry change",
        "orders logs show bursts of retried calls",
    )
    pairs, link = linked(new, [own, other])
    assert pairs == [("new", "pay")]
    assert 0.5 <= link.weight <= 1.0 and "named" in link.evidence


def test_the_failing_service_s_own_name_is_no_evidence() -> None:
    own = fixed("own", 0, "orders", "Raised the orders pool size")
    new = incident("new", 10, "orders", "orders errors because of config change", "orders p99 at 3 s")
    assert caused(infer_edges(new, [own])) == []


def test_terms_shared_with_an_unnamed_change_link_it() -> None:
    other = fixed("dns", 0, "orders", "Raised CoreDNS memory and added NodeLocal DNSCache with a 300 s cache")
    unrelated = fixed("x", 2, "orders", "Rotated the log files on the reporting hosts")
    new = incident(
        "new",
        30,
        "orders",
        "NodeLocal DNSCache, added in the last DNS fix, caches answers for 300 s",
        "failover writes went to the old primary for 5 minutes",
    )
    assert caused(infer_edges(new, [other, unrelated])) == [("new", "dns")]


def test_no_reference_and_no_shared_terms_links_nothing() -> None:
    earlier = fixed("a", 0, "search", "Raised the search thread pool")
    new = incident("new", 5, "billing", "billing invoices fail with a null pointer", "traffic flat")
    assert caused(infer_edges(new, [earlier])) == []


def corrected_incident(correction: str) -> tuple[list[Edge], list[Edge]]:
    """An orders incident linked to the payments retry change, then retried after `correction`:
    the edges its first attempt made, and those of the retry."""
    change = fixed("pay", 0, "payments", "Enabled aggressive retries in the payments client")
    first = episode(
        "new",
        Outcome.FAILURE,
        "retries",
        hours=10,
        subject="orders",
        observations=("orders errors since the payments retry change",),
        summary="orders errors",
    )
    retry = episode(
        "retry",
        OK,
        "other",
        hours=11,
        subject="orders",
        corrections=(correction,),
        summary="Decision: other → Rolled back the orders schema migration",
    )
    return infer_edges(first, [change]), infer_edges(retry, [change, first])


def test_later_evidence_gives_the_edge_a_new_version_and_standing_drops_a_withdrawn_one() -> None:
    linked, later = corrected_incident("The payments retry change was not involved; the payments client was idle")
    history = edge_history([*linked, *later], "new", "pay", EdgeType.CAUSED_BY)
    assert len(history) == 2 and history[1].weight < history[0].weight
    assert history[1].evidence.startswith("weakened by later evidence")
    standing = standing_edges([*linked, *later], min_weight={EdgeType.CAUSED_BY: history[0].weight})
    assert caused(standing) == []


def test_episode_credit_falls_for_a_precedent_that_misled_twice() -> None:
    eps = [episode(f"e{i}", OK, "c", hours=i) for i in range(4)]
    G = build_graph(
        eps,
        [
            Edge("e1", "e0", EdgeType.CONTRADICTED, 1.0, f"{RECALLED} had confirmed c; here it failed"),
            Edge("e2", "e0", EdgeType.CONTRADICTED, 1.0, f"{RECALLED} had confirmed c; here it failed"),
            Edge("e3", "e2", EdgeType.CONTRADICTED, 0.4, "same choice, observation similarity"),
        ],
    )
    assert episode_credit(G, "e0") == 1 / 3
    assert episode_credit(G, "e2") == 1.0  # a contradiction by similarity is no use as a precedent
    assert episode_credit(G, "unknown") == 1.0


def test_recent_changes_and_votes_for_change_type_and_learned_candidates() -> None:
    change = fixed("pay", 0, "payments", "Enabled aggressive retries in the payments client", choice="pool")
    changes = recent_changes(["orders errors since the payments retry change"], "orders", T0.replace(hour=10), [change])
    assert [c.episode_id for c in changes] == ["pay"] and changes[0].probability > 0.5
    assert "after the" in changes[0].chain and "payments" in changes[0].chain and changes[0].resolved == "pool"
    release = CauseInfo("bad_release", "A release shipped a wrong configuration value", ("new version",))
    leak = CauseInfo("leak", "Memory grows without bound", ("heap grows",))
    assert is_change_cause(release) and not is_change_cause(leak)
    assert change_votes(changes, [release, leak]).votes == {}  # nothing learned, change-type votes off
    votes = change_votes(changes, [release, leak], change_type=True)
    assert set(votes.votes) == {"bad_release"} and "payments" in votes.reasons["bad_release"]
    learned = changes[0]._replace(led_to=("leak",))
    assert set(change_votes([learned], [release, leak]).votes) == {"leak"}
    assert set(change_votes([learned], [release, leak], change_type=True).votes) == {"bad_release", "leak"}
    assert change_votes([], [release]).votes == {}
    assert isinstance(changes[0], ChangeLink)


@pytest.mark.extra("plots")
def test_render_graph_draws_a_png_without_graphviz(tmp_path) -> None:
    change = fixed("pay", 0, "payments", "Enabled aggressive retries in the payments client")
    new = incident("new", 10, "orders", "orders errors since the payments retry change")
    G = build_graph([change, new], infer_edges(new, [change]))
    out = tmp_path / "graph.png"
    assert render_graph(G, out, episodes={"pay": change, "new": new}.get, engine="matplotlib") == "matplotlib"
    assert out.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.extra("plots")
def test_a_character_the_font_lacks_draws_without_a_warning(tmp_path) -> None:
    """Scenario text is any author's: an emoji the font has no glyph for is drawn as a box, not warned about
    on the command line."""
    change = fixed("pay", 0, "payments", "Reset the valve 🚰 controller")
    new = incident("new", 10, "orders", "orders errors since the payments valve change 🚰")
    G = build_graph([change, new], infer_edges(new, [change]))
    out = tmp_path / "graph.png"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        render_graph(G, out, episodes={"pay": change, "new": new}.get, engine="matplotlib")
    assert out.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.extra("plots")
@pytest.mark.parametrize("bend", [0.3, -0.3, 0.78, -1.29])
@pytest.mark.parametrize(
    "start, end", [((0.0, 0.0), (640.0, 0.0)), ((10.0, 300.0), (900.0, -40.0)), ((5.0, 5.0), (5.0, 90.0))]
)
def test_a_label_sits_at_the_middle_of_the_curve_matplotlib_draws(start, end, bend) -> None:
    from matplotlib.patches import ConnectionStyle

    path = ConnectionStyle.Arc3(rad=bend)(start, end, shrinkA=0, shrinkB=0)
    (a, control, b) = path.vertices  # a quadratic Bézier: its middle is (a + 2·control + b) / 4
    assert render.arc_middle(start, end, bend) == pytest.approx(tuple((a + 2 * control + b) / 4))


@pytest.mark.extra("plots")
def test_long_edges_between_close_lanes_stay_inside_the_picture() -> None:
    """An edge from the first to the last of twenty episodes on one lane bows far above it: the limits grow
    (and the figure with them) until every curve's middle is inside, well clear of the edge."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ends = [((0.0, 0.0), (3.4 * 19, 0.0)), ((3.4 * 2, -1.9), (3.4 * 15, 0.0)), ((0.0, -1.9), (3.4, -1.9))]
    bends = render.bends([("a", "t", "CAUSED_BY", 1.0), ("c", "s", "RETRY_OF", 0.9), ("u", "v", "RETRY_OF", 0.9)])
    fig, ax = plt.subplots()
    try:
        middles = render.fit_curves(fig, ax, ends, bends, rows=[-1.9, 0.0], width=34.0)
        low, high = ax.get_ylim()
        assert all(low + 0.5 < y < high - 0.5 for _, y in middles)
        assert max(y for _, y in middles) > 3.0  # the long CAUSED_BY edge rises well above its lane
        assert fig.get_size_inches()[1] > 4.0 + 0.66 * 3.0  # the figure grew with the limits
    finally:
        plt.close(fig)


def test_edges_between_the_same_nodes_bow_apart() -> None:
    assert render.bends(
        [
            ("a", "b", "RETRY_OF", 1.0),
            ("b", "a", "CONTRADICTED", 1.0),
            ("a", "b", "CAUSED_BY", 1.0),
            ("c", "d", "CAUSED_BY", 1.0),
        ]
    ) == pytest.approx([-0.3, 0.54, 0.78, 0.3])


def test_picture_commands_refuse_a_wrong_output_and_a_missing_store(tmp_path, capsys) -> None:
    from eval.graph import main as scenario_picture
    from memory.cli.graph import main as store_picture

    assert scenario_picture(["pool-vs-deploy", "--out", str(tmp_path / "graph.jpg")]) == 2
    assert "must end in .png or .svg" in capsys.readouterr().err
    assert store_picture([str(tmp_path / "none.sqlite"), "--out", str(tmp_path / "g.png")]) == 2
    assert "no store at" in capsys.readouterr().err


def test_a_reference_names_the_failing_service_before_or_after_its_noun() -> None:
    from memory.graph.references import PAST_REFERENCE, names_subject

    def names(sentence: str, subject: str) -> bool:
        return any(names_subject(sentence, m, subject) for m in PAST_REFERENCE.finditer(sentence))

    assert names("errors began after the billing-worker fix", "billing-worker")
    assert names("errors began after yesterday's fix to billing-worker", "billing-worker")
    assert names("this started with the workaround applied on the auth-service", "auth-service")
    assert not names("errors began after yesterday's fix to billing-worker", "billing")  # a whole name, not a prefix
    assert not names("after the fix, according to orders, things broke", "orders")  # not attached to the noun
    assert not names("errors began after the change on payments", "orders")


def test_the_failing_service_s_own_change_named_after_the_noun_is_linked() -> None:
    earlier = fixed("mine", 0, "billing-worker", "Raised the batch size from 50 to 500; queue drained")
    for wording in ("the billing-worker change", "yesterday's change to billing-worker"):
        new = incident("new", 30, "billing-worker", f"timeouts since {wording}")
        assert caused(infer_edges(new, [earlier])) == [("new", "mine")], wording


def test_what_changes_of_a_kind_led_to_tells_apart_two_fixes_the_text_names_alike() -> None:
    # Two fixes on billing, both named by "the fix to billing"; the earlier one resolved as "pool",
    # the later one as "cache". As many earlier changes of each kind were linked as causes, but those
    # resolving "pool" led to incidents resolved as "db_overload", those resolving "cache" to "disk_full".
    older = fixed("older", 0, "billing", "Restarted the billing workers", choice="pool")
    newer = fixed("newer", 20, "billing", "Restarted the billing workers", choice="cache")
    past = [
        fixed(f"{kind}{i}", -200 + 10 * i, "search", "Restarted the search workers", choice=kind)
        for i in range(3)
        for kind in ("pool", "cache")
    ]
    new = episode(
        "new",
        OK,
        "db_overload",
        hours=30,
        subject="orders",
        summary="orders slow",
        observations=("This began soon after yesterday's fix to billing went live",),
    )
    history = [*past, older, newer]
    resolved = {
        f"{kind}{i}": (answer,) for i in range(3) for kind, answer in (("pool", "db_overload"), ("cache", "disk_full"))
    }
    assert caused(infer_edges(new, history, caused=resolved)) == [("new", "older")]
    assert caused(infer_edges(new, history, caused=frozenset(resolved))) == [("new", "newer")]  # no resolutions
    unresolved = episode(
        "new", Outcome.UNKNOWN, None, hours=30, subject="orders", summary="orders slow", observations=new.observations
    )
    assert caused(infer_edges(unresolved, history, caused=resolved)) == [("new", "newer")]  # nothing known yet
    link = next(e for e in infer_edges(new, history, caused=resolved) if e.type == EdgeType.CAUSED_BY)
    assert "led to" in link.evidence


def test_cause_links_give_each_linked_change_what_its_incidents_were_resolved_as() -> None:
    change = fixed("chg", 0, "payments", "Enabled aggressive retries in the payments client", choice="retries")
    opener = episode(
        "inc",
        Outcome.FAILURE,
        "wrong",
        hours=5,
        subject="orders",
        summary="orders errors",
        observations=("orders errors since the payments retry change",),
    )
    fix = episode("fix", OK, "retry_storm", hours=6, subject="orders", summary="Decision: retry_storm → ok")
    G = build_graph(
        [change, opener, fix],
        [Edge("inc", "chg", EdgeType.CAUSED_BY, 0.9, "named"), Edge("fix", "inc", EdgeType.RETRY_OF, 1.0, "retry")],
    )
    lookup = {ep.id: ep for ep in (change, opener, fix)}.get
    assert cause_links(G, ["chg", "inc", "fix"], lookup) == {"chg": ("retry_storm",)}
    assert cause_links(G, ["chg"], lookup, min_weight=0.95) == {}


def test_a_dated_reference_to_what_a_fix_installed_links_that_fix() -> None:
    regulator = fixed("reg", 0, "parlour", "Replaced the sticking vacuum regulator and set the system to 44 kPa")
    lights = fixed("lights", 60, "parlour", "Cleaned the pulsator air inlets; clusters stayed on")
    new = incident(
        "new",
        200,
        "parlour",
        "Teat ends are swollen after milking",
        "Since the new regulator went in, the gauge sits at 50 kPa",
    )
    pairs, link = linked(new, [regulator, lights])
    assert pairs == [("new", "reg")]
    assert "described" in link.evidence
    undated = incident("new", 200, "parlour", "Teat ends are swollen after milking", "The gauge sits at 50 kPa")
    assert caused(infer_edges(undated, [regulator, lights])) == []


@pytest.mark.parametrize(
    "reference",
    [
        "Temperature up to 104 C on the first run after the pump repair",
        "Since the pump replacement the engine runs at 104 C",
        "Running at 104 C since last week's pump overhaul",
        # work named by a connective, and a part dated as new
        "First complaint was the morning after the pump work",
        "Temperature up to 104 C on the first run after the pump job",
        "Red tag on the valve dated from the pump clean-out last week",
        "The engine that got the new pump last week runs at 104 C",
        "The gap starts on the day of the pump job",
        "The hose fitted during last week's pump flush runs hot at 104 C",
        "Nobody reset the thermostat after the pump was fixed",
        "With the pump flow raised to 64 yesterday, the engine runs at 104 C",
        # a setting dated in the log
        "Log book: pump flow was set to 64 on the 12th and nobody brought it back",
    ],
)
def test_a_change_named_by_its_noun_links_the_fix_that_made_it(reference: str) -> None:
    pump = fixed("pump", 0, "bus-1121", "Replaced the coolant pump and refilled the circuit")
    filters = fixed("filters", 60, "bus-1121", "Drained the water trap and changed the fuel filters")
    new = incident("new", 200, "bus-1121", "Saloon heaters blow cold", reference)
    pairs, link = linked(new, [pump, filters])
    assert pairs == [("new", "pump")] and "reference" in link.evidence
    for plain in (
        "The engine runs at 104 C on the pump",
        "The pump work area is clear; engine at 104 C",
        "The change calendar lists maintenance on the pump after lunch",
        "Last pump change 14 months ago; engine at 104 C",
        "Nothing before the pump maintenance window",
        "The pump gauge hasn't moved since yesterday; engine at 104 C",
    ):
        unreferred = incident("new", 200, "bus-1121", "Saloon heaters blow cold", plain)
        assert caused(infer_edges(unreferred, [pump, filters])) == []


def test_a_reference_quoting_the_value_a_fix_set_links_that_fix_over_one_its_noun_describes() -> None:
    # The reference's noun ("the controller change") describes the display fix; the value it quotes
    # (18.5 C) is the one the setpoint fix set. Which fix set the value is the stronger evidence.
    setpoint = fixed("setpoint", 0, "cold-room-1", "Lowered the defrost setpoint to 18.5 C and shortened the cycle")
    display = fixed("display", 30, "cold-room-2", "Swapped the controller display board; readings back")
    new = incident(
        "new",
        60,
        "cold-room-3",
        "Evaporator coils iced solid by morning",
        "Since the controller change the defrost ends at 18.5 C",
    )
    pairs, link = linked(new, [setpoint, display])
    assert pairs == [("new", "setpoint")] and "value" in link.evidence
    other = incident(
        "new",
        60,
        "cold-room-3",
        "Evaporator coils iced solid by morning",
        "Since the controller change the defrost ends at 21 C",
    )
    assert caused(infer_edges(other, [setpoint, display])) == [("new", "display")]  # no value shared: the noun decides
    unreferred = incident(
        "new", 60, "cold-room-3", "Evaporator coils iced solid by morning", "The defrost ends at 18.5 C"
    )
    from memory.graph.cause_rule import rank_incident_causes

    assert all(dict(h.factors).get("value", 0.0) == 0.0 for h in rank_incident_causes(unreferred, [setpoint, display]))


def test_a_change_the_round_reports_checked_and_fine_is_not_linked() -> None:
    pump = fixed("pump", 0, "chiller-2", "Replaced the condenser pump and bled the loop")
    fans = fixed("fans", 30, "chiller-2", "Cleaned the tower fans")
    implicated = incident(
        "new",
        60,
        "chiller-2",
        "Supply water at 11 C against a 7 C setpoint",
        "The condenser pump was replaced on Monday and runs rough since",
    )
    assert caused(infer_edges(implicated, [pump, fans])) == [("new", "pump")]
    cleared = incident(
        "new",
        60,
        "chiller-2",
        "Supply water at 11 C against a 7 C setpoint",
        "The condenser pump was replaced on Monday and checked this morning: flow and pressure normal",
    )
    assert caused(infer_edges(cleared, [pump, fans])) == []


def test_a_generic_verb_is_no_term_a_symptom_shares_with_a_change() -> None:
    from memory.graph.changes import entity_terms

    assert entity_terms("Took two turns on the take-up") == entity_terms("two turns on the take-up")
    assert "pump" in entity_terms("Took the pump offline")


def test_a_term_only_the_two_compared_episodes_hold_weighs_fully() -> None:
    from memory.graph.changes import TermWeights

    change = fixed("chg", 0, "dryer", "Replaced the failed thermostat")
    others = [fixed(f"o{i}", i + 1, "dryer", "Cleaned the lint filter") for i in range(10)]
    new = incident("new", 20, "dryer", "Since the thermostat was replaced the burner cuts out")
    episodes = [change, *others, new]
    assert TermWeights(episodes, compared=2).weight("thermo") == 1.0  # nowhere else: as specific as a term gets
    assert TermWeights(episodes).weight("thermo") < 0.7  # counting the pair itself made it look common
    assert TermWeights(episodes, compared=2).weight("lint") < TermWeights(episodes, compared=2).weight("thermo")


def test_a_correction_that_clears_the_linked_change_withdraws_the_link() -> None:
    from memory.graph import DEFAULT_CAUSE_WEIGHTS

    linked, retried = corrected_incident("The payments retry change had nothing to do with it")
    later = [e for e in retried if e.type == EdgeType.CAUSED_BY]
    assert caused(linked) == [("new", "pay")] and linked[0].weight > 0.9
    assert len(later) == 1 and later[0].weight < DEFAULT_CAUSE_WEIGHTS.link_at and "denied" in later[0].evidence


def test_an_earlier_incident_s_own_reference_to_a_change_shares_no_symptom() -> None:
    from memory.graph.cause_rule import rank_incident_causes

    fix = fixed("fix", 0, "billing", "Restarted the billing workers")
    earlier = fixed(
        "earlier",
        20,
        "billing",
        "Restarted the billing workers",
        observations=(
            "The timing lines up with the change made to search earlier this week",
            "billing queue depth at 4,000",
        ),
    )
    new = incident(
        "new",
        30,
        "orders",
        "The timing lines up with the change made to billing earlier this week",
        "orders p99 latency up 40%",
    )
    ranked = {h.episode_id: h for h in rank_incident_causes(new, [fix, earlier])}
    overlap = {key: dict(h.factors).get("overlap", 0.0) for key, h in ranked.items()}
    assert overlap["earlier"] == overlap["fix"]  # "the timing lines up" is how both refer to a change, no symptom


STOPGAP_REPORT = (
    "Reset the drive and cleared the jam at the transfer chute; the belt ran again within ten minutes. "
    "The drive's 16 A fuse had blown and stores had none left, so the electrician fitted a 25 A fuse "
    "for now."
)


def drive_fix(eid: str, report: str):
    """A conveyor-drive fix whose summary keeps only the start of its long report (as the segmenter trims it)."""
    return fixed(eid, 0, "conveyor-3", report[:120] + "…", outcome_text=report)


@pytest.mark.parametrize(
    "text",
    [
        "Fitted the loan pump until a replacement arrives",
        "The genuine valve is on back-order, so a generic one went in",
        "We were out of the standard filters",
        "Left the relaxed limits in place until things are stable",
        "Left the fan at 80% for the rest of the shift",
        "Bypassed the float switch for now",
        "Put in a temporary jumper",
        "Short term we added the credentials by hand",
        "The proper brackets are on order",
    ],
)
def test_provisional_reads_a_fix_meant_to_hold_only_for_now(text: str) -> None:
    from memory.graph.changes import PROVISIONAL

    assert PROVISIONAL.search(text)


@pytest.mark.parametrize(
    "text",
    [
        "Backwashed each filter until the sight glass ran clear",
        "Quarantined the test until 200 green runs",
        "Fitted the spare set of belts and tensioned them",
        "Held the drains until the loan kits were done",
        "Replaced the seal; the order of the steps is in the log",
        "Left the site at 18:00",
    ],
)
def test_provisional_leaves_a_fix_meant_to_last_alone(text: str) -> None:
    from memory.graph.changes import PROVISIONAL

    assert not PROVISIONAL.search(text)


def test_a_stopgap_left_in_place_is_a_suspect_when_trouble_touches_it_unreferred() -> None:
    stopgap = drive_fix("stopgap", STOPGAP_REPORT)
    meant_to_last = drive_fix(
        "lasting",
        STOPGAP_REPORT.replace(
            "stores had none left, so the electrician fitted a 25 A fuse for now", "the electrician fitted a 25 A fuse"
        ),
    )
    other = fixed("other", 10, "motor-room", "Reset the motor-room controller")
    observations = (
        "Drive motor windings smell burnt after an hour of overload",
        "The drive cabinet carries a 25 A fuse",
    )
    new = incident("new", 40, "motor-room", *observations)
    pairs, link = linked(new, [stopgap, other])
    assert pairs == [("new", "stopgap")] and "provisional" in link.evidence
    assert change_record(stopgap).stopgap.startswith("The drive's 16 A fuse had blown")
    assert caused(infer_edges(incident("new", 40, "motor-room", *observations), [meant_to_last, other])) == []
    assert change_record(meant_to_last).stopgap == ""
    one_term = incident("new", 40, "motor-room", "Motor windings smell burnt", "Overload relay set to 25")
    assert caused(infer_edges(one_term, [stopgap, other])) == []  # one shared word is a coincidence


def test_a_context_s_change_line_says_when_the_change_was_a_stopgap() -> None:
    observations = [
        "Drive motor windings smell burnt after an hour of overload",
        "The drive cabinet carries a 25 A fuse",
    ]
    (link,) = recent_changes(observations, "motor-room", T0.replace(hour=20), [drive_fix("stopgap", STOPGAP_REPORT)])
    assert "a stopgap left in place: \"The drive's 16 A fuse had blown" in link.chain
    lasting = fixed("lasting", 0, "conveyor-3", "Fitted a 25 A fuse to the drive")
    (plain,) = recent_changes(observations, "motor-room", T0.replace(hour=20), [lasting], min_probability=0.0)
    assert "stopgap" not in plain.chain and "after the" in plain.chain


def test_a_stopgap_is_an_attribute_of_the_change_in_the_exports() -> None:
    from memory.graph.build import change_attributes

    assert change_attributes(drive_fix("s", STOPGAP_REPORT))["change_stopgap"].endswith("a 25 A fuse for now.")
    assert "change_stopgap" not in change_attributes(fixed("f", 0, "api", "Rolled api back to v2.13.2"))


def test_episode_credit_reads_each_kind_of_edge_once_per_neighbour_also_on_a_tenant_view() -> None:
    eps = [episode(f"e{i}", OK, "c", hours=i) for i in range(4)] + [episode("x", OK, "c", hours=5, principal="q")]
    G = build_graph(
        eps,
        [
            Edge("e0", "e1", EdgeType.LED_TO, 0.5, f"{RECALLED} confirmed c"),
            Edge("e0", "e1", EdgeType.RETRY_OF, 0.9, f"{RECALLED} (not a use of the precedent)"),
            Edge("e0", "e2", EdgeType.LED_TO, 0.25, f"{RECALLED} confirmed c"),
            Edge("e0", "e3", EdgeType.LED_TO, 0.8, "same choice"),  # not a recall: no credit
            Edge("e1", "e0", EdgeType.CONTRADICTED, 1.0, f"{RECALLED} had confirmed c; here it failed"),
            Edge("e1", "e0", EdgeType.LED_TO, 0.7, f"{RECALLED} (the other direction)"),
            Edge("e0", "x", EdgeType.LED_TO, 2.0, f"{RECALLED} (another tenant's episode)"),
            Edge("x", "e0", EdgeType.CONTRADICTED, 2.0, f"{RECALLED} (another tenant's episode)"),
        ],
    )

    def by_edges(graph, node):  # the definition, over the edge views
        def total(edges, kind):
            return sum(d["weight"] for *_, k, d in edges if k == kind.value and str(d["evidence"]).startswith(RECALLED))

        helped = total(graph.out_edges(node, keys=True, data=True), EdgeType.LED_TO)
        misled = total(graph.in_edges(node, keys=True, data=True), EdgeType.CONTRADICTED)
        return (1.0 + helped) / (1.0 + helped + misled)

    view = nx.subgraph_view(G, filter_node=lambda n: G.nodes[n].get("principal") == "p")
    assert episode_credit(view, "e0") == by_edges(view, "e0") == (1 + 0.75) / (1 + 0.75 + 1.0)
    assert episode_credit(G, "e0") == by_edges(G, "e0") == (1 + 2.75) / (1 + 2.75 + 3.0)
    assert [episode_credit(view, n) for n in ("e1", "e2", "e3")] == [by_edges(view, n) for n in ("e1", "e2", "e3")]
    assert episode_credit(view, "x") == 1.0  # not in the tenant's view


def test_the_most_probable_causes_are_the_first_of_all_of_them() -> None:
    changes = [
        fixed(name, hours, subject, fix, choice=choice, observations=(f"{subject} alerts",))  # one incident each
        for name, hours, subject, fix, choice in [
            ("a", 0, "payments", "Enabled aggressive retries in the payments client", "retries"),
            ("b", 1, "billing", "Raised the billing pool size to 40", "pool"),
            ("c", 2, "cache-east", "Lowered the cache ttl to 5 s", "ttl"),
            ("d", 2, "cache-west", "Lowered the cache ttl to 5 s", "ttl"),  # as probable as c
            ("e", 4, "search", "Upgraded the search index to version 7", "upgrade"),
        ]
    ]
    basis = change_basis(T0 + timedelta(hours=10), changes)
    observations = ["payments errors since the retries change", "cache misses after the ttl change"]
    every = rank_causes(observations, "orders", basis.at, basis.candidates, terms=basis.terms, learned=basis.learned)
    assert len(every) == len(basis.candidates) == 5 and every[1].probability == every[2].probability  # c and d tie
    for most in range(7):
        first = rank_causes(
            observations, "orders", basis.at, basis.candidates, terms=basis.terms, learned=basis.learned, most=most
        )
        assert first == every[:most]
    for limit in (-2, 0, 1, 3, 9):
        assert implicated_changes(observations, "orders", basis, limit=limit, min_probability=0.0) == recent_changes(
            observations, "orders", basis.at, changes, limit=limit, min_probability=0.0
        )
