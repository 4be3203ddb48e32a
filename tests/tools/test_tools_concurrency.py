"""Concurrent calls: shared executions and shared document loads under timeouts and
cancellation (a cancelled caller never takes the others down), and ZIP extraction."""

from __future__ import annotations

import asyncio
import threading
import zipfile
from pathlib import Path

import pytest
from langchain_core.tools import StructuredTool

from kgot.tests.tools.tool_fixtures import (
    LONG_PARAGRAPH,
    Response,
    make_runner,
    tools_settings,
)
from kgot.tools import ToolContext, ToolRunner, web_page
from kgot.tools.paging import Document
from kgot.tools.tool_session import ToolSession


async def _until(condition, *, rounds: int = 1000) -> None:
    """Yield to the event loop until ``condition()`` holds (no wall-clock sleeping)."""
    for _ in range(rounds):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition never became true")


# -- the runner's shared executions ------------------------------------------------------------


def _gated_runner(timeout: float = 5.0):
    state = {"started": 0, "cancelled": 0}
    gate: dict[str, asyncio.Event] = {}

    async def slow(x: int) -> str:
        state["started"] += 1
        try:
            await gate["release"].wait()
        except asyncio.CancelledError:
            state["cancelled"] += 1
            raise
        return f"done {x}"

    runner = ToolRunner(
        [StructuredTool.from_function(coroutine=slow, name="slow", description="waits")],
        timeout=timeout,
        max_output_chars=1000,
    )
    return runner, state, gate


def test_cancelling_one_caller_does_not_cancel_the_shared_execution():
    runner, state, gate = _gated_runner()

    async def scenario():
        gate["release"] = asyncio.Event()
        first = asyncio.create_task(runner.run("slow", {"x": 1}))
        await _until(lambda: state["started"] == 1)
        second = asyncio.create_task(runner.run("slow", {"x": 1}))
        await _until(lambda: runner.waiting("slow", {"x": 1}) == 2)
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        gate["release"].set()
        return await second

    outcome = asyncio.run(scenario())
    assert outcome.ok and outcome.output == "done 1"
    assert state == {"started": 1, "cancelled": 0}


def test_an_execution_nobody_waits_for_is_cancelled():
    runner, state, gate = _gated_runner()

    async def scenario():
        gate["release"] = asyncio.Event()
        only = asyncio.create_task(runner.run("slow", {"x": 2}))
        await _until(lambda: state["started"] == 1)
        only.cancel()
        with pytest.raises(asyncio.CancelledError):
            await only
        await _until(lambda: state["cancelled"] == 1)
        # A new identical call starts afresh rather than joining the abandoned one.
        again = asyncio.create_task(runner.run("slow", {"x": 2}))
        await _until(lambda: state["started"] == 2)
        gate["release"].set()
        return await again

    outcome = asyncio.run(scenario())
    assert outcome.ok and not outcome.cached and outcome.output == "done 2"


@pytest.mark.slow
def test_staggered_identical_calls_under_a_timeout_return_outcomes():
    runner, state, gate = _gated_runner(timeout=0.3)

    async def scenario():
        gate["release"] = asyncio.Event()  # never set: the tool always overruns
        first = asyncio.create_task(runner.run("slow", {"x": 3}))
        await _until(lambda: state["started"] == 1)
        second = asyncio.create_task(runner.run("slow", {"x": 3}))
        return await asyncio.gather(first, second)

    outcomes = asyncio.run(scenario())
    assert [o.error_kind for o in outcomes] == ["timeout", "timeout"]
    assert state == {"started": 1, "cancelled": 1}


# -- the session's shared document loads -------------------------------------------------------


def test_cancelling_one_reader_of_a_shared_load_leaves_the_others_reading():
    session = ToolSession(ToolContext(settings=tools_settings()))
    calls = {"loads": 0}

    async def scenario():
        release = asyncio.Event()

        async def load() -> Document:
            calls["loads"] += 1
            await release.wait()
            return Document(source_ref="mem:1", text="shared text")

        first = asyncio.create_task(session.document("k", load, again="t(page={page})"))
        await _until(lambda: calls["loads"] == 1)
        second = asyncio.create_task(session.document("k", load, again="t(page={page})"))
        await _until(lambda: session.readers("k") == 2)
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        release.set()
        return await second

    document = asyncio.run(scenario())
    assert document.text == "shared text" and calls["loads"] == 1


@pytest.mark.slow
def test_staggered_visits_of_a_slow_page_both_time_out_without_raising(server):
    arrived = threading.Event()

    def hang(request):
        arrived.set()
        server.release.wait(30)
        return Response(200, "<html><body><p>late</p></body></html>")

    server.route("/slow", hang)
    runner = make_runner(ToolContext(settings=tools_settings(server, timeout=0.5)))

    async def scenario():
        first = asyncio.create_task(runner.run("visit_page", {"url": server.url("/slow")}))
        await asyncio.to_thread(arrived.wait, 10)
        second = asyncio.create_task(
            runner.run("visit_page", {"url": server.url("/slow"), "find": "late"})
        )
        return await asyncio.gather(first, second)  # the controller gathers tool calls

    outcomes = asyncio.run(scenario())
    assert [o.error_kind for o in outcomes] == ["timeout", "timeout"]
    assert server.hits["/slow"] == 1  # the second call shared the first one's download


