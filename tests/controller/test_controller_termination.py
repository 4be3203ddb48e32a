"""Runs stopped from outside: SIGTERM is handled like Ctrl-C; after SIGKILL a later kgot process
records the run as interrupted and removes the tool directory it left. Real processes, a
scripted model file, each process's temporary directory pointed at one the test watches."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from kgot.config import Settings, load_settings
from kgot.controller import is_resumable, resume_async
from kgot.errors import UsageError
from kgot.llm.scripted import ScriptedChatModel
from kgot.persistence import open_store
from kgot.persistence.owner import Owner, current_owner, owner_state
from kgot.tests.controller.test_controller_cli import VOTE_INSERT, _env, _script, _wait_for, kgot
from kgot.tools.workspace_owner import (
    PREFIX,
    make_owned_temp_dir,
    remove_owned_temp_dir,
    remove_stale_workspaces,
)

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="signals and /proc are Linux's")

# Round 1 writes a file the python tool keeps (so the run has a tool directory); round 2 hangs.
_TWO_ROUNDS = {
    "decide": [VOTE_INSERT],
    "define_tool_calls": [
        {"$tool_calls": [{"name": "python", "args": {"code": "open('/work/out/n.txt', 'w')"}}]},
        {"$tool_calls": [{"name": "python", "args": {"code": "import time; time.sleep(60)"}}]},
    ],
    "update_graph": ["```python\npass\n```"],
}


def _tool_dirs(scratch: Path) -> list[Path]:
    return sorted(p for p in scratch.iterdir() if p.name.startswith(PREFIX))


def _start_hanging_run(tmp_path: Path, scratch: Path, run_id: str) -> subprocess.Popen[str]:
    """`kgot ask` in round 2's hanging tool call, its tool directory in ``scratch``."""
    config = tmp_path / "short.toml"
    config.write_text("[sandbox]\ntimeout = 20\n", encoding="utf-8")
    env = _env(tmp_path, KGOT_CONFIG=str(config), TMPDIR=str(scratch))
    command = [sys.executable, "-m", "kgot", "ask", "--trace", "--run-id", run_id]
    command += ["--model", _script(tmp_path, "two.json", _TWO_ROUNDS), "Where is Paris?"]
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    _wait_for(process, "⚙ python", timeout=90)  # round 1
    _wait_for(process, "⚙ python", timeout=90)  # round 2: round 1's file is in the workspace
    return process


def _status(tmp_path: Path, run_id: str) -> str:
    with open_store(str(tmp_path / "kgot.db")) as store:
        record = store.get_run(run_id)
    assert record is not None
    return record.status


@pytest.mark.slow
def test_sigterm_stops_a_run_like_ctrl_c(tmp_path: Path) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    process = _start_hanging_run(tmp_path, scratch, "term-run")
    try:
        assert len(_tool_dirs(scratch)) == 1  # the run's tool directory, before the signal
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()

    assert process.returncode == 128 + signal.SIGTERM, stderr
    assert "Traceback" not in stderr
    assert "kgot ask --resume term-run" in stderr
    assert _status(tmp_path, "term-run") == "interrupted"
    assert _tool_dirs(scratch) == []
    settings = load_settings({"store.db": str(tmp_path / "kgot.db")}, environ={})
    assert asyncio.run(is_resumable("term-run", settings))


@pytest.mark.slow
def test_after_sigkill_runs_list_marks_the_run_interrupted_and_removes_its_tool_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    process = _start_hanging_run(tmp_path, scratch, "killed-run")
    process.kill()
    process.communicate(timeout=30)
    assert _status(tmp_path, "killed-run") == "running"  # nobody was left to say otherwise
    [left] = _tool_dirs(scratch)
    # A live process's run and tool directory, which must survive the clean-up.
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    live_dir, lock = make_owned_temp_dir()
    with open_store(str(tmp_path / "kgot.db")) as store:
        store.start_run("live-run", "Still going?", None, {})

    listed = kgot(tmp_path, "runs", "list", "--json", TMPDIR=str(scratch))

    assert listed.returncode == 0, listed.stderr
    statuses = {run["run_id"]: run["status"] for run in json.loads(listed.stdout)}
    assert statuses == {"killed-run": "interrupted", "live-run": "running"}
    assert not left.exists()
    assert _tool_dirs(scratch) == [live_dir]
    remove_owned_temp_dir(live_dir, lock)


def test_a_tool_dir_is_removed_only_once_its_process_is_gone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    mine, lock = make_owned_temp_dir()
    unlocked = tmp_path / f"{PREFIX}older-kgot"  # no lock file: never judged dead
    unlocked.mkdir()
    assert remove_stale_workspaces() == []
    os.close(lock)  # what the kernel does when the process dies
    assert remove_stale_workspaces() == [mine]
    assert _tool_dirs(tmp_path) == [unlocked]


def test_owners_are_judged_only_when_they_can_be() -> None:
    me = Owner.parse(current_owner())
    assert me is not None and owner_state(str(me)) == "alive"
    gone_pid = _a_pid_nobody_uses()
    assert owner_state(str(Owner(me.host, me.boot_id, gone_pid, "1"))) == "gone"
    # Our pid, started at another moment: a reused pid, its first owner gone.
    assert owner_state(str(Owner(me.host, me.boot_id, me.pid, "1"))) == "gone"
    assert owner_state(str(Owner(me.host, "another-boot", me.pid, me.started))) == "gone"
    assert owner_state(str(Owner(f"not-{socket.gethostname()}", me.boot_id, 1, "1"))) == "unknown"
    assert owner_state(None) == owner_state("garbage") == "unknown"


def _a_pid_nobody_uses() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid  # reaped: nothing has this pid until the kernel hands it out again


