"""A short, real self-test of a sandbox's guarantees (``kgot sandbox check``).

Each check runs a small hostile job and inspects the result; nothing is mocked. The whole run
takes a few seconds on a warm pool.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from kgot.sandbox.base import ExecResult, Job, Limits, Sandbox
from kgot.sandbox.common import JOB_ENV


@dataclass(frozen=True)
class CheckResult:
    """One guarantee: whether it held, and what was observed; ``warning`` names what the
    kind does not guarantee there by design (printed as a WARN line, not a failure)."""

    name: str
    passed: bool
    detail: str
    warning: str | None = None


# What a check returns: passed, detail, and optionally a warning.
CheckOutcome = tuple[bool, str] | tuple[bool, str, str | None]


def _check_runs(box: Sandbox) -> tuple[bool, str]:
    started = time.perf_counter()
    result = box.run(Job("import sys\nprint(sys.version.split()[0])"))
    elapsed = (time.perf_counter() - started) * 1000
    return result.ok, f"python {result.stdout.strip() or '?'} in {elapsed:.0f} ms {_why(result)}"


# How much of each probed file is compared: logs only grow, so their start stays the same.
_PROBE_BYTES = 4096
# World-readable host files outside the directories every isolating kind covers: bubblewrap
# shows none of them (its /etc/passwd is its own), the fallback shows them all.
_SYSTEM_FILES = ("/etc/passwd", "/etc/group", "/etc/hostname", "/etc/hosts")
_LOG_DIR = Path("/var/log")
_EMPTY_DIGEST = hashlib.sha256(b"").hexdigest()


def _readable_by_jobs(path: Path, uid: int | None) -> bool:
    """Whether the job's host uid (``None``: kgot's own) may read ``path`` by its permissions
    alone: probing a file only its owner may read shows nothing about isolation.
    ``sandbox.host_uid`` belongs to no account or group, so "others" bits decide for it."""
    try:
        if uid is None:
            return os.access(path, os.R_OK)
        info = path.stat()
        if info.st_uid == uid:
            return bool(info.st_mode & stat.S_IRUSR)
        ancestors_open = all(os.stat(a).st_mode & stat.S_IXOTH for a in path.parents)
        return ancestors_open and bool(info.st_mode & stat.S_IROTH)
    except OSError:
        return False


def _probe_candidates() -> list[Path]:
    """Host files a job must not read: the user's home and this checkout, a few world-readable
    system files and logs, and shadow passwords (kept only where jobs could read them)."""
    kgot_dir = Path(__file__).resolve().parent.parent  # this module lives one level below it
    candidates = [Path("/etc/shadow"), kgot_dir / "pyproject.toml"]
    with contextlib.suppress(OSError):
        candidates += sorted(p for p in Path.home().iterdir() if p.is_file())[:3]
    candidates += [Path(p) for p in _SYSTEM_FILES]
    with contextlib.suppress(OSError):
        candidates += sorted(p for p in _LOG_DIR.iterdir() if p.is_file() and not p.is_symlink())
    return candidates


def _digest(path: Path) -> str | None:
    try:
        with path.open("rb") as handle:
            return hashlib.sha256(handle.read(_PROBE_BYTES)).hexdigest()
    except OSError:
        return None


def _probe_files(box: Sandbox, planted: Path | None) -> dict[str, str]:
    """Path -> digest of each host file to probe: non-empty, readable by the job's uid, at
    most three logs. ``planted`` is a world-readable file the check made in the host's /tmp."""
    uid = getattr(box, "file_uid", None)
    probes: dict[str, str] = {}
    logs = 0
    for path in [*_probe_candidates(), *([planted] if planted else [])]:
        is_log = path.parent == _LOG_DIR
        if (is_log and logs >= 3) or not _readable_by_jobs(path, uid):
            continue
        digest = _digest(path)
        if digest is not None and digest != _EMPTY_DIGEST:  # an empty file tells nothing
            probes[str(path)] = digest
            logs += is_log
    return probes


