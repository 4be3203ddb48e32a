"""`kgot aide run` stopped by a signal: it stops within moments, whatever it was doing (an
item's slow model call, a webhook that never answers), starts nothing new (no program stage),
gives the item back with its attempt uncounted, records the cycle as stopped and exits 128 +
the signal's number, as `kgot ask` does."""

from __future__ import annotations

import http.server
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from kgot.aides import aide_rows, create_aide
from kgot.config import Settings
from kgot.persistence import Store
from kgot.tests.aides.aide_scripts import inbox

# The CLI with every scripted model answering after 0.5 s, so a signal lands mid-cycle.
SLOW_CLI = textwrap.dedent(
    """
    import os
    import sys
    from kgot.llm import scripted

    loaded = scripted.ScriptedChatModel.from_file.__func__

    def slow(cls, path, **options):
        return loaded(cls, path, latency_s=float(os.environ["SCRIPTED_LATENCY_S"]), **options)

    scripted.ScriptedChatModel.from_file = classmethod(slow)
    from kgot.cli.main import main

    sys.exit(main(sys.argv[1:]))
    """
)


def _start(tmp_path: Path, store_url: str, name: str, latency: float, *args: str) -> Any:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"update_graph": ["```python\npass\n```"]}), encoding="utf-8")
    cli = tmp_path / "slow_cli.py"
    cli.write_text(SLOW_CLI, encoding="utf-8")
    return subprocess.Popen(
        [
            sys.executable,
            str(cli),
            "aide",
            "run",
            name,
            *args,
            "--db",
            store_url,
            "--model",
            f"scripted:{script}",
        ],
        stderr=subprocess.PIPE,
        text=True,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join(sys.path),
            "SCRIPTED_LATENCY_S": str(latency),
        },
    )


def _wait_for(check: Any, worker: Any, what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        if worker.poll() is not None:
            raise AssertionError(f"the worker ended before {what}: {worker.stderr.read()}")
        time.sleep(0.05)
    worker.kill()
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.slow
@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_mid_item_stops_at_once_gives_the_item_back_and_exits_128_plus_n(
    tmp_path: Path, store: Store, store_url: str, settings: Settings, signum: int, *, code: int
) -> None:
    aide = create_aide(store, "busy", "acme", settings=settings)
    aide.add_source("dir", str(inbox(tmp_path / "inbox", ["acme.md", "globex.md"])))
    aide.add_output("jsonl", str(tmp_path / "outbox.jsonl"))
    # Every model call takes 60 s: only a stop that cancels the call ends the run in time.
    worker = _start(tmp_path, store_url, "busy", 60.0, "--once")
    _wait_for(
        lambda: aide_rows.item_counts(store, aide.row).get("ingesting", 0) == 1,
        worker,
        "an item being ingested",
    )
    sent = time.monotonic()
    worker.send_signal(signum)
    _rest, err = worker.communicate(timeout=60)
    took = time.monotonic() - sent

    assert worker.returncode == code, err
    assert took < 10, f"took {took:.1f} s to stop"
    assert f"stopped by {signal.Signals(signum).name}" in err
    assert "Traceback" not in err, err
    counts = aide_rows.item_counts(store, aide.row)
    assert counts == {"new": 2}  # the item in flight given back; nothing half-done
    assert {row.attempts for row in aide_rows.items(store, aide.row)} == {0}
    [cycle] = aide_rows.cycles(store, aide.row)
    assert cycle.status == "stopped" and "stopped by a signal" in cycle.stop_reason
    assert cycle.finished_at is not None and cycle.made_digest == 0  # no program stage
    assert not (tmp_path / "outbox.jsonl").exists()


class _Silent(http.server.BaseHTTPRequestHandler):
    """A webhook that takes the request and never answers."""

    seen = threading.Event()

    def do_POST(self) -> None:
        _Silent.seen.set()
        time.sleep(300)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.mark.slow
def test_sigterm_does_not_wait_for_a_webhook_that_never_answers(
    tmp_path: Path, store: Store, store_url: str, settings: Settings
) -> None:
    aide = create_aide(store, "hooked", "acme", settings=settings)
    _Silent.seen = threading.Event()  # one per test: the class outlives it
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Silent)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        output = aide.add_output("webhook", f"http://127.0.0.1:{server.server_address[1]}/h")
        made = aide_rows.start_cycle(store, aide.row, datetime.now(UTC))  # after the output
        digest = {"aide": "hooked", "digest": "- something happened", "facts": []}
        aide_rows.finish_cycle(
            store, made, {"status": "finished", "made_digest": 1, "report": {"digest": digest}}
        )
        worker = _start(tmp_path, store_url, "hooked", 0.0, "--once")
        _wait_for(_Silent.seen.is_set, worker, "the webhook request")
        sent = time.monotonic()
        worker.send_signal(signal.SIGTERM)
        _rest, err = worker.communicate(timeout=60)
        took = time.monotonic() - sent
    finally:
        server.shutdown()
        server.server_close()

    assert worker.returncode == 143, err
    assert took < 10, f"took {took:.1f} s to stop"
    state = aide_rows.delivery_state(store, output, f"aide {aide.row.id}/cycle {made}")
    # Abandoned, not counted as a try, and free for the next run to send again.
    assert state.attempts == 0 and state.claim_owner is None and not state.ok
