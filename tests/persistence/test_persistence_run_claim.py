"""Two real processes starting one run at once: exactly one goes on, the other is refused with
the one-line message (SQLite and PostgreSQL)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kgot.persistence import open_store
from kgot.persistence.store import RunStillRunningError

# Each starter says it is ready, starts the run on the same signal, reports, and then stays
# alive until told to go: a run's claim only holds while its process lives.
STARTER = r"""
import sys
from kgot.persistence import open_store
from kgot.persistence.store import RunStillRunningError

store = open_store(sys.argv[1])
print("ready", flush=True)
sys.stdin.readline()
try:
    store.start_run("shared-run", "Who wins?", None, {})
except RunStillRunningError as refused:
    print(f"refused {refused}", flush=True)
else:
    print("won", flush=True)
sys.stdin.readline()
store.close()
"""


def _start_together(url: str) -> list[str]:
    starters = [
        subprocess.Popen(
            [sys.executable, "-c", STARTER, url],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    try:
        for starter in starters:
            assert starter.stdout is not None and starter.stdout.readline() == "ready\n"
        for starter in starters:
            assert starter.stdin is not None
            starter.stdin.write("go\n")
            starter.stdin.flush()
        outcomes = []
        for starter in starters:
            assert starter.stdout is not None
            outcomes.append(starter.stdout.readline().strip())
        for starter in starters:
            _, stderr = starter.communicate("done\n", timeout=60)
            assert starter.returncode == 0, stderr
        return outcomes
    finally:
        for starter in starters:
            if starter.poll() is None:
                starter.kill()
                starter.wait()


@pytest.mark.slow
@pytest.mark.parametrize("earlier", ["new", "interrupted"])
def test_of_two_processes_starting_one_run_exactly_one_goes_on(
    store_url: str, earlier: str
) -> None:
    if earlier == "interrupted":  # resuming: both find the run's row
        with open_store(store_url) as store:
            store.start_run("shared-run", "Who wins?", None, {})
            store.finish_run("shared-run", "interrupted", None, {})

    outcomes = _start_together(store_url)

    assert sorted(o.split(" ", 1)[0] for o in outcomes) == ["refused", "won"], outcomes
    [refusal] = [o for o in outcomes if o.startswith("refused")]
    assert refusal.startswith("refused run shared-run is still running (process ")
    assert "wait for it to end, or stop it (kill " in refusal
    assert RunStillRunningError.exit_code == 2  # bad input, like any refused command
    with open_store(store_url) as store:
        record = store.get_run("shared-run")
    assert record is not None
    assert record.status == "running"
    assert record.attempts == (2 if earlier == "interrupted" else 1)


@pytest.mark.slow
def test_a_run_left_by_a_dead_process_goes_to_one_of_two_starters(store_url: str) -> None:
    # A process that recorded the run and ended without saying how (as after SIGKILL).
    dead = "from kgot.persistence import open_store; import sys\n"
    dead += "open_store(sys.argv[1]).start_run('shared-run', 'Who wins?', None, {})"
    subprocess.run([sys.executable, "-c", dead, store_url], check=True)

    outcomes = _start_together(store_url)

    assert sorted(o.split(" ", 1)[0] for o in outcomes) == ["refused", "won"], outcomes


@pytest.mark.slow
def test_a_run_this_process_runs_is_refused_to_others_only(store_url: str) -> None:
    with open_store(store_url) as store:
        store.start_run("shared-run", "Who wins?", None, {})

        outcomes = _start_together(store_url)

        assert [o.split(" ", 1)[0] for o in outcomes] == ["refused", "refused"], outcomes
        store.check_not_running("shared-run")  # its own run: no refusal
        store.start_run("shared-run", "Who wins?", None, {})
