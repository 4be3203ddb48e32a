"""Every branch of the KGoT loop, driven by scripted models over the real backend, sandbox,
tools and store."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kgot.config import Settings
from kgot.controller import AskResult
from kgot.errors import UsageError
from kgot.llm.scripted import ScriptedChatModel
from kgot.tests.controller.scripts import (
    ADD_LYON,
    ADD_PARIS,
    QUERY_PARIS,
    event_types,
    inspect_call,
    paris_in_one_round,
    solution,
    votes,
)

Run = Callable[..., AskResult]
NO_MATH = {"needs_math": False, "reason": "the value is stated"}


def model(**steps: Any) -> ScriptedChatModel:
    return ScriptedChatModel(script={step: list(replies) for step, replies in steps.items()})


def events(result: AskResult, kind: str) -> list[dict[str, Any]]:
    """The run's events of one kind, as plain data."""
    return [event.model_dump() for event in result.trace if event.type == kind]


@pytest.mark.slow
def test_insert_then_retrieve(run: Run, facts_file: Path) -> None:
    scripted = model(**paris_in_one_round(facts_file))
    result = run(scripted)

    assert result.status == "answered"
    assert result.answer == "2102650"
    assert result.iterations == 2
    assert result.tool_calls == 1
    assert result.error is None
    nodes = {node["id"]: node for node in result.graph["nodes"]}
    assert nodes["paris"]["population"] == 2102650
    assert nodes["paris"]["label"] == "City"
    assert [e["relationship"] for e in result.graph["edges"]] == ["located_in"]
    # 5 + 5 votes, 1 tool-call definition, 1 graph update, 1 query, 1 maths check, 3 samples.
    assert result.llm_calls == 17
    assert len(scripted.calls_for("decide")) == 10
    assert len(scripted.calls_for("solve")) == 3
    assert event_types(result) == [
        "run_started",
        "votes",
        "tool_calls",
        "tool_result",
        "code",
        "graph_updated",
        "votes",
        "code",
        "query_result",
        "math",
        "solutions",
        "run_finished",
    ]
    [tool_result] = events(result, "tool_result")
    assert tool_result["ok"] and "2,102,650" in tool_result["output"]
    # Every request and the tool call are in the trace too, as spans of their own.
    assert len(events(result, "model_call")) == result.llm_calls
    [tool_call] = events(result, "tool_call")
    assert tool_call["name"] == tool_result["name"] and tool_call["ok"]
    # The code-writing prompt saw the tool output; the query prompt saw the updated graph.
    assert "2,102,650" in scripted.calls_for("update_graph")[0].prompt
    assert "paris" in scripted.calls_for("query")[0].prompt


@pytest.mark.slow
def test_retrieve_at_the_first_vote_uses_the_existing_graph(run: Run, settings: Settings) -> None:
    from kgot.graph_model import Changeset, Edge, Node
    from kgot.persistence import Provenance, open_store

    with open_store(settings.store.db) as store:
        store.create_entity("atlas")
        session = store.session("atlas")
        session.commit(
            Changeset(
                added_nodes=(
                    Node("paris", "Place", {"name": "Paris", "population": 2102650}),
                    Node("france", "Place", {"name": "France"}),
                ),
                added_edges=(Edge("paris", "france", "located_in"),),
            ),
            Provenance(run_id="seed", step="test"),
        )
    scripted = model(
        decide=[votes("RRRRI")],
        query=[QUERY_PARIS],
        math_check=[NO_MATH],
        solve=[solution("2102650")],
    )
    result = run(scripted, entity="atlas")

    assert result.status == "answered"
    assert result.answer == "2102650"
    assert result.iterations == 1
    assert result.tool_calls == 0
    assert not scripted.calls_for("define_tool_calls")
    assert "paris" in scripted.calls_for("decide")[0].prompt


