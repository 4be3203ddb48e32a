"""ToolRunner: unknown tools, validation, caching, single flight, deadlines, output caps."""

from __future__ import annotations

import asyncio
import threading
from typing import Annotated

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import StructuredTool
from pydantic import Field

from kgot.tests.tools.tool_fixtures import (
    ARTICLE_TEXT,
    Response,
    call,
    make_runner,
    tools_settings,
)
from kgot.tools import ToolContext, ToolRunner, build_tools
from kgot.tools.base import ToolResult
from kgot.tools.spec import ToolArgs, ToolSpec


def test_unknown_tool_lists_the_available_ones():
    runner = make_runner(ToolContext(settings=tools_settings()))
    outcome = call(runner, "browse", url="x")
    assert not outcome.ok and outcome.error_kind == "unknown_tool"
    assert "no tool named 'browse'" in outcome.output
    assert "inspect_file, visit_page, web_search, wikipedia" in outcome.output


def test_missing_and_wrong_arguments(server):
    runner = make_runner(ToolContext(settings=tools_settings(server)))
    missing = call(runner, "visit_page")
    assert not missing.ok and missing.error_kind == "input"
    assert "`url`: Field required" in missing.output
    wrong = call(runner, "visit_page", url=server.url("/"), page="two")
    assert "`page`" in wrong.output and "url (string, required)" in wrong.output
    assert server.hits == {}  # nothing ran


def test_canonical_cache_key_fills_defaults_and_ignores_order(server):
    server.page("/a", f"<html><body><article><p>{ARTICLE_TEXT}</p></article></body></html>")
    runner = make_runner(ToolContext(settings=tools_settings(server)))
    first = call(runner, "visit_page", url=server.url("/a"))
    same = asyncio.run(
        runner.run("visit_page", {"page": 1, "url": server.url("/a"), "full_page": False})
    )
    assert first.ok and not first.cached
    assert same.cached and same.output == first.output and same.duration_ms == 0
    assert same.args == {"page": 1, "url": server.url("/a"), "full_page": False}
    assert server.hits["/a"] == 1
    runner.clear_cache()
    assert not call(runner, "visit_page", url=server.url("/a")).cached


def test_concurrent_identical_calls_run_once(server):
    arrived, proceed = threading.Event(), threading.Event()

    def slow(request):
        arrived.set()
        proceed.wait(10)  # held until the second call is surely waiting
        return Response(200, f"<html><body><article><p>{ARTICLE_TEXT}</p></article></body></html>")

    server.route("/once", slow)
    runner = make_runner(ToolContext(settings=tools_settings(server)))

    async def both():
        first = asyncio.create_task(runner.run("visit_page", {"url": server.url("/once")}))
        second = asyncio.create_task(runner.run("visit_page", {"url": server.url("/once")}))
        await asyncio.to_thread(arrived.wait, 10)
        proceed.set()
        return await asyncio.gather(first, second)

    first, second = asyncio.run(both())
    assert first.ok and second.ok and first.output == second.output
    assert (first.cached, second.cached) == (False, True)
    assert server.hits["/once"] == 1


def test_output_cap_with_notice_and_hint():
    long_tool = StructuredTool.from_function(
        func=lambda: "line of text\n" * 1000,
        name="chatty",
        description="prints a lot",
        metadata={"kgot_more_hint": "ask for page=2"},
    )
    runner = ToolRunner([long_tool], timeout=5, max_output_chars=1000)
    outcome = call(runner, "chatty")
    assert outcome.ok and len(outcome.output) <= 1000
    assert outcome.truncated_chars > 11_000
    assert (
        f"[output truncated: {outcome.truncated_chars:,} more characters not shown; to get "
        "more, ask for page=2]" in outcome.output
    )


def test_timeout_and_bugs_become_outcomes():
    async def forever() -> str:
        await asyncio.sleep(3600)
        return "never"

    def broken() -> str:
        raise KeyError("boom")

    runner = ToolRunner(
        [
            StructuredTool.from_function(coroutine=forever, name="forever", description="x"),
            StructuredTool.from_function(func=broken, name="broken", description="x"),
        ],
        timeout=0.2,
        max_output_chars=1000,
    )
    stuck = call(runner, "forever")
    assert not stuck.ok and stuck.error_kind == "timeout" and "0.2 s" in stuck.output
    bug = call(runner, "broken")
    assert not bug.ok and bug.error_kind == "internal" and "KeyError" in bug.output
    assert not call(runner, "broken").cached  # failures are never cached


