"""Checking a claim against an entity's graph (issue 15, section 5) on real stores: each verdict,
subjects found by alias and by merged-away id, superseded values, the confidence formula,
free-text claims through a scripted model, the CLI, the agent's tool in a scripted entity run,
and no reads of another entity."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from kgot.cli.main import main
from kgot.config import Settings
from kgot.controller import AskResult
from kgot.errors import UsageError
from kgot.graph_model import Changeset, Edge, Node
from kgot.llm.scripted import ScriptedChatModel
from kgot.memory import Memory, open_memory, verify_claim
from kgot.memory.verify import Claim, values_match
from kgot.persistence import Provenance, Store, open_store
from kgot.tests.controller.scripts import solution, votes
from kgot.tests.memory.conftest import UPKEEP_TYPES

QUOTE: dict[str, Any] = {
    "kind": "node",
    "name": "Quote",
    "description": "A market price at a moment (decays fast).",
    "properties": {
        "type": "object",
        "required": ["name"],
        "properties": {"name": {"type": "string"}, "price": {"type": "number"}},
    },
    "functional": ["price"],
    "half_life_days": 10,
}
TYPES = [*UPKEEP_TYPES, QUOTE]
HQ = "headquartered_in"


def _provenance(confidence: float, source: str = "file:a") -> Provenance:
    return Provenance(run_id="test", step="test", source_ref=source, confidence=confidence)


def _apple(ceo: str, **more: Any) -> Node:
    return Node(
        "apple",
        "Company",
        {
            "name": "Apple Inc.",
            "aliases": ["Apple Computer"],
            "symbol": "AAPL",
            "sector": "tech",
            "ceo": ceo,
            **more,
        },
    )


def _seed(store: Store, entity: str = "fund") -> Memory:
    """Apple (CEO Steve Jobs, then Tim Cook through the write hook), headquartered in
    Cupertino (functional edge), related to Foxconn (not functional)."""
    store.create_entity(entity, types=TYPES)
    memory = open_memory(store, entity)
    memory.session.load_graph()
    memory.commit(
        Changeset(
            added_nodes=(
                _apple("Steve Jobs"),
                Node("cupertino", "Place", {"name": "Cupertino"}),
                Node("austin", "Place", {"name": "Austin"}),
                Node("foxconn", "Company", {"name": "Foxconn", "symbol": "2317.TW"}),
            ),
            added_edges=(Edge("apple", "cupertino", HQ), Edge("apple", "foxconn", "related_to")),
        ),
        _provenance(0.8),
    )
    memory.commit(Changeset(changed_nodes=(_apple("Tim Cook"),)), _provenance(0.9, "file:b"))
    return memory


# -------------------------------------------------------------------------------- verdicts


def test_a_current_value_corroborates_found_through_an_alias(store: Store) -> None:
    memory = _seed(store)

    verdict = memory.verify_claim("apple computer", property="CEO", value="tim cook")

    assert verdict.to_json() | {"notes": []} == {
        "verdict": "corroborated",
        "supporting": ["apple"],
        "contradicting": [],
        "confidence": 0.9,
        "claim": {"subject": "apple computer", "property": "CEO", "value": "tim cook"},
        "subject_id": "apple",
        "candidates": [],
        "superseded": [],
        "notes": [],
    }


def test_a_claim_about_a_ticker_is_about_the_company_that_holds_it(store: Store) -> None:
    memory = _seed(store)

    verdict = memory.verify_claim("AAPL", property="ceo", value="Tim Cook")

    assert (verdict.verdict, verdict.subject_id) == ("corroborated", "apple")


def test_a_functional_property_contradicts_and_the_old_value_is_reported(store: Store) -> None:
    memory = _seed(store)
    [closed] = [v for v in memory.session.node_history("apple") if v["closed_reason"]]

    verdict = memory.verify_claim("Apple", property="ceo", value="Steve Jobs")

    assert (verdict.verdict, verdict.contradicting, verdict.supporting) == (
        "contradicted",
        ("apple",),
        (),
    )
    assert verdict.confidence == pytest.approx(0.9)
    [old] = verdict.to_json()["superseded"]
    assert old == {
        "id": "apple",
        "value": "Steve Jobs",
        "closed_reason": "contradicted",
        "superseded_at": closed["superseded_at"],
        "held_from": closed["created_at"],
    }
    assert any(f"held 'Steve Jobs' until {closed['superseded_at']}" in n for n in verdict.notes)


@pytest.mark.slow
def test_a_functional_edge_contradicts_and_a_replaced_target_is_superseded(
    store: Store,
) -> None:
    memory = _seed(store)
    assert memory.verify_claim("Nasdaq", relation=HQ, object="austin").verdict == "inconclusive"
    # Apple's ticker names it, so the claim is about Apple (headquartered in Cupertino).
    assert memory.verify_claim("AAPL", relation=HQ, object="austin").verdict == "contradicted"
    verdict = memory.verify_claim("apple", relation="headquartered in", object="Austin")
    assert verdict.verdict == "contradicted"
    assert verdict.contradicting == ("apple -[headquartered_in]-> cupertino",)

    memory.commit(Changeset(added_edges=(Edge("apple", "austin", HQ),)), _provenance(0.9))

    moved = memory.verify_claim("apple", relation=HQ, object="Cupertino")
    assert (moved.verdict, moved.contradicting) == (
        "contradicted",
        ("apple -[headquartered_in]-> austin",),
    )
    [old] = moved.superseded
    assert (old.id, old.value, old.closed_reason) == (
        "apple -[headquartered_in]-> cupertino",
        "cupertino",
        "contradicted",
    )
    now = memory.verify_claim("apple", relation=HQ, object="Austin")
    assert (now.verdict, now.supporting, now.superseded) == (
        "corroborated",
        ("apple -[headquartered_in]-> austin",),
        (),
    )


@pytest.mark.slow
def test_both_sides_current_is_mixed_with_the_weaker_side_as_confidence(store: Store) -> None:
    memory = _seed(store)
    # Written past the write hook (as an older store might hold them): two current targets of
    # a functional relationship.
    memory.session.commit(
        Changeset(added_edges=(Edge("apple", "austin", HQ, properties={"_confidence": 0.6}),)),
        _provenance(0.6),
    )

    verdict = memory.verify_claim("apple", relation=HQ, object="cupertino")

    assert verdict.verdict == "mixed"
    assert verdict.supporting == ("apple -[headquartered_in]-> cupertino",)
    assert verdict.contradicting == ("apple -[headquartered_in]-> austin",)
    assert verdict.confidence == pytest.approx(min(0.8, 0.6))


def test_a_different_value_of_a_many_valued_fact_is_inconclusive(store: Store) -> None:
    memory = _seed(store)
    sector = memory.verify_claim("apple", property="sector", value="finance")
    related = memory.verify_claim("apple", relation="related_to", object="Samsung")
    absent = memory.verify_claim("apple", property="employees", value=160000)

    for verdict in (sector, related, absent):
        assert (verdict.verdict, verdict.supporting, verdict.contradicting) == (
            "inconclusive",
            (),
            (),
        )
        assert verdict.confidence == 0.0 and verdict.subject_id == "apple"
    assert "may have several values" in sector.notes[0]
    assert "foxconn" in related.notes[0]
    assert memory.verify_claim("apple", relation="related_to", object="foxconn").supporting == (
        "apple -[related_to]-> foxconn",
    )


def test_unknown_and_ambiguous_subjects_are_inconclusive_with_candidates(store: Store) -> None:
    memory = _seed(store)
    memory.commit(
        Changeset(
            added_nodes=(
                Node("mercury_co", "Company", {"name": "Mercury", "symbol": "MRCY", "ceo": "A"}),
                Node("mercury", "Place", {"name": "Mercury"}),
            )
        ),
        _provenance(0.9),
    )

    unknown = memory.verify_claim("Banana Republic", property="ceo", value="A")
    assert (unknown.verdict, unknown.subject_id, unknown.candidates) == ("inconclusive", None, ())
    assert "no node in entity 'fund' is 'Banana Republic'" in unknown.notes[0]

    ambiguous = memory.verify_claim("MERCURY", property="ceo", value="A")
    assert ambiguous.verdict == "inconclusive" and ambiguous.supporting == ()
    assert ambiguous.candidates == ("mercury", "mercury_co")
    assert "names 2 nodes" in ambiguous.notes[0]
    # Named by id, the same claim is decided.
    assert memory.verify_claim("mercury_co", property="ceo", value="a").verdict == "corroborated"


def test_a_merged_away_id_finds_the_canonical_node(store: Store) -> None:
    memory = _seed(store)
    # Past the write hook (which would land it on apple at once), then merged after the fact.
    memory.session.commit(
        Changeset(added_nodes=(Node("apple_2", "Company", {"name": "Apple Computer, Inc."}),)),
        _provenance(0.9),
    )
    memory.resolve(apply=True)
    assert memory.session.canonical_id("apple_2") == "apple"

    verdict = memory.verify_claim("apple_2", property="ceo", value="Tim Cook")

    assert (verdict.verdict, verdict.subject_id) == ("corroborated", "apple")


@pytest.mark.slow
def test_a_subject_that_expired_reports_the_value_it_held(store: Store) -> None:
    store.create_entity("news", types=TYPES)
    session = store.session("news")
    session.load_graph()
    expires = datetime.now(UTC) + timedelta(seconds=1)
    session.commit(
        Changeset(
            added_nodes=(
                Node(
                    "acme",
                    "Company",
                    {"name": "Acme", "ceo": "Jane Roe", "_expires_at": expires.isoformat()},
                ),
            )
        ),
        _provenance(0.7),
    )
    assert verify_claim(session, "acme", property="ceo", value="Jane Roe").verdict == (
        "corroborated"
    )
    time.sleep(max(0.0, (expires - datetime.now(UTC)).total_seconds()) + 0.2)

    verdict = verify_claim(session, "acme", property="ceo", value="Jane Roe")

    assert (verdict.verdict, verdict.subject_id, verdict.supporting) == ("inconclusive", None, ())
    [old] = verdict.superseded
    assert (old.id, old.value, old.closed_reason) == ("acme", "Jane Roe", "expired")
    assert any("held 'Jane Roe' until" in note for note in verdict.notes)


@pytest.mark.slow
def test_confidence_is_the_facts_confidence_times_freshness_at_now(store: Store) -> None:
    store.create_entity("desk", types=TYPES)
    session = store.session("desk")
    session.load_graph()
    session.commit(
        Changeset(added_nodes=(Node("q", "Quote", {"name": "AAPL close", "price": 189.98}),)),
        _provenance(0.8),
    )
    created = datetime.fromisoformat(session.node_history("q")[0]["created_at"])

    fresh = verify_claim(session, "q", property="price", value="190", now=created)
    later = verify_claim(
        session, "q", property="price", value=190, now=created + timedelta(days=10)
    )
    wrong = verify_claim(session, "q", property="price", value="$195.00", now=created)

    assert (fresh.verdict, fresh.confidence) == ("corroborated", pytest.approx(0.8))
    assert later.confidence == pytest.approx(0.4)  # one half-life later
    assert (wrong.verdict, wrong.confidence) == ("contradicted", pytest.approx(0.8))


def test_values_compare_as_what_they_are() -> None:
    assert values_match("Apple Inc.", "apple")
    assert values_match(189.98, "190") and values_match(3.24, "3.2")
    assert not values_match(189.98, "189") and not values_match(190.6, 190)
    assert values_match(3_200_000_000_000, "3.2 trillion") and values_match(1200, "$1,200")
    assert values_match("2011-08-24", "2011") and values_match("2011-08-24", "August 24, 2011")
    assert not values_match("2011-08-24", "2011-08-25")
    assert values_match(["AAPL", "APC.DE"], "apc.de") and not values_match(["AAPL"], "MSFT")
    assert values_match(True, "yes") and not values_match(False, "true")
    assert not values_match("Tim Cook", "Tim Cooke") and not values_match("190", "n/a")


def test_bad_claims_raise_one_line_usage_errors(store: Store) -> None:
    memory = _seed(store)
    cases = [
        ({}, "needs property P value V or relation R object O"),
        ({"property": "ceo"}, "property ceo needs value"),
        ({"relation": HQ}, f"relation {HQ} needs object"),
        ({"property": "ceo", "value": "x", "relation": HQ, "object": "y"}, "not both"),
        ({"value": "x", "object": "y", "relation": HQ}, "value belongs to property"),
    ]
    for claim, message in cases:
        # the API's (and the MCP tool's) argument names, never the command line's flags
        with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(")", r"\)")) as e:
            memory.verify_claim("apple", **claim)
        assert "--" not in str(e.value)
    with pytest.raises(UsageError, match="--property ceo needs --value"):
        Claim.checked("apple", "ceo", spell="--{}".format)  # the command line's words
    with pytest.raises(UsageError, match="needs a subject"):
        memory.verify_claim("  ", property="ceo", value="x")


@pytest.mark.slow
def test_no_other_entity_is_read(store: Store) -> None:
    memory = _seed(store, "fund")
    store.create_entity("other", types=TYPES)
    rival = open_memory(store, "other")
    rival.session.load_graph()
    rival.commit(
        Changeset(
            added_nodes=(
                _apple("Someone Else"),
                Node("samsung", "Company", {"name": "Samsung", "ceo": "X"}),
            )
        ),
        _provenance(1.0),
    )

    assert memory.verify_claim("apple", property="ceo", value="Tim Cook").verdict == (
        "corroborated"
    )
    assert memory.verify_claim("apple", property="ceo", value="Someone Else").superseded == ()
    assert memory.verify_claim("Samsung", property="ceo", value="X").subject_id is None
    assert rival.verify_claim("apple", property="ceo", value="Tim Cook").superseded == ()


# -------------------------------------------------------------------------------- free text


def test_a_sentence_is_extracted_by_the_model_then_checked(store: Store) -> None:
    memory = _seed(store)
    scripted = ScriptedChatModel(
        script={
            "verify_claim": [
                {"subject": "Apple", "property": "ceo"},  # no value: re-asked
                {"subject": "Apple", "property": "CEO", "value": "Tim Cook"},
            ]
        }
    )

    verdict = memory.verify_text("Apple's CEO is Tim Cook", scripted)

    assert (verdict.verdict, verdict.supporting) == ("corroborated", ("apple",))
    data = verdict.to_json()
    assert data["claim"] == {"subject": "Apple", "property": "CEO", "value": "Tim Cook"}
    assert data["text"] == "Apple's CEO is Tim Cook"
    calls = scripted.calls_for("verify_claim")
    assert len(calls) == 2  # one extraction, one re-ask after invalid output
    assert "Apple's CEO is Tim Cook" in calls[0].prompt and "ceo" in calls[0].prompt


def test_a_sentence_without_a_claim_is_inconclusive(store: Store) -> None:
    memory = _seed(store)
    scripted = ScriptedChatModel(script={"verify_claim": [{"subject": "hello"}]})
    verdict = memory.verify_text("Hello there!", scripted)
    assert (verdict.verdict, verdict.claim) == ("inconclusive", None)
    assert "no checkable claim" in verdict.notes[0]


# -------------------------------------------------------------------------------- CLI


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.slow
def test_cli_structured_and_free_text_json(
    store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with open_store(store_url) as store:
        _seed(store)
    db = ("--db", store_url)

    code, out, err = _run(
        capsys, "memory", "verify", "--entity", "fund", "--subject", "Apple Inc",
        "--relation", "headquartered_in", "--object", "Cupertino", "--json", *db,
    )  # fmt: skip
    assert code == 0, err
    data = json.loads(out)
    assert {k: data[k] for k in ("verdict", "supporting", "contradicting", "confidence")} == {
        "verdict": "corroborated",
        "supporting": ["apple -[headquartered_in]-> cupertino"],
        "contradicting": [],
        "confidence": 0.8,
    }
    assert list(data)[:4] == ["verdict", "supporting", "contradicting", "confidence"]

    code, out, err = _run(
        capsys, "memory", "verify", "-e", "fund", "--subject", "apple", "--property", "ceo",
        "--value", "Steve Jobs", *db,
    )  # fmt: skip
    assert code == 0, err
    assert out.startswith("contradicted (confidence 0.9): apple.ceo = 'Steve Jobs'")
    assert "held 'Steve Jobs' until" in out

    script = tmp_path / "script.json"
    script.write_text(
        json.dumps({"verify_claim": [{"subject": "Apple", "property": "ceo", "value": "Cook"}]})
    )
    code, out, err = _run(
        capsys, "memory", "verify", "--entity", "fund", "Apple's CEO is Cook",
        "--model", f"scripted:{script}", "--json", *db,
    )  # fmt: skip
    assert code == 0, err
    data = json.loads(out)
    assert (data["verdict"], data["contradicting"]) == ("contradicted", ["apple"])
    assert data["claim"] == {"subject": "Apple", "property": "ceo", "value": "Cook"}


@pytest.mark.slow
def test_cli_bad_input_is_one_line_exit_2(
    store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with open_store(store_url) as store:
        _seed(store)
    db = ("--db", store_url)
    verify = ("memory", "verify", "--entity")
    cases = {
        (*verify, "fund", *db): "give a claim",
        (*verify, "fund", "Apple's CEO is Cook", "--subject", "apple", *db): "not both",
        (*verify, "fund", "--subject", "apple", "--property", "ceo", *db): "needs --value",
        (*verify, "fund", "--subject", "apple", "--relation", HQ, *db): "needs --object",
        (*verify, "fund", "--subject", "apple", *db): "needs --property P --value V",
        (*verify, "fund", "--subject", "apple", "--property", "ceo", "--value", "x",
         "--relation", HQ, "--object", "y", *db): "not both",
        (*verify, "nobody", "--subject", "a", "--property", "p", "--value", "v", *db): (
            "no entity named 'nobody'"
        ),
    }  # fmt: skip
    for args, expected in cases.items():
        code, _, err = _run(capsys, *args)
        assert code == 2, (args, err)
        assert err.startswith("kgot: error: ") and err.count("\n") == 1, err
        assert expected in err, err


# -------------------------------------------------------------------------------- the tool


@pytest.mark.slow
def test_the_agent_checks_a_claim_in_an_entity_run(
    run: Callable[..., AskResult], store_settings: Settings
) -> None:
    with open_store(store_settings.store.db) as store:
        memory = _seed(store, "fund")
        before = memory.session.version
        _seed(store, "other")  # same ids, another entity: never read
        open_memory(store, "other").commit(
            Changeset(changed_nodes=(_apple("Someone Else"),)), _provenance(1.0)
        )
    call = {
        "name": "verify_claim",
        "args": {"subject": "Apple", "property": "ceo", "value": "Tim Cook"},
    }
    scripted = ScriptedChatModel(
        script={
            "decide": [votes("IIIII", "RRRRR")],
            "define_tool_calls": [{"$tool_calls": [call]}],
            "query": ['```python\nresult = G.nodes["apple"]["ceo"]\n```'],
            "math_check": [{"needs_math": False, "reason": "stated"}],
            "solve": [solution("Tim Cook")],
        }
    )

    result = run(
        scripted, "Who runs Apple?", entity="fund", settings=store_settings, attachments=[]
    )

    [outcome] = [e for e in result.trace if e.type == "tool_result"]
    assert outcome.name == "verify_claim" and outcome.ok, outcome.output
    data = json.loads(outcome.output)
    assert (data["verdict"], data["supporting"]) == ("corroborated", ["apple"])
    with open_store(store_settings.store.db) as store:
        assert store.session("fund").version == before  # a check writes no facts


def test_a_check_reads_only_what_the_claim_names_spelled_any_way(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory = _seed(store)
    memory.commit(
        Changeset(
            added_nodes=(
                Node("ibm", "Company", {"name": "IBM", "ceo": "Arvind Krishna"}),
                *(Node(f"filler_{i}", "Company", {"name": f"Filler {i}"}) for i in range(50)),
            )
        ),
        _provenance(0.9),
    )
    read: list[int] = []
    real = type(memory.session).facts_around

    def counting(self: Any, node_ids: Any) -> Any:
        graph = real(self, node_ids)
        read.append(graph.number_of_nodes())
        return graph

    monkeypatch.setattr(type(memory.session), "facts_around", counting)
    monkeypatch.setattr(
        type(memory.session), "load_graph", lambda *a, **k: pytest.fail("read the whole graph")
    )
    # Dotted and another case each find their node; a typo finds it as a candidate. Only the
    # named nodes' surroundings are read.
    dotted = memory.verify_claim("I.B.M.", property="ceo", value="Arvind Krishna")
    cased = memory.verify_claim("CUPERTINO", property="name", value="Cupertino")
    typo = memory.verify_claim("Foxcon", property="symbol", value="2317.TW")
    assert [(v.verdict, v.subject_id) for v in (dotted, cased)] == [
        ("corroborated", "ibm"),
        ("corroborated", "cupertino"),
    ]
    assert (typo.verdict, typo.candidates) == ("inconclusive", ("foxconn",))
    assert read and max(read) <= 3  # the node, and Apple at the other end of its edge
