"""Hostile jobs against the real bwrap and fallback sandboxes: each is blocked or contained,
and the host is checked to be unaffected afterwards."""

from __future__ import annotations

import contextlib
import http.server
import os
import platform
import pwd
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import kgot
from kgot.config import SandboxSettings
from kgot.sandbox import ExecResult, Job, Limits, Sandbox
from kgot.sandbox.common import JOB_ENV

CHECKOUT = Path(kgot.__file__).resolve().parent
x86_64_only = pytest.mark.skipif(
    platform.machine() != "x86_64", reason="syscall numbers are x86-64 ones"
)


def run(sandbox: Sandbox, code: str, **limits: object) -> ExecResult:
    return sandbox.run(Job(code, limits=Limits(**limits)))  # type: ignore[arg-type]


def host_processes_with(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if marker.encode() in cmdline:
                found.append(int(entry))
    return found


def assert_still_healthy(sandbox: Sandbox) -> None:
    """The sandbox serves a normal job after the attack, and the host can still fork."""
    result = sandbox.run(Job("print(6 * 7)"))
    assert result.ok, result
    assert result.stdout.strip() == "42"
    assert subprocess.run(["true"], check=False).returncode == 0


# ----------------------------------------------------------------------------- file system


@pytest.mark.slow
def test_host_secrets_and_checkout_are_unreadable(sandbox: Sandbox, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("host-secret-7f3a")
    targets = ["/etc/shadow", str(CHECKOUT / "pyproject.toml"), str(secret), "/root/.bashrc"]
    code = f"""
import os
for path in {targets!r}:
    try:
        print("READ", path, open(path).read()[:40].replace("\\n", " "))
    except OSError as error:
        print("DENIED", path, type(error).__name__)
for directory in ("/home", "/root"):
    try:
        print("LIST", directory, sorted(os.listdir(directory)))
    except OSError as error:
        print("DENIED", directory, type(error).__name__)
"""
    result = run(sandbox, code)
    assert result.ok, result
    assert "READ" not in result.stdout
    assert "host-secret-7f3a" not in result.stdout
    assert "[build-system]" not in result.stdout
    for line in result.stdout.splitlines():
        if line.startswith("LIST"):
            assert "cloudsdk" not in line and ".bashrc" not in line, line


@pytest.mark.slow
def test_writes_outside_the_work_dir_fail(sandbox: Sandbox, tmp_path: Path) -> None:
    host_target = tmp_path / "planted.txt"
    targets = ["/usr/planted", "/etc/planted", "/planted", str(host_target), sys.executable]
    code = f"""
for path in {targets!r}:
    try:
        with open(path, "ab") as handle:
            handle.write(b"x")
        print("WROTE", path)
    except OSError as error:
        print("DENIED", path, type(error).__name__)
open("out/inside.txt", "w").write("fine")
"""
    result = run(sandbox, code)
    assert result.ok, result
    assert "WROTE" not in result.stdout, result.stdout
    assert result.outputs == {"inside.txt": b"fine"}
    assert not host_target.exists()
    assert not Path("/usr/planted").exists() and not Path("/etc/planted").exists()


def test_filling_the_disk_is_capped(sandbox: Sandbox) -> None:
    code = """
import os
written = 0
try:
    with open("big.bin", "wb") as handle:
        while True:
            handle.write(b"\\0" * (1 << 20))
            written += 1
except OSError as error:
    print("STOPPED", written, type(error).__name__)
"""
    result = run(sandbox, code)
    assert "STOPPED" in result.stdout or result.error, result
    if "STOPPED" in result.stdout:
        assert int(result.stdout.split()[1]) <= 64  # the tmpfs size (32 MB) or file cap (64 MB)
    assert_still_healthy(sandbox)


# Every place a job might leave a file for the next job of the same worker. The scratch ones must
# be writable (so the test proves they are emptied); any other one must be read-only or emptied.
SCRATCH_PLACES = (".", "out", "/tmp", "/var/tmp", "/dev/shm")
OTHER_PLACES = ("/dev", "/", "/run", "/home", "/root", "/mnt", "/srv", "/opt", "/var", "/etc")
PLANT = f"""
import json, os
for place in {SCRATCH_PLACES + OTHER_PLACES!r}:
    try:
        open(os.path.join(place, "leftover-7c1e"), "w").write("from job one")
        print("WROTE", place)
    except OSError:
        pass
os.environ["LEFTOVER"] = "1"
json.LEFTOVER = True
"""
# Mount points are the sandbox's own, read-only (kgot's Python environment when it lives under
# /tmp or /work): a job cannot write there, and the probe does not list them.
PROBE = f"""
import json, os
seen = []
for root in {SCRATCH_PLACES!r}:
    for directory, subdirectories, files in os.walk(root):
        subdirectories[:] = [
            d for d in subdirectories if not os.path.ismount(os.path.join(directory, d))
        ]
        seen += [os.path.join(directory, f) for f in files]
for place in {OTHER_PLACES!r}:
    if os.path.lexists(os.path.join(place, "leftover-7c1e")):
        seen.append(place)
print(sorted(seen), os.environ.get("LEFTOVER"), hasattr(json, "LEFTOVER"))
"""


def assert_previous_job_leaves_nothing(sandbox: Sandbox) -> None:
    planted = run(sandbox, PLANT)
    assert planted.ok, planted
    wrote = {line.split(" ", 1)[1] for line in planted.stdout.splitlines()}
    assert set(SCRATCH_PLACES) <= wrote, planted.stdout  # else the probe below proves nothing
    result = run(sandbox, PROBE)
    assert result.ok, result
    assert result.stdout.strip() == "[] None False", f"{sorted(wrote)} -> {result.stdout}"
    assert result.outputs == {}


def test_previous_job_leaves_nothing_behind(sandbox: Sandbox) -> None:
    assert_previous_job_leaves_nothing(sandbox)


@pytest.fixture(scope="module")
def fallback_without_work() -> Iterator[tuple[Sandbox, str]]:
    """The fallback on a host without its work directory: a top-level name the host lacks
    stands in for /work (a host without /work takes exactly this path)."""
    from kgot.sandbox.fallback import FallbackLauncher
    from kgot.sandbox.pool import PooledSandbox
    from kgot.tests.sandbox.conftest import TEST_SETTINGS, make_sandbox

    make_sandbox("fallback").close()  # skips with the reason where the fallback cannot run
    work = f"/kgot-missing-{uuid.uuid4().hex[:8]}"
    settings = SandboxSettings(kind="fallback", **TEST_SETTINGS)  # type: ignore[arg-type]
    box = PooledSandbox(FallbackLauncher(settings, None, work=work), settings)
    yield box, work
    box.close()
    assert not os.path.lexists(work), "the work directory was created on the host"


@pytest.mark.slow
def test_fallback_without_a_host_work_dir_returns_outputs(
    fallback_without_work: tuple[Sandbox, str], tmp_path: Path
) -> None:
    box, work = fallback_without_work
    attachment = tmp_path / "note.txt"
    attachment.write_text("attached")
    code = """
import os
print(os.getcwd(), sorted(os.listdir(".")), open("in/a.txt").read())
print(open("/mnt/inputs/note.txt").read())
os.makedirs("out/sub")
open("out/sub/r.txt", "w").write("result")
"""
    result = box.run(Job(code, files={"a.txt": b"input"}, mounts=(attachment,)))
    assert result.ok, result
    assert result.stdout.split("\n")[:2] == [f"{work} ['in', 'out'] input", "attached"]
    assert result.outputs == {"sub/r.txt": b"result"}
    assert not os.path.lexists(work)


@pytest.mark.slow
def test_fallback_without_a_host_work_dir_leaves_nothing_behind(
    fallback_without_work: tuple[Sandbox, str],
) -> None:
    assert_previous_job_leaves_nothing(fallback_without_work[0])


@pytest.fixture
def world_writable_host_dir() -> Iterator[Path]:
    """A directory anyone may write on the host's own disk, outside every directory the
    sandboxes cover (like Ubuntu's /var/crash, or systemd's /dev/mqueue)."""
    parent = Path("/var")
    if not os.access(parent, os.W_OK):
        pytest.skip("needs write access to /var to make a world-writable host directory")
    directory = parent / f"kgot-test-open-{uuid.uuid4().hex[:8]}"
    directory.mkdir()
    try:
        directory.chmod(0o1777)
        yield directory
    finally:
        for leftover in directory.iterdir():
            leftover.unlink()
        directory.rmdir()


def assert_host_dir_not_writable(sandbox: Sandbox, directory: Path) -> None:
    code = f"""
import os
try:
    open({str(directory / "left-by-a-job")!r}, "w").write("for the next job")
    print("WROTE")
except OSError as error:
    print("REFUSED", error.errno)
"""
    result = run(sandbox, code)
    assert result.ok, result
    assert result.stdout.startswith("REFUSED"), result.stdout
    assert list(directory.iterdir()) == []


def test_world_writable_host_directories_are_read_only(
    sandbox: Sandbox, world_writable_host_dir: Path
) -> None:
    assert_host_dir_not_writable(sandbox, world_writable_host_dir)


@pytest.mark.slow
def test_fallback_without_a_host_work_dir_keeps_host_directories_read_only(
    fallback_without_work: tuple[Sandbox, str], world_writable_host_dir: Path
) -> None:
    assert_host_dir_not_writable(fallback_without_work[0], world_writable_host_dir)


# A later job scans every anonymous and heap page of its own memory (it is forked from the same
# processes earlier jobs were) for an earlier job's code, input file, stdout and output file. The
# needles are built at run time, so the probe's own source never holds them whole; the one copy
# the probe makes (the needle object itself) is skipped by address.
MEMORY_PROBE = r"""
import ctypes, sys
needles = {name: b"".join(parts) for name, parts in {
    "code": [b"CODE-OF-JOB", b"-A-51f0"], "file": [b"FILE-OF-JOB", b"-A-51f0"],
    "stdout": [b"STDOUT-OF-JOB", b"-A-51f0"], "output": [b"OUTPUT-OF-JOB", b"-A-51f0"]}.items()}
own = {id(n) + sys.getsizeof(b"") - 1 for n in needles.values()}
buffer = bytearray(32 << 20)
start = ctypes.addressof((ctypes.c_char * len(buffer)).from_buffer(buffer))
view = memoryview(buffer)
regions = []
for line in open("/proc/self/maps").read().splitlines():
    parts = line.split()
    lo, hi = (int(x, 16) for x in parts[0].split("-"))
    named = len(parts) > 5 and parts[5] not in ("[heap]", "[stack]")
    if "r" in parts[1] and not named and not lo <= start < hi:
        regions.append((lo, hi))
found, scanned = set(), 0
with open("/proc/self/mem", "rb", buffering=0) as mem:
    for lo, hi in regions:
        at = lo
        while at < hi:
            size = min(hi - at, len(buffer))
            try:
                mem.seek(at)
                got = mem.readinto(view[:size])
            except OSError:
                break
            scanned += got
            for name, needle in needles.items():
                index = buffer.find(needle, 0, got)
                while index >= 0:
                    if at + index not in own:
                        found.add(name)
                    index = buffer.find(needle, index + 1, got)
            at += size
print(scanned > 1 << 20, sorted(found))
"""


def test_earlier_jobs_are_not_in_a_later_jobs_memory(sandbox: Sandbox) -> None:
    earlier = (
        "MARK = 'CODE-OF-JOB-A-51f0'\n"
        "print(len(open('in/data.txt').read()))\n"
        "print('STDOUT-OF-JOB-A-51f0')\n"
        "open('out/result.txt', 'w').write('OUTPUT-OF-JOB-A-51f0')\n"
    )
    first = sandbox.run(Job(earlier, files={"data.txt": b"FILE-OF-JOB-A-51f0" * 3}))
    assert first.ok and "STDOUT-OF-JOB-A-51f0" in first.stdout, first
    assert first.outputs == {"result.txt": b"OUTPUT-OF-JOB-A-51f0"}
    probe = run(sandbox, MEMORY_PROBE)
    assert probe.ok, probe
    assert probe.stdout.strip() == "True []", probe.stdout


# ----------------------------------------------------------------------------- the protocol


def test_the_processes_holding_the_protocol_are_unreachable(sandbox: Sandbox) -> None:
    code = """
import os
others = sorted(int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid())
print("others", others)
targets = []
for pid in others:  # the zygote (pid 1) and the supervisor, which holds the host's pipes
    targets += [f"/proc/{pid}/fd/{n}" for n in range(8)]
    targets += [f"/proc/{pid}/{name}" for name in ("environ", "mem", "maps")]
for path in targets:
    try:
        os.close(os.open(path, os.O_RDONLY | os.O_NONBLOCK))
        print("OPENED", path)
    except FileNotFoundError:
        pass
    except OSError as error:
        print("DENIED", path, error.errno)
print("own fds", sorted(int(fd) for fd in os.listdir("/proc/self/fd")))
"""
    result = run(sandbox, code)
    assert result.ok, result
    assert "OPENED" not in result.stdout, result.stdout
    assert result.stdout.startswith("others [1, ")  # the supervisor is there to be tried
    for path in ("/proc/1/fd/0", "/proc/1/fd/1", "/proc/1/fd/2", "/proc/1/environ"):
        assert f"DENIED {path} " in result.stdout
    # The job holds nothing but its stdio (and the descriptor listing itself).
    assert "own fds [0, 1, 2, 3]" in result.stdout


FORGERY = r"""
import json, os, struct
def frame(header, blobs):
    header = dict(header, blobs=[len(b) for b in blobs])
    raw = json.dumps(header).encode()
    return struct.pack(">I", len(raw)) + raw + b"".join(blobs)
forged = frame({"exit_code": 0, "timed_out": False, "outputs": []}, [b"FORGED\n", b""])
others = [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()]
for path in [f"/proc/{pid}/fd/{n}" for pid in others for n in range(8)]:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        os.write(fd, forged)
    except OSError:
        pass
print("job A finished normally")
"""


def test_a_job_cannot_forge_its_result_or_answer_the_next_job(sandbox: Sandbox) -> None:
    attack = run(sandbox, FORGERY)
    assert attack.ok and attack.stdout == "job A finished normally\n", attack
    victim = sandbox.run(
        Job("print(open('in/secret.txt').read())", files={"secret.txt": b"TENANT-B-7e21"})
    )
    assert victim.ok and victim.stdout == "TENANT-B-7e21\n", victim
    assert_still_healthy(sandbox)


@pytest.mark.slow
def test_killing_the_worker_only_fails_that_job(sandbox: Sandbox) -> None:
    code = """
import os, signal
os.kill(1, signal.SIGKILL)  # the zygote is the namespace's init: ignored
for pid in [int(p) for p in os.listdir("/proc") if p.isdigit()]:
    if pid not in (1, os.getpid()):
        os.kill(pid, signal.SIGKILL)  # the supervisor, the same user as the job
import time
time.sleep(120)
print('alive')
"""
    result = run(sandbox, code)
    assert not result.ok and "alive" not in result.stdout
    assert "the sandbox worker died during the job" in (result.error or ""), result
    # Not a speed check: the job would sleep 120 s, so this shows the death was noticed and
    # the job ended, instead of the caller waiting for the job or for the timeout.
    assert result.duration_ms < 60_000
    assert_still_healthy(sandbox)


# ----------------------------------------------------------------------------- environment


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["bwrap", "fallback"])
def test_host_environment_and_directory_are_not_visible(
    kind: str, sandbox_factory: object, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Set before the sandbox starts: the worker's own start-up environment is what leaked.
    monkeypatch.setenv("KGOT_TEST_HOST_SECRET", "do-not-leak-91c2")
    monkeypatch.chdir(tmp_path)
    box = sandbox_factory(kind)  # type: ignore[operator]
    code = """
import json, os
seen = {"os.environ": [f"{k}={v}" for k, v in os.environ.items()]}
for pid in ["self", "1", *[p for p in os.listdir("/proc") if p.isdigit()]]:
    try:
        raw = open(f"/proc/{pid}/environ", "rb").read()
    except OSError:
        continue
    seen[pid] = [part.decode(errors="replace") for part in raw.split(b"\\0") if part]
print(json.dumps(seen))
"""
    result = run(box, code)
    assert result.ok, result
    import json

    seen = json.loads(result.stdout)
    assert "self" in seen  # at least its own start-up environment was readable
    allowed = {f"{k}={v}" for k, v in JOB_ENV.items()}
    allowed |= {"KGOT_WORK=/work"}
    exec_has_pwd = kind == "bwrap"  # bubblewrap's exec environment holds it, not os.environ
    if exec_has_pwd:
        allowed.add("PWD=/work")
    for source, pairs in seen.items():
        unexpected = [pair for pair in pairs if pair not in allowed]
        assert unexpected == [], (source, unexpected)
    assert not any(pair.startswith("PWD=") for pair in seen["os.environ"])  # as documented
    assert exec_has_pwd or not any("PWD=" in pair for pairs in seen.values() for pair in pairs)
    assert str(tmp_path) not in result.stdout


# ----------------------------------------------------------------------------- network


@pytest.fixture
def loopback_server() -> Iterator[tuple[int, list[str]]]:
    hits: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            hits.append(self.path)
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"reachable")

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1], hits
    server.shutdown()
    server.server_close()