@pytest.mark.slow
def test_tied_vote_goes_to_insert(run: Run, settings: Settings, facts_file: Path) -> None:
    four_votes = settings.model_copy(
        update={"controller": settings.controller.model_copy(update={"votes": 4})}
    )
    scripted = model(
        decide=[votes("IRIR", "RRRR")],
        define_tool_calls=[inspect_call(facts_file)],
        update_graph=[ADD_PARIS],
        query=[QUERY_PARIS],
        math_check=[NO_MATH],
        solve=[solution("2102650")],
    )
    result = run(scripted, settings=four_votes)

    first_round = events(result, "votes")[0]
    assert [v["decision"] for v in first_round["votes"]].count("INSERT") == 2
    assert first_round["decision"] == "INSERT"
    assert len(scripted.calls_for("define_tool_calls")) == 1
    # Both INSERT reasons were identical after the first and are merged into one line.
    prompt = scripted.calls_for("define_tool_calls")[0].prompt
    assert prompt.count("round 1 vote I") == 1


@pytest.mark.slow
def test_broken_code_is_fixed_with_the_error_shown(run: Run, facts_file: Path) -> None:
    scripted = model(
        decide=[votes("IIIII", "RRRRR")],
        define_tool_calls=[inspect_call(facts_file)],
        update_graph=["```python\nG.add_node('paris', label='City', size=undefined_name)\n```"],
        fix_code=[ADD_PARIS],
        query=[QUERY_PARIS],
        math_check=[NO_MATH],
        solve=[solution("2102650")],
    )
    result = run(scripted)

    assert result.answer == "2102650"
    [failure] = events(result, "code_failed")
    assert "undefined_name" in failure["error"]
    [fix_call] = scripted.calls_for("fix_code")
    assert "undefined_name" in fix_call.prompt  # the model saw its error
    assert events(result, "graph_updated")[0]["nodes"] == 2


@pytest.mark.slow
def test_fix_code_exhaustion_is_recorded_and_the_loop_goes_on(
    run: Run, settings: Settings, facts_file: Path
) -> None:
    limited = settings.model_copy(
        update={
            "controller": settings.controller.model_copy(
                update={"fix_code_retries": 2, "max_iterations": 2, "retrieve_retries": 1}
            )
        }
    )
    broken = "```python\nraise ValueError('cannot parse this')\n```"
    scripted = model(
        decide=[votes("IIIII")],
        define_tool_calls=[inspect_call(facts_file)],
        update_graph=[broken],
        fix_code=[broken],
        query=["```python\nresult = []\n```"],
        math_check=[NO_MATH],
        solve=[solution("unknown")],
    )
    result = run(scripted, settings=limited)

    # One try plus two fixes per tool result, for the one result of round 1 (round 2 repeats the
    # same successful call, which is skipped).
    assert len(scripted.calls_for("update_graph")) == 1
    assert len(scripted.calls_for("fix_code")) == 2
    failed = [e for e in events(result, "step_failed") if e["step"] == "update_graph"]
    assert failed and "gave up after 3 attempts" in failed[0]["error"]
    assert result.graph["nodes"] == []
    assert result.status == "forced"
    later_vote_prompt = scripted.calls_for("decide")[-1].prompt
    assert "could not be added to the graph" in later_vote_prompt


@pytest.mark.slow
def test_empty_result_is_regenerated(run: Run, facts_file: Path) -> None:
    scripted = model(
        decide=[votes("IIIII", "RRRRR")],
        define_tool_calls=[inspect_call(facts_file)],
        update_graph=[ADD_PARIS],
        query=["```python\nresult = [n for n in G if n == 'Paris']\n```", QUERY_PARIS],
        math_check=[NO_MATH],
        solve=[solution("2102650")],
    )
    result = run(scripted)

    assert result.answer == "2102650"
    query_calls = scripted.calls_for("query")
    assert len(query_calls) == 2
    assert "returned an empty result" in query_calls[1].prompt
    assert [e["empty"] for e in events(result, "query_result")] == [True, False]


@pytest.mark.slow
def test_forced_solution_after_max_iterations(
    run: Run, settings: Settings, facts_file: Path
) -> None:
    limited = settings.model_copy(
        update={"controller": settings.controller.model_copy(update={"max_iterations": 2})}
    )
    scripted = model(
        decide=[votes("IIIII")],
        define_tool_calls=[inspect_call(facts_file)],
        update_graph=[ADD_PARIS, ADD_LYON],
        query=["```python\nresult = None\n```"],
        solve=[solution("about two million")],
    )
    result = run(scripted, settings=limited)

    assert result.status == "forced"
    assert result.answer == "about two million"
    assert result.iterations == 3  # two INSERT rounds, then the forced end
    forced = events(result, "votes")[-1]
    assert forced["forced"] is True and forced["votes"] == []
    assert len(scripted.calls_for("decide")) == 10
    assert len(scripted.calls_for("query")) == settings.controller.retrieve_retries
    # Retrieval found nothing, so the solution was asked from the graph itself.
    solve_prompt = scripted.calls_for("solve")[0].prompt
    assert "time for research is over" in solve_prompt
    assert "paris" in solve_prompt


