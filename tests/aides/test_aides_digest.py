"""The ``digest`` program is a KGoT retrieve over what a cycle changed: a read query written for
the changed facts runs in the sandbox (fixed when it fails), then the digest is written citing
fact ids; citations of facts the graph lacks are sent back once and dropped if still wrong; the
model calls stay within the digest's budget and count in the cycle's figures; the retrieve
reads only the aide's own entity."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from kgot.aides import aide_rows, create_aide
from kgot.aides.programs import Digest, DigestBudget, digest
from kgot.config import Settings
from kgot.controller.ingest import Ingestor, IngestReport
from kgot.graph_model import Changeset, Node
from kgot.llm.scripted import ScriptedChatModel
from kgot.persistence import Provenance, Store
from kgot.tests.aides.aide_scripts import (
    BROKEN_QUERY,
    NOTES,
    QUERY,
    digest_reply,
    inbox,
    listed_nodes,
    model,
)

DIGEST_STEPS = ("query", "fix_query", "digest", "fix_digest")


@pytest.mark.slow
def test_a_cycles_digest_retrieves_the_changes_in_the_sandbox_and_cites_existing_facts(
    tmp_path: Path, store: Store, settings: Settings
) -> None:
    scripted = model(digest=[_citing_listed])
    aide = create_aide(store, "research", "acme", settings=settings, models=_both(scripted))
    aide.add_source("dir", str(inbox(tmp_path / "inbox", ["acme.md", "globex.md"])))

    report = aide.run_cycle()

    [query] = scripted.calls_for("query")
    assert "node acme" in query.prompt and "edge globex -[located_in]-> springfield" in query.prompt
    assert scripted.calls_for("fix_query") == []
    [written] = scripted.calls_for("digest")
    # The query ran (in the sandbox) and its result is what the digest is written from.
    returned = written.prompt.split("What a query of the graph about these changes returned:")
    assert len(returned) == 2 and "Acme Corp" in returned[1] and "located_in" in returned[1]
    assert report.digest is not None
    assert report.digest["facts"] == ["node:acme", "node:zurich", "node:globex", "node:springfield"]
    assert report.digest["digest"] == "- " + " ".join(f"[{f}]" for f in report.digest["facts"])
    assert scripted.calls_for("fix_digest") == []  # every citation was right the first time
    # The digest's calls are the cycle's: 2 ingestions, 1 query, 1 digest.
    assert report.llm_calls == len(scripted.calls) == 4
    [cycle, *_] = aide_rows.cycles(store, aide.row)
    assert cycle.llm_calls == 4


@pytest.mark.slow
def test_a_failing_query_is_fixed_and_what_it_finds_can_be_cited(
    store: Store, settings: Settings
) -> None:
    scripted = model(query=[BROKEN_QUERY], fix_query=[QUERY], digest=[_citing_listed])

    made, _reports = _digest_of(store, settings, scripted, [NOTES["acme.md"]])

    [failed] = scripted.calls_for("query")
    [fix] = scripted.calls_for("fix_query")
    assert "no such node" in fix.prompt  # the sandbox's error went back to the model
    assert made is not None and made.retrieved
    assert made.facts == ["node:acme", "node:zurich"] and made.dropped == []
    assert failed.prompt != fix.prompt


@pytest.mark.slow
def test_a_citation_of_a_fact_the_graph_lacks_is_sent_back_once_and_fixed(
    store: Store, settings: Settings
) -> None:
    scripted = model()  # the first digest cites [node:invented], the rewrite does not

    made, _reports = _digest_of(store, settings, scripted, [NOTES["acme.md"]])

    [rewrite] = scripted.calls_for("fix_digest")
    assert "[node:invented]" in rewrite.prompt.split("These citations name no fact")[1]
    assert made is not None
    assert made.facts == ["node:acme", "node:zurich"] and made.dropped == []
    assert "invented" not in made.text


@pytest.mark.slow
def test_a_citation_still_wrong_after_the_rewrite_is_dropped_from_text_and_facts(
    store: Store, settings: Settings
) -> None:
    scripted = model(fix_digest=[digest_reply])  # the rewrite keeps the invented id

    made, _reports = _digest_of(store, settings, scripted, [NOTES["acme.md"]])

    assert len(scripted.calls_for("fix_digest")) == 1  # asked once, not again
    assert made is not None
    assert made.dropped == ["node:invented"] and "invented" not in made.text
    assert made.text == "- What changed: [node:acme] [node:zurich]"
    assert made.facts == ["node:acme", "node:zurich"]


@pytest.mark.slow
def test_the_digest_stays_within_its_budget_of_model_calls(
    store: Store, settings: Settings
) -> None:
    # Every query fails and every digest cites a missing fact: without a budget the retrieve
    # alone could ask retrieve_retries x (fix_code_retries + 1) = 12 times.
    scripted = model(query=[BROKEN_QUERY], fix_query=[BROKEN_QUERY], fix_digest=[digest_reply])
    budget = DigestBudget(query_calls=3, rewrites=1)

    made, _reports = _digest_of(store, settings, scripted, [NOTES["acme.md"]], budget=budget)

    queries = scripted.calls_for("query") + scripted.calls_for("fix_query")
    assert len(queries) == 3
    assert len(scripted.calls_for("digest")) == 1 and len(scripted.calls_for("fix_digest")) == 1
    assert made is not None and not made.retrieved
    assert made.llm_calls == 5 == budget.max_llm_calls
    assert "found nothing" in (made.note or "")
    assert made.facts == ["node:acme", "node:zurich"]  # written from the changed facts


@pytest.mark.slow
def test_a_cycle_uses_the_default_budget(tmp_path: Path, store: Store, settings: Settings) -> None:
    scripted = model(query=[BROKEN_QUERY], fix_query=[BROKEN_QUERY])
    aide = create_aide(store, "capped", "acme", settings=settings, models=_both(scripted))
    aide.add_source("dir", str(inbox(tmp_path / "inbox", ["acme.md"])))

    report = aide.run_cycle()

    used = [call for call in scripted.calls if call.step in DIGEST_STEPS]
    assert len(used) <= DigestBudget().max_llm_calls
    assert len(scripted.calls_for("query") + scripted.calls_for("fix_query")) == 4
    assert report.digest is not None and report.llm_calls == len(scripted.calls)


@pytest.mark.slow
def test_without_a_retrieve_or_when_it_fails_the_digest_rests_on_the_changed_facts(
    store: Store, settings: Settings
) -> None:
    skipped = model()
    made, _reports = _digest_of(store, settings, skipped, [NOTES["acme.md"]], retrieve=False)
    assert skipped.calls_for("query") == []
    assert made is not None and made.facts == ["node:acme", "node:zurich"]
    assert "budget" in (made.note or "")

    # The endpoint refuses the query request (a ModelError): the digest is still written.
    down = model(query=[{"$error": "bad_request"}])
    made, _reports = _digest_of(store, settings, down, [NOTES["globex.md"]], entity="other")
    assert made is not None and made.facts == ["node:globex", "node:springfield"]
    assert "retrieve failed" in (made.note or "") and "ModelError" in (made.note or "")


def test_nothing_changed_means_no_digest_and_no_model_call(
    store: Store, settings: Settings
) -> None:
    scripted = model()

    async def go() -> Digest | None:
        async with Ingestor(store, _entity(store, "acme"), settings, models=_both(scripted)) as it:
            return await digest(
                it, [IngestReport(entity="acme", source_ref=None)], entity="acme", titles=[]
            )

    assert asyncio.run(go()) is None
    assert scripted.calls == []


@pytest.mark.slow
def test_the_retrieve_reads_only_the_aides_own_entity(
    tmp_path: Path, store: Store, settings: Settings
) -> None:
    store.create_entity("rival")
    other = store.session("rival")
    other.load_graph()
    secret = Node("secret_plan", "Organization", {"name": "Secret Plan Org"})
    other.commit(Changeset(added_nodes=(secret,)), Provenance(run_id="seed", step="test"))
    scripted = model(digest=[_citing_listed])
    aide = create_aide(store, "mine", "acme", settings=settings, models=_both(scripted))
    aide.add_source("dir", str(inbox(tmp_path / "inbox", ["acme.md"])))

    report = aide.run_cycle()

    [query] = scripted.calls_for("query")
    [written] = scripted.calls_for("digest")
    for prompt in (query.prompt, written.prompt):
        assert "secret_plan" not in prompt and "Secret Plan" not in prompt
    assert "Acme Corp" in written.prompt
    assert report.digest is not None and report.digest["facts"] == ["node:acme", "node:zurich"]


# ------------------------------------------------------------------------------ helpers


def _citing_listed(call: Any) -> str:
    return "- " + " ".join(listed_nodes(call))


def _both(scripted: object) -> dict[str, Any]:
    return {"planning": scripted, "execution": scripted}


def _entity(store: Store, name: str) -> str:
    if name not in {entity.name for entity in store.list_entities()}:
        store.create_entity(name)
    return name


def _digest_of(
    store: Store,
    settings: Settings,
    scripted: ScriptedChatModel,
    texts: Sequence[str],
    *,
    entity: str = "acme",
    budget: DigestBudget | None = None,
    retrieve: bool = True,
) -> tuple[Digest | None, list[IngestReport]]:
    """Ingest ``texts`` into ``entity`` and make the digest of what they changed, in one
    session, as a cycle does."""

    async def go() -> tuple[Digest | None, list[IngestReport]]:
        async with Ingestor(store, _entity(store, entity), settings, models=_both(scripted)) as it:
            reports = [
                await it.ingest(text, source_ref=f"note {n}") for n, text in enumerate(texts)
            ]
            made = await digest(
                it, reports, entity=entity, titles=["a note"], budget=budget, retrieve=retrieve
            )
            return made, reports

    return asyncio.run(go())
