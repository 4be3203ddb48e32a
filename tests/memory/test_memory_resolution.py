"""Entity resolution without a store (kgot.memory.resolution): the labelled set, the rules one
by one, the canonical choice, the JSON shape, embeddings as evidence, write-time lookups, and a
measurement at 10,000 nodes."""

from __future__ import annotations

import random
import statistics
import time

import pytest

from kgot.graph_model import Node
from kgot.memory import ResolutionIndex, match_existing, resolve, resolve_all
from kgot.memory.evaluation import PAIRS, evaluate, synthetic_nodes


def org(node_id: str, name: str, **properties) -> Node:
    return Node(node_id, "Organization", {"name": name, **properties})


def asset(node_id: str, name: str, symbol: str | None = None) -> Node:
    properties = {"name": name} if symbol is None else {"name": name, "symbol": symbol}
    return Node(node_id, "Asset", properties)


# --------------------------------------------------------------------------------------------
# The labelled set


def test_labelled_set_precision_and_recall():
    report = evaluate()
    print("\n" + report.summary())
    for line in report.wrong:
        print("  " + line)
    assert report.pairs >= 100
    assert report.precision >= 0.97, report.wrong
    assert report.recall >= 0.85, report.wrong


def test_labelled_set_covers_the_cases_the_issue_names():
    notes = " ".join(pair.note for pair in PAIRS)
    for case in ("acronym", "suffix", "share classes", "types differ", "initial", "full-width"):
        assert case in notes, case
    assert {pair.expect for pair in PAIRS} == {"merge", "suggest", "distinct"}


# --------------------------------------------------------------------------------------------
# Rules


def test_identity_decides_before_names():
    # Same name, different symbols: never the same, not even a suggestion.
    result = resolve(
        [asset("a", "Alphabet Inc.", "GOOGL"), asset("b", "Alphabet Inc.", "GOOG")], ["symbol"]
    )
    assert result.merges == ()
    assert result.suggestions == ()
    # Different names, one symbol: the same.
    result = resolve(
        [asset("a", "Facebook", "META"), asset("b", "Meta Platforms", "meta")], ["symbol"]
    )
    assert [(m.canonical, m.aliases, m.score) for m in result.merges] == [("a", ("b",), 1.0)]
    assert "symbol" in result.merges[0].reason


def test_a_name_between_two_identities_is_not_merged_either_way():
    nodes = [
        asset("a", "Alphabet Inc.", "GOOGL"),
        asset("b", "Alphabet Inc.", "GOOG"),
        asset("c", "Alphabet Inc."),
    ]
    result = resolve(nodes, ["symbol"])
    assert result.merges == ()
    assert {s.nodes for s in result.suggestions} == {("a", "c"), ("b", "c")}
    assert all("identities conflict" in s.reason for s in result.suggestions)


def test_only_nodes_of_one_type_are_compared():
    nodes = [org("o", "Apple"), Node("p", "Product", {"name": "Apple"}), org("o2", "Apple Inc.")]
    result = resolve_all(nodes)
    assert [(m.canonical, m.aliases, m.type) for m in result.merges] == [
        ("o", ("o2",), "Organization")
    ]
    with pytest.raises(ValueError, match="one type"):
        resolve(nodes)


def test_short_and_one_word_names_are_guarded():
    result = resolve(
        [
            org("meta", "Meta"),
            org("mfg", "Meta Financial Group"),
            org("ibm", "IBM"),
            org("ibm-long", "International Business Machines Corporation"),
            org("ms", "Microsoft"),
            org("ms-typo", "Microsft"),
        ]
    )
    assert result.merges == ()
    suggested = {s.nodes: s for s in result.suggestions}
    assert set(suggested) == {("meta", "mfg"), ("ibm", "ibm-long"), ("ms", "ms-typo")}
    assert suggested[("ibm", "ibm-long")].reason == "acronym 'ibm'"
    assert all(0 < s.score < 1 for s in result.suggestions)


def test_an_alias_turns_an_acronym_into_a_merge():
    result = resolve(
        [org("a", "International Business Machines", aliases=["IBM", "Big Blue"]), org("b", "IBM")]
    )
    assert [(m.canonical, m.aliases) for m in result.merges] == [("a", ("b",))]
    assert result.merges[0].reason == "same name 'ibm'"


def test_merges_are_transitive_and_score_the_weakest_link():
    result = resolve(
        [
            org("a", "Goldman Sachs Group"),
            org("b", "Goldman Sachs Group, Inc."),
            org("c", "Goldmann Sachs Group"),
        ]
    )
    (merge,) = result.merges
    assert (merge.canonical, merge.aliases) == ("a", ("b", "c"))
    assert 0.92 <= merge.score < 1.0
    assert "same name" in merge.reason and "near-identical spelling" in merge.reason