@pytest.mark.slow
def test_network_is_unreachable(sandbox: Sandbox, loopback_server: tuple[int, list[str]]) -> None:
    port, hits = loopback_server
    code = f"""
import socket, urllib.request
attempts = {{
    "tcp": lambda: socket.create_connection(("127.0.0.1", {port}), timeout=2),
    "udp": lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM),
    "inet6": lambda: socket.socket(socket.AF_INET6, socket.SOCK_STREAM),
    "raw": lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW),
    "netlink": lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW),
    "dns": lambda: socket.getaddrinfo("example.com", 80),
    "http": lambda: urllib.request.urlopen("http://127.0.0.1:{port}/", timeout=2).read(),
}}
for name, attempt in attempts.items():
    try:
        attempt()
        print("ALLOWED", name)
    except OSError as error:
        print("BLOCKED", name, type(error).__name__)
left, right = socket.socketpair()  # local sockets stay usable (multiprocessing needs them)
left.sendall(b"ok"); print("UNIX", right.recv(2).decode())
"""
    result = run(sandbox, code)
    assert result.ok, result
    assert "ALLOWED" not in result.stdout, result.stdout
    assert result.stdout.count("BLOCKED") == 7
    assert "UNIX ok" in result.stdout
    assert hits == []  # the host's server never saw a request