@pytest.mark.slow
def test_maths_step_runs_in_the_sandbox(run: Run, facts_file: Path) -> None:
    scripted = model(
        decide=[votes("IIIII", "RRRRR")],
        define_tool_calls=[inspect_call(facts_file)],
        update_graph=[ADD_PARIS],
        query=[QUERY_PARIS],
        math_check=[{"needs_math": True, "reason": "density = population / area"}],
        math=["```python\nprint('density', round(2102650 / 105.4))\n```"],
        solve=[solution("19949")],
    )
    result = run(scripted, question="What is the population density of Paris per km2?")

    [maths] = [e for e in events(result, "math") if e["needs_math"]]
    assert maths["output"] == "density 19949"
    assert "Calculation output:\ndensity 19949" in scripted.calls_for("solve")[0].prompt
    assert result.answer == "19949"


@pytest.mark.slow
def test_a_huge_calculation_output_is_cut_before_the_solution_prompt(
    run: Run, facts_file: Path
) -> None:
    scripted = model(
        decide=[votes("IIIII", "RRRRR")],
        define_tool_calls=[inspect_call(facts_file)],
        update_graph=[ADD_PARIS],
        query=[QUERY_PARIS],
        math_check=[{"needs_math": True, "reason": "density"}],
        math=["```python\nprint('19949 ' + 'x' * 600_000)\n```"],
        solve=[solution("19949")],
    )
    result = run(scripted)

    prompt = scripted.calls_for("solve")[0].prompt
    assert "Calculation output:\n19949 xxx" in prompt
    assert len(prompt) < 20_000  # not the 600,000 characters the program printed
    assert "more characters]" in prompt  # the model is told the output was cut
    assert result.answer == "19949"


def _going_on_after_invalid_output(settings: Settings) -> Settings:
    return settings.model_copy(
        update={"llm": settings.llm.model_copy(update={"stop_on_invalid_output": False})}
    )


@pytest.mark.slow
def test_malformed_votes_are_re_asked_then_count_as_no_vote(
    run: Run, settings: Settings, facts_file: Path
) -> None:
    garbage = "I think we should insert."

    def decide(call: Any) -> Any:
        # Round 1 (calls 1-10): each vote's first reply is not JSON; the re-ask, which shows the
        # model its bad reply and the error, gets a valid vote.
        if call.number <= 10:
            if garbage in call.prompt and "cannot be used" in call.prompt:
                return {"decision": "insert", "reason": "need the population"}
            return garbage
        # Round 2 (calls 11-20): garbage even after the re-ask -> no votes -> 0:0 -> INSERT.
        if call.number <= 20:
            return "no idea"
        return {"decision": "RETRIEVE", "reason": "found"}

    scripted = model(
        decide=[decide],
        define_tool_calls=[inspect_call(facts_file)],
        update_graph=[ADD_PARIS],
        query=[QUERY_PARIS],
        math_check=[NO_MATH],
        solve=[solution("2102650")],
    )
    result = run(scripted, settings=_going_on_after_invalid_output(settings))

    rounds = events(result, "votes")
    calls = events(result, "model_call")
    retries = [e for e in calls if e["step"] == "decide" and not e["ok"]]
    assert len(retries) == 5 + 10  # round 1: one bad reply per vote; round 2: two per vote
    assert all("invalid output" in e["error"] for e in retries)
    assert result.usage_by_step["decide"]["failed"] == 15
    assert result.usage_by_step["decide"]["calls"] == 10 + 10 + 5
    assert all(v.get("decision") == "INSERT" for v in rounds[0]["votes"])
    assert all("failed" in v for v in rounds[1]["votes"])
    assert rounds[1]["decision"] == "INSERT"
    assert rounds[2]["decision"] == "RETRIEVE"
    assert result.answer == "2102650"