def _interrupt(_: Any) -> Any:
    raise KeyboardInterrupt


@pytest.mark.slow
def test_a_run_still_running_elsewhere_is_not_resumed_twice(store_settings: Settings) -> None:
    settings = store_settings
    from kgot.controller import ask_async
    from kgot.tests.controller.scripts import votes

    first = ScriptedChatModel(script={"decide": [votes("RRRRR")], "query": [_interrupt]})
    models: dict[str, Any] = {"planning": first, "execution": first}
    with pytest.raises(KeyboardInterrupt):
        asyncio.run(ask_async("Q?", settings=settings, run_id="busy", models=models))
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        from kgot.persistence.owner import _start_time

        me = Owner.parse(current_owner())
        assert me is not None
        owner = str(Owner(me.host, me.boot_id, other.pid, _start_time(other.pid)))
        _record_running(settings, "busy", owner)
        idle = ScriptedChatModel(script={})
        with pytest.raises(UsageError, match=rf"run busy is still running \(process {other.pid}"):
            asyncio.run(
                resume_async(
                    "busy", settings=settings, models={"planning": idle, "execution": idle}
                )
            )
    finally:
        other.kill()
        other.wait()
    # Its process gone, the run counts as interrupted and resumes.
    again = ScriptedChatModel(
        script={
            "query": ["```python\nresult = 1\n```"],
            "math_check": [{"needs_math": False, "reason": "-"}],
            "solve": [{"answer": "1", "reasoning": "-"}],
        }
    )
    result = asyncio.run(
        resume_async("busy", settings=settings, models={"planning": again, "execution": again})
    )
    assert result.answer == "1"


def _record_running(settings: Settings, run_id: str, owner: str) -> None:
    from sqlalchemy import update

    from kgot.persistence.schema import TABLES

    with open_store(settings.store.db) as store, store.write() as connection:
        runs = TABLES.runs
        connection.execute(
            update(runs).where(runs.c.run_id == run_id).values(status="running", owner=owner)
        )


_ANSWER_ONE = {
    "math_check": [{"needs_math": False, "reason": "-"}],
    "solve": [{"answer": "1", "reasoning": "-"}],
}


def _retrieving(query: Any) -> ScriptedChatModel:
    """A model that retrieves at once; ``query`` answers the query step."""
    from kgot.tests.controller.scripts import votes

    return ScriptedChatModel(script={"decide": [votes("RRRRR")], "query": [query], **_ANSWER_ONE})


def _handlers() -> tuple[Any, Any]:
    return signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGHUP)


@pytest.mark.slow
def test_the_python_api_leaves_the_hosts_signals_alone(settings: Settings) -> None:
    from kgot.controller import ask_async

    assert _handlers() == (signal.SIG_DFL, signal.SIG_DFL)  # as a host program left them
    seen: list[tuple[Any, Any]] = []

    def query(_: Any) -> str:
        seen.append(_handlers())
        return "```python\nresult = 1\n```"

    model = _retrieving(query)
    result = asyncio.run(
        ask_async("Q?", settings=settings, models={"planning": model, "execution": model})
    )

    assert result.answer == "1"
    assert seen and set(seen) == {(signal.SIG_DFL, signal.SIG_DFL)}
    assert _handlers() == (signal.SIG_DFL, signal.SIG_DFL)


@pytest.mark.slow
def test_the_python_api_stops_on_sigterm_when_asked(settings: Settings) -> None:
    from kgot.controller import RunTerminated, ask_async

    def query(_: Any) -> str:
        assert _handlers() != (signal.SIG_DFL, signal.SIG_DFL)  # taken over for the run
        os.kill(os.getpid(), signal.SIGTERM)
        return "```python\nresult = 1\n```"

    model = _retrieving(query)
    with pytest.raises(RunTerminated) as stopped:
        asyncio.run(
            ask_async(
                "Q?",
                settings=settings,
                run_id="asked",
                models={"planning": model, "execution": model},
                handle_signals=True,
            )
        )

    assert stopped.value.signum == signal.SIGTERM
    assert _handlers() == (signal.SIG_DFL, signal.SIG_DFL)  # given back after the run
    with open_store(settings.store.db) as store:
        record = store.get_run("asked")
    assert record is not None and record.status == "interrupted"


@pytest.mark.slow
def test_two_threads_resuming_one_run_are_refused_but_one(settings: Settings) -> None:
    import threading

    from kgot.controller import ask_async

    first = _retrieving(_interrupt)
    with pytest.raises(KeyboardInterrupt):
        asyncio.run(
            ask_async(
                "Q?",
                settings=settings,
                run_id="shared",
                models={"planning": first, "execution": first},
            )
        )
    inside, release = threading.Event(), threading.Event()

    def query(_: Any) -> str:
        inside.set()
        release.wait(60)  # the other resume is tried while this one runs
        return "```python\nresult = 1\n```"

    slow = _retrieving(query)
    outcome: list[Any] = []

    def resume_in_thread() -> None:
        try:
            outcome.append(
                asyncio.run(
                    resume_async(
                        "shared", settings=settings, models={"planning": slow, "execution": slow}
                    )
                )
            )
        except BaseException as error:  # reported by the assertion below
            outcome.append(error)

    worker = threading.Thread(target=resume_in_thread)
    worker.start()
    try:
        assert inside.wait(60)
        idle = ScriptedChatModel(script={})
        with pytest.raises(UsageError, match="run shared is still running in this process"):
            asyncio.run(
                resume_async(
                    "shared", settings=settings, models={"planning": idle, "execution": idle}
                )
            )
    finally:
        release.set()
        worker.join(60)
    [result] = outcome
    assert not isinstance(result, BaseException), result
    assert result.answer == "1"
