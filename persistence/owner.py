"""Which process a running run belongs to, and whether that process is still alive.

A run records its owner while it runs: ``host boot-id pid-namespace pid start-time``. A
process that was killed (SIGKILL, a crash, a power cut) never records how its run ended, so the
run would show ``running`` forever; a later kgot process on the same machine can tell that the
owner is gone and mark the run ``interrupted`` (it stays resumable).

The boot id tells reboots apart (pids start over), the start time (in clock ticks since boot,
from ``/proc/PID/stat``) tells a reused pid apart. A pid means something only in its pid
namespace: containers on one machine share its host name and boot id (when they share its
network or UTS namespace) and a database, yet each numbers its processes anew. An owner on
another host, in another pid namespace, or whose boot id or namespace is unknown, cannot be
judged from here and is never declared dead.
"""

from __future__ import annotations

import functools
import os
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

_BOOT_ID = Path("/proc/sys/kernel/random/boot_id")
_PID_NAMESPACE = Path("/proc/self/ns/pid")


@functools.cache
def _pid_namespace() -> str:
    try:
        return str(_PID_NAMESPACE.stat().st_ino)
    except OSError:
        return "-"


@dataclass(frozen=True)
class Owner:
    host: str
    boot_id: str
    pid: int
    started: str  # the process's start time in clock ticks since boot ("" when unknown)
    # The inode of the pid namespace the pid is numbered in ("-" when unknown); by default
    # this process's, as an owner made here names a process seen from here.
    pid_namespace: str = field(default_factory=_pid_namespace)

    def __str__(self) -> str:
        return f"{self.host} {self.boot_id} {self.pid_namespace} {self.pid} {self.started or '-'}"

    @classmethod
    def parse(cls, text: str) -> Owner | None:
        parts = text.split()
        if len(parts) != 5 or not parts[3].isdigit():
            return None
        host, boot_id, pid_namespace, pid, started = parts
        return cls(host, boot_id, int(pid), "" if started == "-" else started, pid_namespace)


@functools.cache
def _boot_id() -> str:
    try:
        return _BOOT_ID.read_text(encoding="ascii").strip() or "-"
    except OSError:
        return "-"


def _start_time(pid: int) -> str:
    """Field 22 of ``/proc/PID/stat`` ("" when it cannot be read)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return ""
    # The command name (field 2) is in parentheses and may hold spaces: split after it.
    fields = stat[stat.rfind(")") + 2 :].split()
    return fields[19] if len(fields) > 19 else ""


def current_owner() -> str:
    """This process, as recorded on the runs it runs."""
    return str(Owner(socket.gethostname(), _boot_id(), os.getpid(), _start_time(os.getpid())))


def owner_state(text: str | None) -> Literal["alive", "gone", "unknown"]:
    """Whether the process ``text`` names still runs: ``unknown`` when that cannot be judged
    here (another host or pid namespace, an unknown boot or namespace, no record)."""
    owner = Owner.parse(text or "")
    if owner is None or owner.host != socket.gethostname():
        return "unknown"
    if owner.boot_id == "-" or _boot_id() == "-":
        return "unknown"
    if owner.boot_id != _boot_id():
        return "gone"  # the machine was restarted since: every namespace on it is gone too
    if owner.pid_namespace == "-" or owner.pid_namespace != _pid_namespace():
        return "unknown"  # its pid names another process here, or none, whether it runs or not
    try:
        os.kill(owner.pid, 0)
    except ProcessLookupError:
        return "gone"
    except PermissionError:
        pass  # alive, another user's
    now = _start_time(owner.pid)
    if owner.started and now and now != owner.started:
        return "gone"  # the pid belongs to a newer process
    return "alive"