@pytest.mark.slow
def test_duplicate_successful_tool_call_is_not_run_again(run: Run, facts_file: Path) -> None:
    scripted = model(
        decide=[votes("IIIII", "IIIII", "RRRRR")],
        define_tool_calls=[inspect_call(facts_file)],
        update_graph=[ADD_PARIS],
        query=[QUERY_PARIS],
        math_check=[NO_MATH],
        solve=[solution("2102650")],
    )
    result = run(scripted)

    results = events(result, "tool_result")
    assert [r["skipped"] for r in results] == [False, True]
    assert result.tool_calls == 1
    assert len(scripted.calls_for("update_graph")) == 1
    assert "[done] inspect_file" in scripted.calls_for("define_tool_calls")[1].prompt


@pytest.mark.slow
def test_failed_tool_calls_are_not_cached(
    run: Run, settings: Settings, tmp_path: Path, facts_file: Path
) -> None:
    later = tmp_path / "later"
    later.mkdir()
    missing = later / "later.txt"
    readable = settings.model_copy(
        update={"tools": settings.tools.model_copy(update={"file_roots": [str(later)]})}
    )
    call = {"$tool_calls": [{"name": "inspect_file", "args": {"path": str(missing)}}]}

    def create_file_on_second_round(reply: Any) -> Any:
        if reply.number == 2:
            missing.write_text(facts_file.read_text(encoding="utf-8"), encoding="utf-8")
        return call

    scripted = model(
        decide=[votes("IIIII", "IIIII", "RRRRR")],
        define_tool_calls=[create_file_on_second_round],
        update_graph=[ADD_PARIS],
        query=[QUERY_PARIS],
        math_check=[NO_MATH],
        solve=[solution("2102650")],
    )
    result = run(scripted, settings=readable)

    outcomes = events(result, "tool_result")
    assert [r["ok"] for r in outcomes] == [False, True]
    assert not any(r["skipped"] for r in outcomes)
    assert result.tool_calls == 2
    assert "[FAILED] inspect_file" in scripted.calls_for("define_tool_calls")[1].prompt


def test_empty_question_is_rejected(run: Run) -> None:
    with pytest.raises(UsageError, match="question is empty"):
        run(model(), question="   ")


@pytest.mark.slow
def test_the_same_loop_drives_the_rdf_backend(
    run: Run, settings: Settings, facts_file: Path
) -> None:
    rdf = settings.model_copy(
        update={"controller": settings.controller.model_copy(update={"backend": "rdf"})}
    )
    insert = """```sparql
INSERT DATA {
  node:paris a type:City ; prop:name "Paris" ; prop:population 2102650 .
  node:france a type:Country ; prop:name "France" .
  node:paris rel:located_in node:france .
}
```"""
    select = """```sparql
SELECT ?population WHERE { node:paris prop:population ?population }
```"""
    scripted = model(
        decide=[votes("IIIII", "RRRRR")],
        define_tool_calls=[inspect_call(facts_file)],
        update_graph=["```sparql\nINSERT DATA { node:paris prop:name }\n```"],
        fix_code=[insert],
        query=[select],
        math_check=[NO_MATH],
        solve=[solution("2102650")],
    )
    result = run(scripted, settings=rdf)

    assert result.answer == "2102650"
    write_prompt = scripted.calls_for("update_graph")[0].prompt
    assert "SPARQL" in write_prompt and "```sparql" in write_prompt
    [failure] = events(result, "code_failed")
    assert "syntax" in failure["error"].lower()
    [query_result] = events(result, "query_result")
    assert "2102650" in query_result["result"]
    nodes = {node["id"]: node for node in result.graph["nodes"]}
    assert nodes["paris"]["label"] == "City" and nodes["paris"]["population"] == 2102650


@pytest.mark.slow
def test_failing_query_and_maths_are_fixed_with_their_errors(run: Run, facts_file: Path) -> None:
    scripted = model(
        decide=[votes("IIIII", "RRRRR")],
        define_tool_calls=[inspect_call(facts_file)],
        update_graph=[ADD_PARIS],
        query=["```python\nresult = G.nodes['Paris']['population']\n```"],
        fix_query=[QUERY_PARIS],
        math_check=[{"needs_math": True, "reason": "density"}],
        math=["```python\nprint(2102650 / area)\n```"],
        fix_math=["```python\nprint(round(2102650 / 105.4))\n```"],
        solve=[solution("19949")],
    )
    result = run(scripted)

    assert result.answer == "19949"
    assert "KeyError" in scripted.calls_for("fix_query")[0].prompt
    assert "NameError" in scripted.calls_for("fix_math")[0].prompt
    failures = [(e["purpose"], e["attempt"]) for e in events(result, "code_failed")]
    assert failures == [("query", "1.0"), ("math", 1)]