@pytest.mark.slow
def test_a_reader_that_outlives_the_first_readers_timeout_gets_the_page(server):
    arrived, proceed = threading.Event(), threading.Event()
    body = f"<html><body><article><p>{LONG_PARAGRAPH} Herons wait.</p></article></body></html>"

    def held(request):
        arrived.set()
        proceed.wait(30)
        return Response(200, body)

    server.route("/held", held)
    session = ToolSession(ToolContext(settings=tools_settings(server, timeout=5)))
    tool = web_page.SPEC.make(session)
    hurried = ToolRunner([tool], timeout=0.3, max_output_chars=4000)
    patient = ToolRunner([tool], timeout=5, max_output_chars=4000)

    async def scenario():
        # The hurried call starts the download; the patient one joins it, then the hurried
        # one times out: the download must go on for the patient one.
        first = asyncio.create_task(hurried.run("visit_page", {"url": server.url("/held")}))
        await asyncio.to_thread(arrived.wait, 10)
        second = asyncio.create_task(
            patient.run("visit_page", {"url": server.url("/held"), "find": "wait"})
        )
        await _until(lambda: session.readers() == 2)
        timed_out = await first
        proceed.set()
        return timed_out, await second

    timed_out, found = asyncio.run(scenario())
    assert timed_out.error_kind == "timeout"
    assert found.ok, found.output
    assert "Herons wait." in found.output
    assert server.hits["/held"] == 1


# -- ZIP members ------------------------------------------------------------------------------


def _zip(path: Path, members: dict[str, bytes], method: int = zipfile.ZIP_DEFLATED) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", method) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def test_same_named_archives_do_not_share_extracted_members(tmp_path):
    one = _zip(tmp_path / "web" / "a.zip", {"x/data.txt": b"first archive says 1"})
    two = _zip(tmp_path / "web" / "other" / "a.zip", {"x/data.txt": b"second archive says 2"})
    runner = make_runner(ToolContext(settings=tools_settings(), attachments=(one, two)))

    async def both():
        first = await runner.run("inspect_file", {"path": str(one), "member": "x/data.txt"})
        second = await runner.run("inspect_file", {"path": str(two), "member": "x/data.txt"})
        return first, second

    first, second = asyncio.run(both())
    assert "first archive says 1" in first.output
    assert "second archive says 2" in second.output
    assert first.source_ref != second.source_ref


def test_a_changed_archive_is_extracted_again(tmp_path):
    archive = _zip(tmp_path / "a.zip", {"data.txt": b"version one"})
    runner = make_runner(ToolContext(settings=tools_settings(), attachments=(archive,)))
    first = asyncio.run(runner.run("inspect_file", {"path": "a.zip", "member": "data.txt"}))
    assert "version one" in first.output
    _zip(archive, {"data.txt": b"version two, longer"})
    runner.clear_cache()
    second = asyncio.run(runner.run("inspect_file", {"path": "a.zip", "member": "data.txt"}))
    assert "version two, longer" in second.output, second.output


def test_concurrent_extractions_of_one_member_all_succeed(tmp_path):
    rows = "".join(f"row {i}, value {i * 7}\n" for i in range(150_000)).encode()
    archive = _zip(tmp_path / "big.zip", {"rows.txt": rows, "small.txt": b"x"}, zipfile.ZIP_STORED)
    settings = tools_settings(max_download_mb=50, max_output_chars=3000, timeout=60)
    runner = make_runner(ToolContext(settings=settings, attachments=(archive,)))

    async def together():
        calls = [{"page": page} for page in (1, 2, 3, 4)] + [{"find": "row 149999,"}]
        return await asyncio.gather(
            *(
                runner.run("inspect_file", {"path": "big.zip", "member": "rows.txt", **extra})
                for extra in calls
            ),
            runner.run("inspect_file", {"path": "big.zip", "member": "small.txt"}),
        )

    outcomes = asyncio.run(together())
    assert all(o.ok for o in outcomes), [o.output[:200] for o in outcomes]
    assert "value 1049993" in outcomes[4].output
    extracted = Path(outcomes[0].source_ref)
    assert extracted.read_bytes() == rows
    assert not list(extracted.parent.rglob("*.part"))  # no partial files left behind


def test_threads_extracting_one_member_at_once_all_get_the_whole_file(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    from kgot.tools.reading import extract_member

    data = "".join(f"line {i}\n" for i in range(300_000)).encode()
    archive = _zip(tmp_path / "data.zip", {"data.txt": data}, zipfile.ZIP_STORED)
    session = ToolSession(ToolContext(settings=tools_settings(max_download_mb=20)))
    start = threading.Barrier(4)

    def extract() -> Path:
        start.wait()
        return extract_member(session, archive, "data.txt", name="data.zip")

    with ThreadPoolExecutor(4) as pool:
        targets = list(pool.map(lambda _: extract(), range(4)))
    assert len(set(targets)) == 1
    assert targets[0].read_bytes() == data
    assert [p.name for p in targets[0].parent.iterdir()] == ["data.txt"]  # no partial files
