"""A run's owner is judged dead only where its pid means something: in its own pid namespace."""

from __future__ import annotations

import subprocess
from dataclasses import replace

from sqlalchemy import update

from kgot.persistence import Store
from kgot.persistence.owner import Owner, current_owner, owner_state
from kgot.persistence.schema import TABLES


def _a_pid_nobody_uses() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid  # reaped: nothing has this pid until the kernel hands it out again


def _in_another_pid_namespace() -> str:
    """A live process in another container on this machine: same host and boot, a pid that
    names no process here."""
    me = Owner.parse(current_owner())
    assert me is not None and me.pid_namespace != "-"
    elsewhere = replace(me, pid=_a_pid_nobody_uses(), started="1", pid_namespace="4026599999")
    assert elsewhere.pid_namespace != me.pid_namespace
    return str(elsewhere)


def test_the_owner_names_its_pid_namespace() -> None:
    me = Owner.parse(current_owner())
    assert me is not None and me.pid_namespace.isdigit()
    assert owner_state(str(me)) == "alive"
    # The same pid, gone, in our own namespace is judged as before.
    assert owner_state(str(replace(me, pid=_a_pid_nobody_uses(), started="1"))) == "gone"


def test_an_owner_in_another_pid_namespace_is_never_judged_dead() -> None:
    # Before, only host and boot id were compared: a run in another container sharing the host
    # name and the database was judged by a pid that means nothing here, and marked dead.
    assert owner_state(_in_another_pid_namespace()) == "unknown"
    me = Owner.parse(current_owner())
    assert me is not None
    assert owner_state(str(replace(me, pid_namespace="-"))) == "unknown"


def test_a_run_of_another_pid_namespace_stays_running(store: Store) -> None:
    store.start_run("theirs", "q", None, {})
    store.start_run("dead", "q", None, {})
    me = Owner.parse(current_owner())
    assert me is not None
    dead = replace(me, pid=_a_pid_nobody_uses(), started="1")
    runs = TABLES.runs
    with store.write() as connection:
        for run_id, owner in (("theirs", _in_another_pid_namespace()), ("dead", str(dead))):
            connection.execute(update(runs).where(runs.c.run_id == run_id).values(owner=owner))
    assert store.interrupt_dead_runs() == ["dead"]
    theirs = store.get_run("theirs")
    assert theirs is not None and theirs.status == "running"
