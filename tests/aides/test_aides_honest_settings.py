"""Aide settings that say what they do (issue 27, items 11-13): `aide items` counts an item's
ingestion attempts apart from the graph-code attempts inside one, in correct grammar;
`--cron` waits for its first matching time unless `--now` asks for a cycle at start-up; a
webhook's `--secret-env` naming an unset variable is refused when the output is added, and a
delivery that finds it unset is not sent unsigned. Through the real `kgot` entry point, on
SQLite and PostgreSQL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from kgot.aides import aide_rows, open_aide
from kgot.cli.aide_cmd import parse_schedule
from kgot.config import load_settings
from kgot.errors import UsageError
from kgot.persistence import open_store
from kgot.tests.aides.aide_scripts import BROKEN, inbox
from kgot.tests.aides.test_aides_outputs import Receiver
from kgot.tests.support.command_line import refused, run_cli
from kgot.tests.tools.tool_fixtures import FixtureServer

# A note whose graph code never passes: every ingestion of it fails.
FAILING = {"update_graph": [BROKEN], "fix_code": [BROKEN]}


@pytest.fixture
def web() -> Iterator[FixtureServer]:
    fixture = FixtureServer()
    yield fixture
    fixture.close()


def _aide(capsys: pytest.CaptureFixture[str], store_url: str, folder: Path) -> tuple[str, ...]:
    db = ("--db", store_url)
    assert run_cli(capsys, "aide", "create", "research", "--entity", "acme", *db)[0] == 0
    assert run_cli(capsys, "aide", "source", "add", "research", "--dir", str(folder), *db)[0] == 0
    return db


# ---------------------------------------------------------------------------- item 11: grammar


@pytest.mark.slow
def test_items_count_ingestion_attempts_apart_from_code_attempts(
    tmp_path: Path, store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "broken.json"
    script.write_text(json.dumps(FAILING), encoding="utf-8")
    db = _aide(capsys, store_url, inbox(tmp_path / "inbox", ["acme.md"]))
    run = ("aide", "run", "research", "--once", "--model", f"scripted:{script}", *db)

    assert run_cli(capsys, *run)[0] == 0
    code, out, err = run_cli(capsys, "aide", "items", "research", *db)
    assert code == 0, err
    # One ingestion attempt of three, its reason counting the code and its 3 fixes.
    assert out.startswith(
        "failed (1 of 3 ingestion attempts; tried again next cycle) 'acme.md' "
    ), out
    assert ": gave up after 4 attempts at the graph code: " in out
    assert "1 attempts" not in out and "given up" not in out

    for _ in range(aide_rows.MAX_ATTEMPTS - 1):
        assert run_cli(capsys, *run)[0] == 0
    code, out, _ = run_cli(capsys, "aide", "items", "research", "--status", "failed", *db)
    assert out.startswith("failed (3 of 3 ingestion attempts; given up) 'acme.md' "), out
    assert out.rstrip().endswith("(the item was given up after 3 ingestion attempts)"), out


def test_a_done_item_says_one_ingestion_attempt() -> None:
    assert aide_rows.attempts_note("done", 1) == "1 ingestion attempt"
    assert aide_rows.attempts_note("done", 2) == "2 ingestion attempts"
    assert aide_rows.attempts_note("new", 0) == "not tried yet"
    assert aide_rows.attempts_note("failed", 2) == (
        "2 of 3 ingestion attempts; tried again next cycle"
    )


# ---------------------------------------------------------------------------- item 13: --cron


def test_cron_starts_at_its_next_matching_time_unless_now_is_asked() -> None:
    at = datetime(2026, 3, 4, 10, 7, 30, tzinfo=UTC)
    cron = parse_schedule(cron="*/15 * * * *")
    assert cron is not None and not cron.at_start
    assert cron.first(at) == datetime(2026, 3, 4, 10, 15, tzinfo=UTC)
    assert cron.after(datetime(2026, 3, 4, 10, 15, 2, tzinfo=UTC)) == datetime(
        2026, 3, 4, 10, 30, tzinfo=UTC
    )
    now = parse_schedule(cron="*/15 * * * *", run_now=True)
    assert now is not None and now.first(at) == at
    every = parse_schedule(every="1h")
    assert every is not None and every.first(at) == at
    assert every.after(at) == datetime(2026, 3, 4, 11, 7, 30, tzinfo=UTC)
    assert parse_schedule(once=True) is None
    with pytest.raises(UsageError, match="--now goes with --cron"):
        parse_schedule(every="1h", run_now=True)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("schedule", "message"),
    [
        (("--once", "--now"), "--now goes with --cron; --once runs its first cycle at start-up"),
        (("--every", "1h", "--now"), "--now goes with --cron; --every runs its first cycle"),
    ],
)
def test_now_without_cron_is_refused(
    tmp_path: Path,
    store_url: str,
    capsys: pytest.CaptureFixture[str],
    schedule: tuple[str, ...],
    message: str,
) -> None:
    db = _aide(capsys, store_url, inbox(tmp_path / "inbox", ["acme.md"]))
    refused(run_cli(capsys, "aide", "run", "research", *schedule, *db), message)
    code, out, _ = run_cli(capsys, "aide", "status", "research", "--json", *db)
    assert code == 0 and json.loads(out)["cycles"] == []


def _worker(store_url: str, *schedule: str) -> subprocess.Popen[str]:
    db = ("--db", store_url)
    return subprocess.Popen(
        [sys.executable, "-m", "kgot", "aide", "run", "research", *schedule, "--json", *db],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )


def _line(stream: object, wanted: str, worker: subprocess.Popen[str]) -> str:
    """The first line of ``stream`` holding ``wanted`` (the worker's own pipe, read as it
    writes)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = stream.readline()  # type: ignore[attr-defined]
        if wanted in line:
            return str(line)
        if not line and worker.poll() is not None:
            break
    worker.kill()
    raise AssertionError(f"the worker never wrote {wanted!r} (exit {worker.poll()})")


