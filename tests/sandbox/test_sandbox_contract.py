"""The job contract (paths, outputs, caps, exit codes) and the warm pool's behaviour."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from kgot.sandbox import Job, Limits, Sandbox

GRAPH_UPDATE = """
import json
import networkx as nx
G = nx.node_link_graph(json.load(open("in/graph.json")), directed=True, multigraph=True,
                       edges="edges")
G.add_node("n2", label="Person", name="Ada")
G.add_edge("n1", "n2", relationship="knows")
json.dump(nx.node_link_data(G, edges="edges"), open("/work/out/graph.json", "w"))
print(G.number_of_nodes(), G.number_of_edges())
"""


def small_graph() -> bytes:
    return json.dumps(
        {
            "directed": True,
            "multigraph": True,
            "graph": {},
            "nodes": [{"id": "n1", "label": "Person", "name": "Alan"}],
            "edges": [],
        }
    ).encode()


@pytest.mark.slow
def test_graph_update_round_trip(sandbox: Sandbox) -> None:
    result = sandbox.run(Job(GRAPH_UPDATE, files={"graph.json": small_graph()}))
    assert result.ok, result
    assert result.stdout.strip() == "2 1"
    graph = json.loads(result.outputs["graph.json"])
    assert {n["id"] for n in graph["nodes"]} == {"n1", "n2"}
    assert graph["edges"][0]["relationship"] == "knows"


@pytest.mark.slow
def test_paths_inputs_and_nested_outputs(sandbox: Sandbox) -> None:
    code = """
import os
print(os.getcwd(), sorted(os.listdir(".")), open("in/sub/data.txt").read())
os.makedirs("out/deep/er")
open("out/deep/er/r.txt", "w").write("nested")
os.symlink("/etc/passwd", "out/link")  # links never come back
"""
    result = sandbox.run(Job(code, files={"sub/data.txt": b"payload"}))
    assert result.ok, result
    cwd, rest = result.stdout.split(" ", 1)
    assert rest.strip() == "['in', 'out'] payload"
    if sandbox.name.startswith("bwrap"):
        assert cwd == "/work"
    assert result.outputs == {"deep/er/r.txt": b"nested"}


@pytest.mark.slow
def test_mounts_are_read_only_under_mnt_inputs(sandbox: Sandbox, tmp_path: Path) -> None:
    attachment = tmp_path / "report.csv"
    attachment.write_text("a,b\n1,2\n")
    folder = tmp_path / "bundle"
    folder.mkdir()
    (folder / "x.txt").write_text("inside")
    code = """
import os
print(sorted(os.listdir("/mnt/inputs")), open("/mnt/inputs/report.csv").read().split()[1],
      open("/mnt/inputs/bundle/x.txt").read())
try:
    open("/mnt/inputs/report.csv", "a").write("tamper")
    print("WROTE")
except OSError as error:
    print("DENIED", type(error).__name__)