@contextlib.contextmanager
def _planted_tmp_file() -> Iterator[Path | None]:
    """A world-readable file with unique content in the host's /tmp, removed afterwards."""
    if not Path("/tmp").is_dir():
        yield None
        return
    fd, name = tempfile.mkstemp(prefix=".kgot-check-", dir="/tmp")
    try:
        os.write(fd, f"kgot check {uuid.uuid4().hex}\n".encode())
        os.fchmod(fd, 0o644)
        os.close(fd)
        yield Path(name)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(name)


def _check_files(box: Sandbox) -> CheckOutcome:
    """Host files the job's uid could read by permissions must be invisible; those a kind
    documents as visible (the fallback shows world-readable files outside the directories it
    covers) come back as a warning naming them, not as a pass."""
    with _planted_tmp_file() as planted:
        probes = _probe_files(box, planted)
        code = f"""
import hashlib, json
seen = {{}}
for path in {sorted(probes)!r}:
    try:
        with open(path, "rb") as handle:
            seen[path] = hashlib.sha256(handle.read({_PROBE_BYTES})).hexdigest()
    except OSError:
        pass
print(json.dumps(seen))
"""
        result = box.run(Job(code))
    try:
        seen = json.loads(result.stdout)
    except ValueError:
        return False, f"no listing came back {_why(result)}"
    visible = [path for path, digest in sorted(seen.items()) if probes.get(path) == digest]
    hides = getattr(box, "hides_from_jobs", None)  # kinds without it promise to hide all
    promised = [p for p in probes if hides is None or hides(Path(p))]
    leaked = [p for p in visible if p in promised]
    shown = [p for p in visible if p not in promised]
    detail = (
        f"readable: {' '.join(leaked) or 'none'} ({len(promised)} probed, its uid may read them)"
    )
    warning = None
    if shown:
        warning = f"not hidden (this kind shows world-readable host files): {' '.join(shown)}"
    return result.ok and not leaked, f"{detail} {_why(result)}", warning


def _check_write(box: Sandbox) -> tuple[bool, str]:
    # A fresh name per attempt, created exclusively and removed at once: even where the check
    # fails (an unisolated kind run as root), nothing is left in the host's directories.
    code = """
import os, uuid
written = []
for directory in ("/usr", "/etc", "/"):
    path = os.path.join(directory, f".kgot-check-{uuid.uuid4().hex}")
    try:
        with open(path, "x"):
            pass
    except OSError:
        continue
    written.append(directory)
    try:
        os.unlink(path)
    except OSError:
        pass
print(" ".join(written) or "none")
"""
    result = box.run(Job(code))
    return result.ok and result.stdout.strip() == "none", f"writable: {result.stdout.strip()}"


def _check_network(box: Sandbox) -> tuple[bool, str]:
    code = """
import socket
try:
    socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()
    print("created")
except OSError as error:
    print(type(error).__name__)
"""
    result = box.run(Job(code))
    outcome = result.stdout.strip()
    return result.ok and outcome != "created", f"internet socket: {outcome or '?'}"


def _check_privileges(box: Sandbox) -> tuple[bool, str]:
    code = """
import os
status = dict(line.split(":", 1) for line in open("/proc/self/status"))
print(os.getuid(), int(status["CapEff"], 16), status["NoNewPrivs"].strip(),
      status["Seccomp"].strip())
"""
    result = box.run(Job(code))
    parts = result.stdout.split()
    passed = result.ok and len(parts) == 4 and parts[0] != "0" and parts[1] == "0"
    passed = passed and parts[2] == "1" and parts[3] == "2"
    detail = "uid {} caps {} no_new_privs {} seccomp mode {}".format(*(parts + ["?"] * 4)[:4])
    return passed, detail


def _check_syscalls(box: Sandbox) -> tuple[bool, str]:
    code = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