def test_build_tools_leaves_out_what_cannot_run():
    names = {tool.name for tool in build_tools(ToolContext(settings=tools_settings()))}
    assert names == {"web_search", "visit_page", "wikipedia", "inspect_file"}
    limited = tools_settings(enabled=["wikipedia", "visit_page"], disabled=["visit_page"])
    assert [t.name for t in build_tools(ToolContext(settings=limited))] == ["wikipedia"]


def test_tools_carry_json_schema_for_the_model():
    tool = next(
        t for t in build_tools(ToolContext(settings=tools_settings())) if t.name == "visit_page"
    )
    from langchain_core.utils.function_calling import convert_to_openai_tool

    spec = convert_to_openai_tool(tool)["function"]
    assert spec["name"] == "visit_page" and "find=" in spec["description"]
    assert spec["parameters"]["required"] == ["url"]
    assert spec["parameters"]["properties"]["page"]["minimum"] == 1


def test_foreign_tool_errors_keep_their_message():
    from langchain_core.tools import ToolException

    from kgot.errors import ToolError

    def refuses(kind: str) -> str:
        if kind == "kgot":
            raise ToolError("type Person has no property 'age'; use 'birth_date'")
        raise ToolException("quota exhausted; try tomorrow")

    runner = ToolRunner(
        [StructuredTool.from_function(func=refuses, name="refuses", description="x")],
        timeout=5,
        max_output_chars=1000,
    )
    kgot_style = call(runner, "refuses", kind="kgot")
    assert not kgot_style.ok and kgot_style.error_kind == "input"
    assert kgot_style.output == "Error: type Person has no property 'age'; use 'birth_date'"
    langchain_style = call(runner, "refuses", kind="langchain")
    assert langchain_style.output == "Error: quota exhausted; try tomorrow"


def test_abandoned_blocking_work_does_not_hold_up_exit():
    import subprocess
    import sys

    script = (
        "import asyncio, threading\n"
        "from kgot.daemon_threads import run_blocking\n"
        "never = threading.Event()\n"
        "async def main():\n"
        "    try:\n"
        "        await asyncio.wait_for(run_blocking(never.wait), 0.05)\n"
        "    except TimeoutError:\n"
        "        print('abandoned')\n"
        "asyncio.run(main())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], check=False, capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "abandoned"


def test_kgot_tools_get_validated_values_and_foreign_tools_keep_langchain_injection():
    """kgot's own tools are called directly with the validated values; a foreign tool still
    goes through LangChain, which injects what the tool asks for (here its run config)."""

    class CountArgs(ToolArgs):
        word: Annotated[str, Field(min_length=1)]
        times: int = 2

    seen: list[tuple[object, object]] = []

    def build(session: object):
        async def repeat(word: str, times: int) -> ToolResult:
            seen.append((word, times))
            return ToolResult(" ".join([word] * times), source_ref="memo:1")

        return repeat

    native = ToolSpec(
        name="repeat", description="x", args_schema=CountArgs, more_hint="-", build=build
    ).make(None)  # type: ignore[arg-type]

    def configured(text: str, config: RunnableConfig) -> str:
        return f"{text} via {type(config).__name__}"

    foreign = StructuredTool.from_function(func=configured, name="configured", description="x")
    runner = ToolRunner([native, foreign], timeout=5, max_output_chars=1000)
    outcome = call(runner, "repeat", word="ab", times="3")
    assert outcome.ok and outcome.output == "ab ab ab" and outcome.source_ref == "memo:1"
    assert seen == [("ab", 3)]  # the string "3" arrived as the integer 3
    assert call(runner, "repeat", word="cd").output == "cd cd"  # the schema's default
    blank = call(runner, "repeat", word="  ")
    assert not blank.ok and blank.error_kind == "input" and len(seen) == 2
    assert call(runner, "configured", text="hi").output == "hi via dict"