"""
    result = sandbox.run(Job(code, mounts=(attachment, folder)))
    assert result.ok, result
    assert "['bundle', 'report.csv'] 1,2 inside" in result.stdout
    assert "DENIED" in result.stdout
    assert attachment.read_text() == "a,b\n1,2\n"


def test_exit_codes_exceptions_and_stderr(sandbox: Sandbox) -> None:
    failing = sandbox.run(Job("print('before')\nraise ValueError('boom')"))
    assert failing.exit_code == 1 and not failing.ok
    assert failing.error is None  # the code failed, not the sandbox
    assert "before" in failing.stdout
    assert 'File "job.py", line 2' in failing.stderr and "ValueError: boom" in failing.stderr
    assert sandbox.run(Job("import sys\nsys.exit(3)")).exit_code == 3
    assert sandbox.run(Job("import sys\nsys.exit()")).exit_code == 0
    syntax = sandbox.run(Job("def broken(:\n"))
    assert syntax.exit_code == 1 and "SyntaxError" in syntax.stderr


def test_output_is_capped_with_a_notice(sandbox: Sandbox) -> None:
    code = "import sys\nsys.stdout.write('x' * 50000)\nopen('out/big', 'w').write('y' * 50000)"
    result = sandbox.run(Job(code, limits=Limits(max_output_bytes=4096)))
    assert result.truncated
    assert result.stdout.startswith("x" * 4096)
    assert "[output truncated: 45904 more bytes]" in result.stdout
    assert "big" not in result.outputs


def test_each_job_is_a_fresh_process_with_preloaded_libraries(sandbox: Sandbox) -> None:
    code = "import os, sys\nprint(os.getpid(), 'networkx' in sys.modules)"
    first = sandbox.run(Job(code))
    second = sandbox.run(Job(code))
    assert first.ok and second.ok
    pid_a, preloaded = first.stdout.split()
    pid_b, _ = second.stdout.split()
    assert pid_a != pid_b
    assert preloaded == "True"


def test_random_state_differs_between_jobs(sandbox: Sandbox) -> None:
    code = "import random\nprint(random.random())"
    values = {sandbox.run(Job(code)).stdout for _ in range(3)}
    assert len(values) == 3


@pytest.mark.slow
def test_concurrent_runs_from_many_threads(sandbox: Sandbox) -> None:
    results: dict[int, str] = {}

    def one(index: int) -> None:
        result = sandbox.run(Job(f"print({index} * 2)", files={"i.txt": str(index).encode()}))
        results[index] = result.stdout.strip() if result.ok else f"failed: {result}"

    threads = [threading.Thread(target=one, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert results == {i: str(i * 2) for i in range(6)}


# A worker's identity seen from inside: its zygote is the namespace's pid 1, and pid namespaces
# of closed workers can be reused, so the zygote's start time goes with it.
IDENTITY = (
    "import os\n"
    "print(os.readlink('/proc/self/ns/pid'), open('/proc/1/stat').read().rsplit(')', 1)[1]"
    ".split()[19])"
)


@pytest.mark.slow
def test_workers_are_recycled(sandbox_factory: object) -> None:
    box = sandbox_factory("bwrap", recycle_after=2)  # type: ignore[operator]
    spaces = [box.run(Job(IDENTITY)).stdout.strip() for _ in range(6)]
    assert all(spaces), spaces
    assert spaces[0] == spaces[1] != spaces[2] == spaces[3] != spaces[4] == spaces[5]
    assert len(set(spaces)) == 3


@pytest.mark.slow
def test_warm_up_in_the_background_serves_later_jobs(sandbox_factory: object) -> None:
    box = sandbox_factory("bwrap", pool_size=2)  # type: ignore[operator]
    box.warm_up(wait=False)  # type: ignore[attr-defined]
    # Workers started by a short-lived thread must outlive it (PR_SET_PDEATHSIG is per thread).
    assert box.wait_warm(2)  # type: ignore[attr-defined]
    results = [box.run(Job("print('warm')")) for _ in range(3)]
    assert all(r.ok and r.stdout == "warm\n" for r in results), results


@pytest.mark.slow
def test_a_closed_pool_warms_up_again_on_the_next_job(sandbox_factory: object) -> None:
    box = sandbox_factory("bwrap", pool_size=2)  # type: ignore[operator]
    assert box.run(Job("print(1)")).ok
    assert box.wait_warm(2)  # type: ignore[attr-defined]
    box.close()
    assert box.idle_workers == 0  # type: ignore[attr-defined]
    assert box.run(Job("print(2)")).stdout == "2\n"
    assert box.wait_warm(2)  # type: ignore[attr-defined]  # the second worker warmed up again


@pytest.mark.slow
def test_closing_releases_jobs_waiting_for_a_worker(sandbox_factory: object) -> None:
    """On Ctrl-C the pool is closed: running jobs are killed, and a job still waiting for a
    worker gives up at once instead of keeping its thread (and the interpreter) alive."""
    from kgot.errors import SandboxUnavailableError

    box = sandbox_factory("bwrap", pool_size=1)  # type: ignore[operator]
    box.max_workers = 1  # type: ignore[attr-defined]  # one worker: the second job must wait
    started = threading.Event()
    outcomes: dict[str, object] = {}

    def busy() -> None:
        started.set()
        try:
            outcomes["busy"] = box.run(
                Job("import time; time.sleep(60)", limits=Limits(timeout_s=90))
            )
        except SandboxUnavailableError as error:  # closed while its worker was starting
            outcomes["busy"] = error

    def waiting() -> None:
        started.wait()
        try:
            outcomes["waiting"] = box.run(Job("print('never')"))
        except SandboxUnavailableError as error:
            outcomes["waiting"] = error

    threads = [threading.Thread(target=busy), threading.Thread(target=waiting)]
    for thread in threads:
        thread.start()
    assert started.wait(10)
    deadline = time.monotonic() + 10  # let the second job reach the wait
    while not box.waiting_for_worker and time.monotonic() < deadline:  # type: ignore[attr-defined]
        time.sleep(0.01)
    box.close()
    for thread in threads:
        thread.join(timeout=10)
    assert not any(thread.is_alive() for thread in threads)
    assert isinstance(outcomes["waiting"], SandboxUnavailableError)
    busy_outcome = outcomes["busy"]
    assert isinstance(busy_outcome, SandboxUnavailableError) or not busy_outcome.ok  # type: ignore[attr-defined]


@pytest.mark.slow
def test_a_forgotten_pool_stops_its_workers(sandbox_factory: object) -> None:
    import gc

    from kgot.sandbox.pool import PooledSandbox

    box = sandbox_factory("bwrap", pool_size=1)  # type: ignore[operator]
    fresh = PooledSandbox(box.launcher, box.settings)  # type: ignore[attr-defined]
    fresh.warm_up()
    worker = fresh._state.idle[0]
    del fresh
    gc.collect()
    assert worker.process.wait(timeout=10) is not None  # stopped without close()


def test_bad_jobs_are_refused_before_running(sandbox: Sandbox, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="escapes the input directory"):
        sandbox.run(Job("pass", files={"../evil": b""}))
    with pytest.raises(ValueError, match="not valid UTF-8"):
        sandbox.run(Job("pass", files={"bad\udcff": b""}))
    with pytest.raises(ValueError, match="does not exist"):
        sandbox.run(Job("pass", mounts=(tmp_path / "missing.pdf",)))
    for nameless in (Path("/"), Path("."), Path(".."), tmp_path / ".."):
        with pytest.raises(ValueError, match="no name to show under /mnt/inputs"):
            sandbox.run(Job("pass", mounts=(nameless,)))
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "x.csv").write_text("1")
    (tmp_path / "b" / "x.csv").write_text("2")
    with pytest.raises(ValueError, match=r"both named 'x\.csv'"):
        sandbox.run(Job("pass", mounts=(tmp_path / "a" / "x.csv", tmp_path / "b" / "x.csv")))


def test_input_files_larger_than_the_work_dir_fail_the_job(sandbox: Sandbox) -> None:
    result = sandbox.run(Job("print('ran')", files={"huge.bin": b"\0" * (40 << 20)}))
    assert not result.ok and "ran" not in result.stdout
    assert "input files could not be written (No space left on device)" in (result.error or "")
    assert sandbox.run(Job("print('next')")).stdout == "next\n"


def test_code_larger_than_a_megabyte_runs(sandbox: Sandbox) -> None:
    code = "data = '" + "a" * (3 << 20) + "'\nprint(len(data))\n"
    result = sandbox.run(Job(code))
    assert result.ok, result
    assert result.stdout == f"{3 << 20}\n"


def test_a_lone_surrogate_in_the_code_is_a_failed_result(sandbox: Sandbox) -> None:
    result = sandbox.run(Job("print('before')\nx = '\ud800'\n"))
    assert not result.ok and result.exit_code == 1
    assert "surrogates not allowed" in result.stderr
    assert sandbox.run(Job("print('next')")).stdout == "next\n"


@pytest.mark.slow
def test_jobs_with_mounts_run_warm_in_one_worker(sandbox: Sandbox, tmp_path: Path) -> None:
    attachment = tmp_path / "table.csv"
    attachment.write_text("a,b\n1,2\n")
    code = IDENTITY + (
        "\nimport sys\nprint('networkx' in sys.modules, open('/mnt/inputs/table.csv').read()"
        ".split()[1])"
    )
    first = sandbox.run(Job(code, mounts=(attachment,)))
    second = sandbox.run(Job(code, mounts=(attachment,)))
    assert first.ok and second.ok, (first, second)
    assert first.stdout.splitlines()[1] == "True 1,2"  # pre-imported, like mount-less jobs
    assert first.stdout == second.stdout  # the same worker served both
    assert second.duration_ms < 1000
    other = tmp_path / "other.csv"
    other.write_text("c\n3\n")
    code_other = "import os\nprint(sorted(os.listdir('/mnt/inputs')))"
    third = sandbox.run(Job(code_other, mounts=(other,)))
    assert third.ok and third.stdout == "['other.csv']\n"  # never the previous job's mounts
    plain = sandbox.run(Job("import os\nprint(os.path.exists('/mnt/inputs/table.csv'))"))
    assert plain.ok and plain.stdout == "False\n"


@pytest.mark.slow
def test_a_replaced_mount_is_not_served_from_a_stale_worker(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    attachment = tmp_path / "notes.txt"
    attachment.write_text("first version")
    code = "print(open('/mnt/inputs/notes.txt').read())"
    assert sandbox.run(Job(code, mounts=(attachment,))).stdout == "first version\n"
    replacement = tmp_path / "notes.new"
    replacement.write_text("second version")
    replacement.replace(attachment)  # a new file at the same path: a bind still shows the old
    assert sandbox.run(Job(code, mounts=(attachment,))).stdout == "second version\n"


def test_the_zygote_starts_one_blas_thread(sandbox_factory: object) -> None:
    box = sandbox_factory("bwrap", preload=["numpy"])  # type: ignore[operator]
    code = (
        "import sys\nprint('numpy' in sys.modules, "
        "[l.split()[1] for l in open('/proc/1/status') if l.startswith('Threads')][0])"
    )
    result = box.run(Job(code))
    assert result.ok and result.stdout == "True 1\n", result


def test_packages_outside_the_allow_list_are_refused(sandbox: Sandbox) -> None:
    result = sandbox.run(Job("import leftpad", packages=("leftpad",)))
    assert not result.ok
    assert "sandbox.allow_packages" in (result.error or "")


def test_pool_size_zero_runs_cold(sandbox_factory: object) -> None:
    box = sandbox_factory("bwrap", pool_size=0)  # type: ignore[operator]
    result = box.run(Job("import sys\nprint('networkx' in sys.modules)"))
    assert result.ok and result.stdout.strip() == "False"
    assert box.idle_workers == 0  # type: ignore[attr-defined]