@pytest.mark.slow
def test_gaia_format_rules_reach_the_solution_prompt(
    run: Run, settings: Settings, facts_file: Path
) -> None:
    gaia = settings.model_copy(
        update={"controller": settings.controller.model_copy(update={"gaia_format": True})}
    )
    script = paris_in_one_round(facts_file)
    with_rules = model(**script)
    run(with_rules, settings=gaia)
    without_rules = model(**script)
    run(without_rules)
    assert "no thousands separators" in with_rules.calls_for("solve")[0].prompt
    assert "no thousands separators" not in without_rules.calls_for("solve")[0].prompt


@pytest.mark.slow
def test_unparsable_tool_calls_are_shown_to_the_model(run: Run, facts_file: Path) -> None:
    from langchain_core.messages import AIMessage

    broken = AIMessage(
        content="",
        invalid_tool_calls=[
            {"name": "inspect_file", "args": '{"path": "cit', "id": "c1", "error": "bad JSON"}
        ],
    )
    scripted = model(
        decide=[votes("IIIII", "IIIII", "RRRRR")],
        define_tool_calls=[broken, inspect_call(facts_file)],
        update_graph=[ADD_PARIS],
        query=[QUERY_PARIS],
        math_check=[NO_MATH],
        solve=[solution("2102650")],
    )
    result = run(scripted)

    assert result.answer == "2102650"
    first = events(result, "tool_calls")[0]
    assert first["calls"] == [] and "not valid JSON" in first["rejected"][0]
    second_prompt = scripted.calls_for("define_tool_calls")[1].prompt
    assert "[FAILED] inspect_file" in second_prompt and "not valid JSON" in second_prompt
    assert result.tool_calls == 1  # the botched call never ran


@pytest.mark.slow
def test_a_round_of_votes_all_unusable_alike_stops_the_run(run: Run, facts_file: Path) -> None:
    scripted = model(decide=["I think we should insert."])
    result = run(scripted)

    assert result.status == "failed"
    assert result.resumable  # e.g. with --structured-output prompt
    assert "gave no usable answer in step decide: all 10 requests returned no JSON" in (
        result.error or ""
    )
    assert result.llm_calls == 10  # 5 votes, each re-asked once: one round, not seven
    assert not events(result, "tool_calls")


@pytest.mark.slow
def test_every_solution_sample_failing_fails_the_run_visibly(
    run: Run, settings: Settings, facts_file: Path
) -> None:
    scripted = model(
        decide=[votes("RRRRR")],
        query=["```python\nresult = 'Paris has 2,102,650 inhabitants'\n```"],
        math_check=[NO_MATH],
        solve=["I cannot answer in JSON."],
    )
    result = run(scripted, settings=_going_on_after_invalid_output(settings))

    assert result.status == "failed"
    assert result.answer == ""
    assert "every solution sample failed" in (result.error or "")
    assert not result.resumable  # the run reached its end; resuming would change nothing
    [samples] = events(result, "solutions")
    assert len(samples["samples"]) == 3 and all("failed" in s for s in samples["samples"])


@pytest.mark.slow
def test_an_oversized_answer_is_a_failed_sample_not_the_answer(
    run: Run, settings: Settings
) -> None:
    huge = "Paris," * 1_750_000  # 10.5 MB of model output
    scripted = model(
        decide=[votes("RRRRR")],
        query=["```python\nresult = 'Paris has 2,102,650 inhabitants'\n```"],
        math_check=[NO_MATH],
        solve=[solution(huge), solution("2102650"), solution("2102650")],
    )
    result = run(scripted, run_id="huge-answer")

    assert result.status == "answered"
    assert result.answer == "2102650"
    [samples] = events(result, "solutions")
    [failed] = [s for s in samples["samples"] if "failed" in s]
    assert "10,500,000 characters" in failed["failed"]
    assert "controller.max_answer_chars" in failed["failed"]
    assert len(str(samples)) < 10_000  # the trace does not carry the oversized text