def test_canonical_has_most_evidence_then_is_oldest():
    nodes = [org("x", "Apple Inc."), org("y", "Apple, Inc."), org("z", "apple incorporated")]
    by_evidence = resolve(nodes, evidence={"x": 1, "y": 5, "z": 5})
    assert by_evidence.merges[0].canonical in {"y", "z"}
    by_both = resolve(
        nodes,
        evidence={"x": 1, "y": 5, "z": 5},
        created_at={"y": "2025-03-01T00:00:00+00:00", "z": "2024-01-01T00:00:00"},
    )
    assert by_both.merges[0].canonical == "z"
    assert by_both.merges[0].aliases == ("x", "y")
    by_age = resolve(nodes, created_at={"x": "2026-01-01", "y": "2020-01-01"})
    assert by_age.merges[0].canonical == "y"


def test_same_answer_whatever_the_input_order():
    nodes = synthetic_nodes(800, seed=3)
    first = resolve(nodes).to_json()
    shuffled = list(nodes)
    random.Random(1).shuffle(shuffled)
    assert resolve(shuffled).to_json() == first


def test_json_shape_of_memory_resolve():
    result = resolve([org("a", "Apple Inc."), org("b", "Apple, Inc."), org("c", "Oracle")])
    assert set(result.to_json()) == {"merges", "suggestions"}
    (merge,) = result.to_json()["merges"]
    assert list(merge) == ["canonical", "aliases", "type", "score", "reason"]
    assert merge["aliases"] == ["b"] and merge["type"] == "Organization"
    assert merge["score"] == 1.0
    suggestion_result = resolve([org("c", "IBM"), org("d", "International Business Machines")])
    assert suggestion_result.to_json() == {
        "merges": [],
        "suggestions": [{"nodes": ["c", "d"], "type": "Organization", "score": 0.85}],
    }
    assert suggestion_result.to_json(suggestion_ids=[7])["suggestions"][0] == {
        "id": 7,
        "nodes": ["c", "d"],
        "type": "Organization",
        "score": 0.85,
    }


# --------------------------------------------------------------------------------------------
# Embeddings: evidence, never the only one


def test_embeddings_promote_a_spelling_suggestion_only():
    nodes = [org("a", "Microsoft"), org("b", "Microsft"), org("c", "IBM")]
    nodes.append(org("d", "International Business Machines"))
    nodes.append(org("e", "Oracle"))
    same = [1.0, 0.0, 0.0]
    vectors = {"a": same, "b": [0.99, 0.05, 0.0], "c": same, "d": same, "e": same}
    result = resolve(nodes, vectors=vectors)
    assert [(m.canonical, m.aliases) for m in result.merges] == [("a", ("b",))]
    assert "embeddings agree" in result.merges[0].reason
    # The acronym stays a suggestion; "Oracle", similar only by its vector, is not even that.
    assert [s.nodes for s in result.suggestions] == [("c", "d")]

    far = {**vectors, "b": [0.0, 1.0, 0.0]}
    assert resolve(nodes, vectors=far).merges == ()


def test_embed_callable_is_asked_only_for_promotable_pairs():
    asked: list[str] = []

    def embed(texts):
        asked.extend(texts)
        return [[1.0, 0.0] for _ in texts]

    nodes = [org("a", "Microsoft"), org("b", "Microsft"), org("c", "Apple"), org("d", "Apple Inc")]
    result = resolve(nodes, embed=embed)
    assert sorted(asked) == ["Microsft", "Microsoft"]
    assert {m.canonical for m in result.merges} == {"a", "c"}


# --------------------------------------------------------------------------------------------
# Write time


def test_match_existing_finds_the_node_a_new_one_is():
    index = ResolutionIndex.build(
        [
            org("apple", "Apple Inc."),
            org("ibm", "International Business Machines"),
            org("meta", "Meta Platforms", aliases=["Facebook"]),
            asset("googl", "Alphabet Inc.", "GOOGL"),
            Node("iphone", "Product", {"name": "iPhone"}),
        ],
        {"Asset": ["symbol"]},
    )
    match = match_existing(org("new", "apple incorporated"), index)
    assert match is not None and (match.node_id, match.merge, match.score) == ("apple", True, 1.0)
    match = match_existing(org("new", "Facebook, Inc."), index)
    assert match is not None and (match.node_id, match.merge) == ("meta", True)
    match = match_existing(org("new", "IBM"), index)
    assert match is not None and (match.node_id, match.merge) == ("ibm", False)
    match = match_existing(org("new", "Meta"), index)
    assert match is not None and (match.node_id, match.merge) == ("meta", False)
    assert match_existing(org("new", "Oracle"), index) is None
    # Identity: another share class is not the same asset; the same symbol is.
    assert match_existing(asset("new", "Alphabet Inc.", "GOOG"), index) is None
    match = match_existing(asset("new", "Google class A", "googl"), index)
    assert match is not None and (match.node_id, match.merge) == ("googl", True)
    # Another type with the same name, the node itself, a removed node: no match.
    assert match_existing(Node("new", "Product", {"name": "Apple"}), index) is None
    assert match_existing(org("apple", "Apple Inc."), index) is None
    index.remove("apple")
    assert match_existing(org("new", "Apple"), index) is None
    index.add(org("apple", "Apple Inc."))
    assert match_existing(org("new", "Apple"), index) is not None