allowed = []
if libc.ptrace(0, 0, None, None) == 0: allowed.append("ptrace")
if libc.unshare(0x10000000) == 0: allowed.append("unshare")
if libc.mount(b"none", b"/tmp", b"tmpfs", 0, None) == 0: allowed.append("mount")
print(" ".join(allowed) or "none")
"""
    result = box.run(Job(code))
    return result.ok and result.stdout.strip() == "none", f"allowed: {result.stdout.strip()}"


def _check_environment(box: Sandbox) -> tuple[bool, str]:
    """Every ``NAME=value`` a job can find (its ``os.environ`` and each readable
    ``/proc/*/environ``) must be either the documented job environment or absent from the
    host's: nothing of the host's environment, working directory included, may get in."""
    code = """
import json, os
pairs = {f"{k}={v}" for k, v in os.environ.items()}
for pid in ["self", *os.listdir("/proc")]:
    if pid == "self" or pid.isdigit():
        try:
            raw = open(f"/proc/{pid}/environ", "rb").read()
        except OSError:
            continue
        pairs.update(p.decode(errors="replace") for p in raw.split(b"\\0") if p)
print(json.dumps([os.getcwd(), sorted(pairs)]))
"""
    result = box.run(Job(code))
    try:
        job_cwd, listed = json.loads(result.stdout)
        seen = set(listed)
    except ValueError:
        return False, f"no environment listing came back {_why(result)}"
    host = {f"{k}={v}" for k, v in os.environ.items()} | {f"PWD={os.getcwd()}"}
    own = {f"{k}={v}" for k, v in JOB_ENV.items()} | {f"PWD={job_cwd}"}
    leaked = sorted((seen & host) - own)
    names = ", ".join(pair.split("=", 1)[0] for pair in leaked)
    detail = (
        f"host variables visible: {names}" if leaked else f"{len(seen)} variables, none the host's"
    )
    return result.ok and not leaked, detail


def _check_timeout(box: Sandbox) -> tuple[bool, str]:
    result = box.run(Job("while True:\n    pass\n", limits=Limits(timeout_s=1.0)))
    return result.timed_out, f"busy loop stopped after {result.duration_ms:.0f} ms"


def _check_processes(box: Sandbox) -> tuple[bool, str]:
    code = """
import os, time
count = 0
try:
    while count < 200:
        if os.fork() == 0:
            time.sleep(5)
            os._exit(0)
        count += 1
except OSError:
    pass
print(count)
"""
    result = box.run(Job(code, limits=Limits(max_processes=16, timeout_s=10.0)))
    count = result.stdout.strip()
    passed = count.isdigit() and int(count) <= 16
    return passed, f"a fork loop started {count or '?'} processes (cap 16)"


def _check_memory(box: Sandbox) -> tuple[bool, str]:
    code = "blocks = []\nwhile True:\n    blocks.append(bytearray(32 << 20))\n"
    result = box.run(Job(code, limits=Limits(memory_mb=128, timeout_s=20.0)))
    stopped = not result.ok and not result.timed_out
    reason = "MemoryError raised" if "MemoryError" in result.stderr else _why(result)
    return stopped, f"allocation loop ended: {reason or result.stderr.strip()[-60:]}"


CHECKS: tuple[tuple[str, Callable[[Sandbox], CheckOutcome]], ...] = (
    ("runs code", _check_runs),
    ("host files hidden", _check_files),
    ("system directories read-only", _check_write),
    ("no network", _check_network),
    ("unprivileged, seccomp filter on", _check_privileges),
    ("ptrace, unshare, mount refused", _check_syscalls),
    ("host environment invisible", _check_environment),
    ("wall-clock timeout", _check_timeout),
    ("process cap", _check_processes),
    ("memory cap", _check_memory),
)


def self_test(box: Sandbox) -> list[CheckResult]:
    """Run every check against ``box``; a check that raises counts as failed."""
    results = []
    for name, check in CHECKS:
        warning = None
        try:
            outcome = check(box)
            passed, detail = outcome[0], outcome[1]
            if len(outcome) == 3:
                warning = outcome[2]
        except Exception as error:  # a broken sandbox must show up as a failed line
            passed, detail = False, f"{type(error).__name__}: {error}"
        results.append(CheckResult(name, passed, " ".join(detail.split()), warning))
    return results


def _why(result: ExecResult) -> str:
    return f"({result.error})" if result.error else ""