@pytest.mark.slow
def test_every_sample_over_the_answer_cap_fails_the_run_naming_the_setting(
    run: Run, settings: Settings
) -> None:
    capped = settings.model_copy(
        update={"controller": settings.controller.model_copy(update={"max_answer_chars": 100})}
    )
    scripted = model(
        decide=[votes("RRRRR")],
        query=["```python\nresult = 'Paris has 2,102,650 inhabitants'\n```"],
        math_check=[NO_MATH],
        solve=[solution("x" * 101)],
    )
    result = run(scripted, settings=capped, run_id="capped-answer")

    assert result.status == "failed"
    assert result.answer == ""
    assert result.error == (
        "every solution sample failed to produce a valid answer: the answer is 101 characters "
        "long, over the limit of 100 (controller.max_answer_chars; raise it for questions that "
        "need long answers)"
    )
    from kgot.persistence import open_store

    with open_store(settings.store.db) as store:
        record = store.get_run("capped-answer")
    assert record is not None and record.status == "failed" and not record.answer


@pytest.mark.slow
@pytest.mark.parametrize("max_iterations", [1, 2])
def test_worst_case_run_stays_within_the_recursion_limit(
    run: Run, settings: Settings, max_iterations: int
) -> None:
    """Every round inserts, then the forced end needs maths: the longest path a run can take."""
    import asyncio

    from kgot.controller import recursion_limit
    from kgot.persistence import open_checkpointer

    limited = settings.model_copy(
        update={
            "controller": settings.controller.model_copy(update={"max_iterations": max_iterations})
        }
    )
    calls = iter(range(1000))

    def new_call(_: Any) -> Any:  # never a duplicate, so every round runs a tool
        return {"$tool_calls": [{"name": "python", "args": {"code": f"print({next(calls)})"}}]}

    scripted = model(
        decide=[votes("IIIII")],
        define_tool_calls=[new_call],
        update_graph=["```python\nG.add_node(f'n{len(G)}', label='Thing')\n```"],
        query=["```python\nresult = len(G)\n```"],
        math_check=[{"needs_math": True, "reason": "count"}],
        math=["```python\nprint(1 + 1)\n```"],
        solve=[solution("2")],
    )
    result = run(scripted, settings=limited)
    assert result.status == "forced"
    assert result.iterations == max_iterations + 1

    async def supersteps() -> int:
        async with open_checkpointer(limited.store.db) as saver:
            config = {"configurable": {"thread_id": result.run_id}}
            steps = [c.metadata["step"] async for c in saver.alist(config)]
        return max(steps)  # -1 holds the input, 0 the start, then one per node that ran

    taken = asyncio.run(supersteps())
    # Two steps per round (decide with the tools, update_graph), then the forced end:
    # decide/retrieve/math_check/math/solve.
    assert taken == 2 * max_iterations + 5
    assert taken < recursion_limit(limited.controller)


@pytest.mark.slow
def test_attachments_keep_the_name_they_were_given(
    run: Run, tmp_path: Path, facts_file: Path
) -> None:
    blob = tmp_path / "blobs" / "4f1c2a"
    blob.parent.mkdir()
    blob.write_text(facts_file.read_text(encoding="utf-8"), encoding="utf-8")
    link = tmp_path / "snapshot" / "cities.txt"
    link.parent.mkdir()
    link.symlink_to(blob)
    tool_prompt_model = model(
        decide=[votes("IIIII", "RRRRR")],
        define_tool_calls=[
            {"$tool_calls": [{"name": "inspect_file", "args": {"path": "cities.txt"}}]}
        ],
        update_graph=[ADD_PARIS],
        query=[QUERY_PARIS],
        math_check=[NO_MATH],
        solve=[solution("2102650")],
    )
    result = run(tool_prompt_model, attachments=[link])
    assert str(link) in tool_prompt_model.calls_for("define_tool_calls")[0].prompt
    assert "4f1c2a" not in tool_prompt_model.calls_for("define_tool_calls")[0].prompt
    assert events(result, "tool_result")[0]["ok"]