# ----------------------------------------------------------------------------- processes


FORK_BOMB = """
import os, time
children = 0
try:
    while True:
        pid = os.fork()
        if pid == 0:
            time.sleep(30)
            os._exit(0)
        children += 1
except OSError as error:
    print("CAPPED", children, type(error).__name__)
"""


def test_fork_bomb_is_capped(sandbox: Sandbox) -> None:
    result = run(sandbox, FORK_BOMB, timeout_s=5.0, max_processes=16)
    assert "CAPPED" in result.stdout, result
    assert int(result.stdout.split()[1]) <= 16
    assert_still_healthy(sandbox)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["bwrap", "fallback"])
def test_fork_bomb_is_capped_without_cgroups(
    kind: str, sandbox_factory: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Root with no writable pids cgroup (common in containers): the unprivileged uid's
    RLIMIT_NPROC still caps the job."""
    from kgot.sandbox import cgroups

    monkeypatch.setattr(cgroups, "cgroup_support", lambda: None)
    box = sandbox_factory(kind)  # type: ignore[operator]
    assert box.launcher.process_cap == "rlimit"  # type: ignore[attr-defined]
    result = run(box, FORK_BOMB, timeout_s=5.0, max_processes=16)
    assert "CAPPED" in result.stdout, result
    assert int(result.stdout.split()[1]) <= 16
    assert_still_healthy(box)


def test_memory_bomb_is_contained(sandbox: Sandbox) -> None:
    code = """
blocks = []
while True:
    blocks.append(bytearray(64 << 20))
"""
    result = run(sandbox, code, memory_mb=128)
    assert not result.ok
    assert "MemoryError" in result.stderr or "memory" in (result.error or ""), result
    assert_still_healthy(sandbox)


MEMORY_OUTSIDE_THE_HEAP = {
    "tmpfs": """
total = 0
for directory in ("/dev/shm", "/tmp", "/work"):
    for index in range(4):
        try:
            with open(f"{directory}/fill{index}", "wb") as handle:
                for _ in range(30):
                    handle.write(b"z" * (1 << 20))
                    total += 1
        except OSError as error:
            break
print("wrote", total, "MB")
""",
    "memfd": """
import os
descriptors, total = [], 0
for index in range(20):
    fd = os.memfd_create(f"fill{index}")
    for _ in range(30):
        os.write(fd, b"y" * (1 << 20))
        total += 1
    descriptors.append(fd)
print("wrote", total, "MB")
""",
}


@pytest.mark.slow
@pytest.mark.parametrize("how", sorted(MEMORY_OUTSIDE_THE_HEAP))
def test_memory_outside_the_heap_kills_the_job_not_the_worker(
    how: str, sandbox_factory: object
) -> None:
    """tmpfs pages and memfds escape RLIMIT_AS; the memory cgroup stops them, and the job (not
    the warm worker) is what it kills."""
    box = sandbox_factory("bwrap", work_dir_mb=256)  # type: ignore[operator]
    if "cgroup" not in box.launcher.process_cap:  # type: ignore[attr-defined]
        pytest.skip("no memory cgroup here: only tmpfs sizes bound this memory")
    identity = "print(open('/proc/1/stat').read().rsplit(')', 1)[1].split()[19])"
    before = run(box, identity)
    result = run(box, MEMORY_OUTSIDE_THE_HEAP[how], memory_mb=96, timeout_s=20.0)
    assert not result.ok and "wrote" not in result.stdout, result
    assert "memory limit of 96 MB exceeded" in (result.error or ""), result
    after = run(box, identity)
    assert after.ok and after.stdout == before.stdout  # the same warm worker served on


@pytest.mark.slow
@pytest.mark.parametrize(
    "code", ["while True:\n    pass\n", "import time\nwhile True:\n    time.sleep(0.2)\n"]
)
def test_busy_and_sleep_loops_time_out(sandbox: Sandbox, code: str) -> None:
    result = run(sandbox, code, timeout_s=1.0)
    assert result.timed_out, result
    assert result.exit_code is None
    assert "timed out after 1 s" in (result.error or "")
    assert_still_healthy(sandbox)


@pytest.mark.slow
def test_cpu_limit_stops_spinning_code(sandbox: Sandbox) -> None:
    result = run(sandbox, "while True:\n    pass\n", cpu_seconds=1, timeout_s=8.0)
    assert not result.timed_out
    assert "CPU time limit of 1 s" in (result.error or ""), result


@pytest.mark.slow
def test_no_process_survives_a_job(sandbox: Sandbox) -> None:
    marker = f"kgot-straggler-{uuid.uuid4().hex}"
    code = f"""
import subprocess, os, time
# argv[0] carries the marker, so the host can find these processes by their command line
subprocess.Popen(["{marker}", "300"], executable="sleep", start_new_session=True)
if os.fork() == 0:  # a double-forked daemon, re-parented away from the job
    os.setsid()
    if os.fork() == 0:
        os.execvp("sleep", ["{marker}", "301"])
    os._exit(0)
time.sleep(0.3)
print("started")
time.sleep(60)
"""
    result = run(sandbox, code, timeout_s=1.5)
    assert result.timed_out and "started" in result.stdout, result
    # what was killed and why: the job and its two sleepers (the middle fork had exited)
    assert "timed out after 1.5 s (wall clock); killed its 3 running processes" in (
        result.error or ""
    ), result.error
    assert host_processes_with(marker) == []
    # ... and the same after a job that exits normally with children still running
    normal = (
        f'import subprocess\nsubprocess.Popen(["{marker}", "300"], executable="sleep")\n'
        'print("bye")'
    )
    assert run(sandbox, normal).ok
    assert host_processes_with(marker) == []
    listing = run(sandbox, "import os\nprint(sum(p.isdigit() for p in os.listdir('/proc')))")
    assert int(listing.stdout) == 3  # the zygote, the supervisor and this job


@pytest.mark.slow
@pytest.mark.parametrize("target", ["everything", "itself"])
def test_a_job_that_stops_its_supervisor_or_itself_is_still_killed(
    sandbox: Sandbox, target: str
) -> None:
    """SIGSTOP reaches every process of the job's uid: a stopped supervisor cannot enforce the
    deadline, so the host kills the whole worker instead."""
    marker = f"kgot-stopper-{uuid.uuid4().hex}"
    code = f"""
import os, signal, subprocess, time
subprocess.Popen(["{marker}", "300"], executable="sleep", start_new_session=True)
if {target == "everything"!r}:
    for pid in sorted(int(p) for p in os.listdir("/proc") if p.isdigit()):
        if pid not in (1, os.getpid()):  # init ignores it anyway
            os.kill(pid, signal.SIGSTOP)
    time.sleep(300)
os.kill(os.getpid(), signal.SIGSTOP)
"""
    result = run(sandbox, code, timeout_s=1.0)
    assert result.timed_out and result.exit_code is None, result
    assert "timed out after 1 s" in (result.error or ""), result.error
    if target == "everything":
        assert "the whole worker was killed" in (result.error or ""), result.error
    assert host_processes_with(marker) == []
    assert_still_healthy(sandbox)


# ----------------------------------------------------------------------------- kernel surface


@x86_64_only
def test_dangerous_system_calls_are_refused(sandbox: Sandbox) -> None:
    code = """
import ctypes, ctypes.util, errno, os
libc = ctypes.CDLL(None, use_errno=True)
def attempt(name, call):
    ret = call()
    print(name, "REFUSED" if ret == -1 else "ALLOWED", errno.errorcode.get(ctypes.get_errno(), ""))
attempt("ptrace-traceme", lambda: libc.ptrace(0, 0, None, None))
attempt("ptrace-attach", lambda: libc.ptrace(16, os.getppid(), None, None))
attempt("mount", lambda: libc.mount(b"none", b"/work", b"tmpfs", 0, None))
attempt("unshare-user", lambda: libc.unshare(0x10000000))
attempt("unshare-net", lambda: libc.unshare(0x40000000))
attempt("setns", lambda: libc.setns(0, 0))
attempt("bpf", lambda: libc.syscall(321, 0, None, 0))
attempt("keyctl", lambda: libc.syscall(250, 0, 0, 0, 0, 0))
attempt("io_uring_setup", lambda: libc.syscall(425, 8, None))
attempt("perf_event_open", lambda: libc.syscall(298, None, 0, -1, -1, 0))
attempt("chroot", lambda: libc.chroot(b"/tmp"))
"""
    result = run(sandbox, code)
    assert result.ok, result
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 11
    assert all(" REFUSED " in f"{line} " for line in lines), result.stdout


@x86_64_only
def test_ipc_objects_that_outlive_a_job_are_refused(sandbox: Sandbox) -> None:
    """POSIX message queues and System V objects belong to the worker's IPC namespace and
    would carry data from one job to the next."""
    code = """
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
def attempt(name, number, *args):
    ret = libc.syscall(number, *args)
    print(name, "REFUSED" if ret == -1 else "ALLOWED", errno.errorcode.get(ctypes.get_errno(), ""))
attempt("mq_open", 240, b"/kgot-carry", os.O_CREAT | os.O_RDWR, 0o600, None)
attempt("mq_unlink", 241, b"/kgot-carry")
attempt("mq_timedsend", 242, 3, b"x", 1, 0, None)
attempt("mq_timedreceive", 243, 3, None, 0, None, None)
attempt("mq_notify", 244, 3, None)
attempt("mq_getsetattr", 245, 3, None, None)
attempt("shmget", 29, 0, 4096, 0o1600)
attempt("semget", 64, 0, 1, 0o1600)
attempt("msgget", 68, 0, 0o1600)
"""
    result = run(sandbox, code)
    assert result.ok, result
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 9 and all(line.split()[1:] == ["REFUSED", "EPERM"] for line in lines), (
        result.stdout
    )


@x86_64_only
def test_terminal_injection_is_refused_whatever_the_upper_bits(sandbox: Sandbox) -> None:
    """ioctl's request is 32 bits to the kernel: 0x1_00005412 is still TIOCSTI."""
    code = """
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
char = ctypes.create_string_buffer(b"x")
for request in (0x5412, 0x1_00005412, 0xFFFF_FFFF_0000_5412, 0x541C):
    ret = libc.syscall(16, 0, ctypes.c_ulong(request), char)
    print(hex(request), errno.errorcode.get(ctypes.get_errno(), "") if ret == -1 else "ALLOWED")
"""
    result = run(sandbox, code)
    assert result.ok, result
    assert [line.split()[1] for line in result.stdout.splitlines()] == ["EPERM"] * 4, result.stdout


def test_privileges_are_dropped_and_filtered(sandbox: Sandbox) -> None:
    code = """
status = dict(line.split(":", 1) for line in open("/proc/self/status"))
import os
print(os.getuid(), os.getgid(), status["CapEff"].strip(), status["CapBnd"].strip(),
      status["NoNewPrivs"].strip(), status["Seccomp"].strip())
"""
    result = run(sandbox, code)
    assert result.ok, result
    uid, gid, cap_eff, cap_bnd, no_new_privs, seccomp = result.stdout.split()
    if sandbox.name.startswith("bwrap"):
        assert (uid, gid) == ("65534", "65534")  # nobody inside its user namespace
    elif os.getuid() == 0:  # the fallback has no user namespace as root: the host uid shows
        assert int(uid) == int(gid) == SandboxSettings().host_uid
    assert int(cap_eff, 16) == 0
    assert no_new_privs == "1" and seccomp == "2"
    if sandbox.name.startswith("bwrap"):
        assert int(cap_bnd, 16) == 0


@pytest.mark.slow
def test_jobs_are_not_host_root(sandbox: Sandbox) -> None:
    """Whatever uid a job has inside, its processes are not uid 0 on the host."""
    launcher = sandbox.launcher  # type: ignore[attr-defined]
    if getattr(launcher, "method", None) == "root":
        pytest.skip(f"bubblewrap runs as root here: {launcher.note}")
    marker = f"kgot-uid-{uuid.uuid4().hex}"
    code = f"""
import subprocess, time
subprocess.Popen(["{marker}", "30"], executable="sleep")
time.sleep(2)
"""
    owners: dict[int, int] = {}
    job_done = threading.Event()

    def watch() -> None:  # the job's process is only alive while the job runs
        while not owners and not job_done.is_set():
            for pid in host_processes_with(marker):
                with contextlib.suppress(OSError):
                    owners[pid] = os.stat(f"/proc/{pid}").st_uid
            job_done.wait(0.01)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        result = run(sandbox, code)
    finally:
        job_done.set()
        watcher.join()
    assert result.ok, result
    assert owners, "the job's process was not seen from the host"
    assert 0 not in owners.values(), owners
    if os.getuid() == 0:  # a uid of its own, not nobody's (shared with daemons, NFS squashing)
        assert set(owners.values()) == {SandboxSettings().host_uid}, owners
        for uid in owners.values():
            with pytest.raises(KeyError):
                pwd.getpwuid(uid)


def test_a_host_uid_that_belongs_to_an_account_is_refused() -> None:
    from kgot.errors import SandboxUnavailableError
    from kgot.sandbox import staging

    with pytest.raises(SandboxUnavailableError, match=r"belongs to the account 'nobody'.*host_uid"):
        staging.host_uid(SandboxSettings(host_uid=65534))
    assert staging.host_uid(SandboxSettings()) == SandboxSettings().host_uid