@pytest.mark.slow
@pytest.mark.parametrize("now", [False, True])
def test_the_cron_worker_runs_at_start_up_only_with_now(
    tmp_path: Path, store_url: str, capsys: pytest.CaptureFixture[str], now: bool
) -> None:
    """An empty aide (no source: a cycle needs no model) on a cron schedule of once a year:
    without --now the worker says when its first cycle is and runs none; with --now it runs
    one at once. SIGTERM then stops it as ever (143)."""
    db = ("--db", store_url)
    assert run_cli(capsys, "aide", "create", "research", "--entity", "acme", *db)[0] == 0
    schedule = ("--cron", "0 0 1 1 *", *(["--now"] if now else []))
    worker = _worker(store_url, *schedule)
    try:
        if now:
            cycle = json.loads(_line(worker.stdout, '"cycle_id"', worker))
            assert cycle["aide"] == "research"
            waiting = _line(worker.stderr, "next cycle at", worker)
        else:
            waiting = _line(worker.stderr, "first cycle at", worker)
            assert "--now runs one at start-up" in waiting
        assert "-01-01T00:00:00+00:00 (--cron '0 0 1 1 *'" in waiting
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=60) == 128 + signal.SIGTERM
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
    code, out, _ = run_cli(capsys, "aide", "status", "research", "--json", *db)
    assert code == 0
    assert len(json.loads(out)["cycles"]) == (1 if now else 0)


# ---------------------------------------------------------------------------- item 12: secrets


