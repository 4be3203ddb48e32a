"""The labelled company set resolved as one population (issue 29's targets) on both stores:
400 mentions of companies, assets, people, places and products written to one entity and
resolved together, not pair by pair, so crowded blocks and chained merges count."""

from __future__ import annotations

from kgot.benchmarks.pair_metrics import merge_pairs, score_pairs, suggestion_pairs
from kgot.benchmarks.resolution_populations import company_population
from kgot.graph_model import Changeset
from kgot.memory import open_memory
from kgot.persistence import Provenance, Store


def test_the_company_set_merges_precisely_and_suggests_the_rest(store: Store) -> None:
    population = company_population()
    store.create_entity("companies", types=list(population.types), shadow=True)
    session = store.session("companies")
    session.commit(
        Changeset(added_nodes=population.nodes), Provenance(run_id="labelled", step="import")
    )
    resolution = open_memory(store, "companies").resolve().to_json()
    decided = population.true_pairs | population.forbidden_pairs
    merged = merge_pairs(resolution)
    merges = score_pairs(merged & decided, population.true_pairs)
    with_suggestions = score_pairs(
        (merged | suggestion_pairs(resolution)) & decided, population.true_pairs
    )
    assert merges.precision >= 0.97
    assert with_suggestions.recall >= 0.85
    # Share classes (GOOG/GOOGL), look-alikes (Snap / Snap-on), siblings: never one thing.
    assert not merged & population.forbidden_pairs