def test_match_existing_with_two_identities_behind_one_name_only_suggests():
    index = ResolutionIndex.build(
        [asset("a", "Alphabet Inc.", "GOOGL"), asset("b", "Alphabet Inc.", "GOOG")],
        {"Asset": ["symbol"]},
    )
    match = match_existing(asset("new", "Alphabet Inc."), index)
    assert match is not None and not match.merge


def test_match_existing_agrees_with_resolve_on_the_labelled_set():
    from kgot.memory.evaluation import IDENTITY_BY_TYPE

    for pair in PAIRS:
        index = ResolutionIndex.build([pair.a], IDENTITY_BY_TYPE)
        match = match_existing(pair.b, index)
        merged = bool(resolve_all([pair.a, pair.b], IDENTITY_BY_TYPE).merges)
        assert (match is not None and match.merge) == merged, pair


# --------------------------------------------------------------------------------------------
# Scale (measured and printed; the budgets are checked by benchmarks/perf_memory.py)


@pytest.mark.slow
def test_scale_at_ten_thousand_nodes():
    nodes = synthetic_nodes(10_000)
    started = time.perf_counter()
    result = resolve(nodes)
    resolve_seconds = time.perf_counter() - started

    started = time.perf_counter()
    index = ResolutionIndex.build(nodes)
    build_seconds = time.perf_counter() - started
    rng = random.Random(7)
    lookups: list[float] = []
    for n in range(300):
        name = str(rng.choice(nodes).properties["name"])
        new = org(f"new{n}", name + ("" if n % 3 else " Holdings") + ("s" if n % 2 else ""))
        started = time.perf_counter()
        match_existing(new, index)
        lookups.append(time.perf_counter() - started)
    lookups.sort()
    print(
        f"\nresolve 10,000 nodes: {resolve_seconds:.2f} s ({len(result.merges)} merges, "
        f"{len(result.suggestions)} suggestions); index build {build_seconds:.2f} s; "
        f"match_existing median {statistics.median(lookups) * 1000:.2f} ms, "
        f"p95 {lookups[int(len(lookups) * 0.95)] * 1000:.2f} ms, max {lookups[-1] * 1000:.2f} ms"
    )
    assert result.merges and result.suggestions


@pytest.mark.slow
def test_scale_when_many_nodes_share_few_spellings():
    rng = random.Random(2)
    first = ["John", "J.", "James", "Jane", "Mary", "M.", "Robert", "R.", "Linda", "Thomas", "T."]
    last = ["Smith", "Johnson", "Williams", "Brown", "Jones", "Garcia", "Miller", "Davis"]
    nodes = [
        Node(f"p{n}", "Person", {"name": f"{rng.choice(first)} {rng.choice(last)}"})
        for n in range(10_000)
    ]
    started = time.perf_counter()
    result = resolve(nodes)
    seconds = time.perf_counter() - started
    print(
        f"\nresolve 10,000 people over {len(first) * len(last)} spellings: {seconds:.2f} s "
        f"({len(result.merges)} merges, {len(result.suggestions)} suggestions)"
    )
    # Every spelling collapses into one node; initials stay suggestions.
    assert len(result.merges) == len(first) * len(last)
    assert any(s.reason == "same name up to initials" for s in result.suggestions)


def test_legal_forms_of_different_systems_are_evidence_not_noise():
    """'Merck & Co.' (US) and 'Merck KGaA' (German) are two companies: suggested, never merged;
    forms of one system still merge, and an SE sits beside any European form."""
    nodes = [
        org("us", "Merck & Co."),
        org("de", "Merck KGaA"),
        org("us_inc", "Merck & Co., Inc."),
        org("ms", "Microsoft Corporation"),
        org("ms_corp", "Microsoft Corp."),
        org("siemens_se", "Siemens SE"),
        org("siemens_ag", "Siemens AG"),
    ]
    result = resolve(nodes)
    merged = {(m.canonical, *m.aliases) for m in result.merges}
    assert merged == {("ms", "ms_corp"), ("siemens_ag", "siemens_se"), ("us", "us_inc")}
    [suggestion] = result.suggestions
    assert (
        suggestion.nodes == ("de", "us") and "legal forms of different systems" in suggestion.reason
    )