@pytest.mark.slow
def test_a_secret_variable_that_is_not_set_is_refused_when_the_output_is_added(
    tmp_path: Path,
    store_url: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("KGOT_TEST_HOOK_SECRET", raising=False)
    monkeypatch.setenv("KGOT_TEST_EMPTY_SECRET", "")
    monkeypatch.delenv("KGOT_TEST_MAIL_PASSWORD", raising=False)
    db = _aide(capsys, store_url, inbox(tmp_path / "inbox", ["acme.md"]))
    hook = ("aide", "output", "add", "research", "--webhook", "https://hooks.example/x")
    refused(
        run_cli(capsys, *hook, "--secret-env", "KGOT_TEST_HOOK_SECRET", *db),
        "--secret-env KGOT_TEST_HOOK_SECRET: the variable KGOT_TEST_HOOK_SECRET is not set in "
        "this environment; set it to the webhook's signing secret first "
        "(export KGOT_TEST_HOOK_SECRET=…",
    )
    refused(
        run_cli(capsys, *hook, "--secret-env", "KGOT_TEST_EMPTY_SECRET", *db),
        "the variable KGOT_TEST_EMPTY_SECRET is not set",
    )
    mail = ("--smtp", "smtp://127.0.0.1:2525", "--to", "a@example.com", "--from", "k@example.com")
    refused(
        run_cli(
            capsys,
            *("aide", "output", "add", "research", *mail, "--username", "kgot"),
            *("--password-env", "KGOT_TEST_MAIL_PASSWORD", *db),
        ),
        "--password-env KGOT_TEST_MAIL_PASSWORD: the variable KGOT_TEST_MAIL_PASSWORD is not set",
    )
    code, out, _ = run_cli(capsys, "aide", "output", "list", "research", "--json", *db)
    assert code == 0 and json.loads(out) == []  # nothing half-added

    monkeypatch.setenv("KGOT_TEST_HOOK_SECRET", "s3cret")
    code, out, err = run_cli(capsys, *hook, "--secret-env", "KGOT_TEST_HOOK_SECRET", *db)
    assert code == 0 and out.startswith("added webhook output"), err


@pytest.mark.slow
def test_a_delivery_whose_secret_went_missing_fails_unsent_then_goes_out_signed(
    tmp_path: Path,
    store_url: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    web: FixtureServer,
) -> None:
    script = tmp_path / "script.json"
    script.write_text(
        json.dumps(
            {
                "update_graph": [
                    '```python\nG.add_node("acme", label="Organization", name="Acme")\n```'
                ],
                "query": ["```python\nresult = sorted(G.nodes)\n```"],
                "digest": ["- Acme [node:acme]"],
            }
        ),
        encoding="utf-8",
    )
    receiver = Receiver("s3cret", [])
    db = _aide(capsys, store_url, inbox(tmp_path / "inbox", ["acme.md"]))
    monkeypatch.setenv("KGOT_TEST_HOOK_SECRET", "s3cret")
    hook = ("--webhook", web.route("/hook", receiver), "--secret-env", "KGOT_TEST_HOOK_SECRET")
    assert run_cli(capsys, "aide", "output", "add", "research", *hook, *db)[0] == 0

    monkeypatch.delenv("KGOT_TEST_HOOK_SECRET")  # the worker's environment lacks it
    run = ("aide", "run", "research", "--once", "--json", "--model", f"scripted:{script}", *db)
    code, out, err = run_cli(capsys, *run)
    assert code == 0, err
    [delivery] = json.loads(out)["deliveries"]
    assert delivery["ok"] is False
    assert "the webhook secret variable KGOT_TEST_HOOK_SECRET is not set" in delivery["error"]
    assert "KGOT_TEST_HOOK_SECRET is not set" in err  # logged for the operator too
    assert receiver.seen == []  # never sent unsigned

    # Kept for a later try, which signs it once the variable is back.
    monkeypatch.setenv("KGOT_TEST_HOOK_SECRET", "s3cret")
    with open_store(store_url) as store:
        aide = open_aide(store, "research", settings=load_settings({"store.db": store_url}))
        later = aide.run_cycle(now=datetime.now(UTC) + timedelta(days=1))
    assert [d["ok"] for d in later.deliveries] == [True]
    assert receiver.verified == [True]
