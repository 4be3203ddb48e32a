"""The run's workspace: private on the host, readable by the sandbox user, kept where asked."""

from __future__ import annotations

import asyncio
import json
import os
import stat
from pathlib import Path

import pytest

from kgot.tests.support.sandbox_probe import machine_problem
from kgot.tests.tools.tool_fixtures import (
    FixtureServer,
    Response,
    call,
    make_runner,
    tools_settings,
)
from kgot.tools import ToolContext, ToolRunner, web_page
from kgot.tools.access import (
    make_private_dir,
    sandbox_file_uid,
    share_with_sandbox,
    write_private,
)
from kgot.tools.base import ToolFailure
from kgot.tools.tool_session import ToolSession


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_workspace_and_extracted_files_are_owner_only(samples):
    runner = make_runner(
        ToolContext(settings=tools_settings(), attachments=(samples["bundle.zip"],))
    )
    outcome = call(runner, "inspect_file", path="bundle.zip", member="tables/people.csv")
    assert outcome.ok, outcome.output
    extracted = Path(outcome.source_ref)
    workspace = next(p for p in extracted.parents if p.name == "workspace")
    assert _mode(workspace.parent) == 0o700  # the run's private directory
    for path in [workspace, *workspace.rglob("*")]:
        assert _mode(path) & 0o077 == 0, f"{path} is open to others: {oct(_mode(path))}"


def test_downloads_are_owner_only(server: FixtureServer, samples):
    url = server.page("/dl/bundle.zip", samples["bundle.zip"].read_bytes(), "application/zip")
    session = ToolSession(ToolContext(settings=tools_settings(server)))
    runner = ToolRunner([web_page.SPEC.make(session)], timeout=10, max_output_chars=4000)
    assert asyncio.run(runner.run("visit_page", {"url": url})).ok
    saved = session.workspace / "bundle.zip"
    assert saved.is_file() and _mode(saved) == 0o600


def _named_acl_users(path: Path) -> list[int] | None:
    try:
        acl = os.getxattr(path, "system.posix_acl_access")
    except OSError:
        return None
    entries = [acl[i : i + 8] for i in range(4, len(acl), 8)]
    return [int.from_bytes(e[4:], "little") for e in entries if e[:2] == b"\x02\x00"]


def test_sharing_grants_the_sandbox_user_and_nobody_else(tmp_path):
    root = make_private_dir(tmp_path / "workspace" / "sub").parent
    write_private(root / "sub" / "data.txt", b"x")
    share_with_sandbox(root, SANDBOX_TEST_UID)
    for path in (root, root / "sub", root / "sub" / "data.txt"):
        assert _mode(path) & 0o007 == 0, f"{path}: others may read it"
        named = _named_acl_users(path)
        if named is None:
            pytest.skip("this file system has no POSIX ACLs (the mode-bit fallback applies)")
        assert named == [SANDBOX_TEST_UID]


SANDBOX_TEST_UID = 2_000_065_999  # an uid of no account, as sandbox.host_uid must be


def test_a_users_directory_keeps_its_mode_and_acl(tmp_path):
    """kgot grants the sandbox access only to what it made: a directory the user chose, and
    the user's own files in it, are left exactly as they were."""
    users = tmp_path / "mine"
    users.mkdir()
    os.chmod(users, 0o755)
    own = users / "notes.txt"
    own.write_text("the user's")
    os.chmod(own, 0o640)
    before = {p: (_mode(p), _named_acl_users(p)) for p in (users, own)}
    write_private(users / "download.bin", b"kgot's")
    make_private_dir(users / "extracted" / "deep")
    share_with_sandbox(users, SANDBOX_TEST_UID)
    assert {p: (_mode(p), _named_acl_users(p)) for p in (users, own)} == before
    for made in (users / "download.bin", users / "extracted", users / "extracted" / "deep"):
        named = _named_acl_users(made)
        assert named in ([SANDBOX_TEST_UID], None), made  # None: no ACLs on this file system


def test_a_users_directory_the_sandbox_cannot_enter_is_refused(tmp_path):
    users = tmp_path / "closed"
    users.mkdir()
    os.chmod(users, 0o700)
    with pytest.raises(ToolFailure) as refused:
        share_with_sandbox(users, SANDBOX_TEST_UID)
    assert f"setfacl -R -m u:{SANDBOX_TEST_UID}:rX {users}" in str(refused.value)
    assert _mode(users) == 0o700 and not _named_acl_users(users)


def test_the_sandbox_names_the_uid_it_reads_files_as():
    from kgot.config import SandboxSettings
    from kgot.sandbox import open_sandbox

    kinds = [kind for kind in ("bwrap", "fallback") if machine_problem(kind) is None]
    if not kinds:
        pytest.skip(f"no isolating sandbox here: {machine_problem('auto')}")
    for kind in kinds:  # kgot refusing a kind this machine can have fails the test
        sandbox = open_sandbox(SandboxSettings(kind=kind, pool_size=0))
        try:
            expected = SandboxSettings().host_uid if os.getuid() == 0 else None
            if getattr(sandbox.launcher, "method", None) == "root":  # type: ignore[attr-defined]
                expected = None  # bubblewrap runs as root here: it reads everything
            assert sandbox_file_uid(sandbox) == expected, kind
        finally:
            sandbox.close()


@pytest.mark.slow
def test_fallback_sandbox_reads_the_private_workspace(samples):
    """The fallback sandbox started by root runs code as its own host uid (sandbox.host_uid)."""
    from kgot.config import SandboxSettings
    from kgot.errors import SandboxUnavailableError
    from kgot.sandbox import open_sandbox

    if os.getuid() != 0:
        pytest.skip("only root runs the fallback sandbox's code under another host uid")
    try:
        sandbox = open_sandbox(SandboxSettings(kind="fallback", pool_size=0))
    except SandboxUnavailableError as error:
        pytest.skip(f"the fallback sandbox cannot run here: {error}")
    try:
        ctx = ToolContext(
            settings=tools_settings(), sandbox=sandbox, attachments=(samples["bundle.zip"],)
        )
        runner = make_runner(ctx)
        assert call(runner, "inspect_file", path="bundle.zip", member="readme.txt").ok
        code = (
            "import glob\n"
            "[path] = glob.glob('/mnt/inputs/workspace/*/readme.txt')\n"
            "print(open(path).read())"
        )
        outcome = call(runner, "python", code=code)
    finally:
        sandbox.close()
    assert outcome.ok, outcome.output
    assert "This bundle holds a table and a report." in outcome.output


def test_a_chosen_workspace_keeps_files_and_is_mounted_as_workspace(server, samples, tmp_path):
    from kgot.config import SandboxSettings
    from kgot.errors import SandboxUnavailableError
    from kgot.sandbox import open_sandbox

    kept = tmp_path / "kept-files"
    url = server.page("/dl/bundle.zip", samples["bundle.zip"].read_bytes(), "application/zip")
    try:
        sandbox = open_sandbox(SandboxSettings(pool_size=0))
    except SandboxUnavailableError as error:
        pytest.skip(f"no isolating sandbox on this machine: {error}")
    try:
        ctx = ToolContext(settings=tools_settings(server), sandbox=sandbox, workspace=kept)
        runner = make_runner(ctx)
        saved = call(runner, "visit_page", url=url)
        assert 'inspect_file(path="workspace/bundle.zip")' in saved.output
        assert (kept / "bundle.zip").is_file()
        code = "import os\nprint(sorted(os.listdir('/mnt/inputs/workspace')))"
        listed = call(runner, "python", code=code)
    finally:
        sandbox.close()
    assert listed.ok, listed.output
    assert "bundle.zip" in listed.output


def test_vision_and_transcription_use_their_own_endpoint_and_key(server, samples):
    from kgot.config import ModelSettings

    def chat(request):
        return Response(
            200,
            json.dumps(
                {
                    "id": "c1",
                    "object": "chat.completion",
                    "created": 0,
                    "model": "vision-test",
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": "A red square, 42."},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                }
            ),
            "application/json",
        )

    def transcribe(request):
        return Response(200, json.dumps({"text": "hello"}), "application/json")

    server.route("/vision/v1/chat/completions", chat)
    server.route("/audio/v1/audio/transcriptions", transcribe)
    settings = tools_settings(
        vision_model="openai:vision-test",
        vision_base_url=server.url("/vision/v1"),
        vision_api_key="vision-key",
        transcription_model="whisper-test",
        transcription_base_url=server.url("/audio/v1"),
        transcription_api_key="audio-key",
    )
    execution = ModelSettings(base_url="http://127.0.0.1:9/v1", api_key="execution-key")
    ctx = ToolContext(
        settings=settings,
        endpoint=execution,
        attachments=(samples["chart.png"], samples["clip.wav"]),
    )
    runner = make_runner(ctx)
    image = call(runner, "inspect_file", path="chart.png")
    audio = call(runner, "inspect_file", path="clip.wav")
    assert image.ok and "A red square, 42." in image.output, image.output
    assert audio.ok and "hello" in audio.output, audio.output
    keys = {r.path: r.headers.get("authorization") for r in server.requests}
    assert keys["/vision/v1/chat/completions"] == "Bearer vision-key"
    assert keys["/audio/v1/audio/transcriptions"] == "Bearer audio-key"


def test_a_workspace_kgot_created_earlier_is_shared_again(tmp_path, monkeypatch):
    """A later kgot process recognises the workspace an earlier one created (its marker file)
    and shares that process's files with the sandbox too."""
    from kgot.tools import access

    workspace = access.make_workspace_dir(tmp_path / "ws")
    write_private(workspace / "earlier.txt", b"x")
    monkeypatch.setattr(access, "_made", set())  # what a new process remembers: nothing
    share_with_sandbox(workspace, SANDBOX_TEST_UID)
    for path in (workspace, workspace / "earlier.txt"):
        assert _named_acl_users(path) in ([SANDBOX_TEST_UID], None), path
    assert _mode(workspace) & 0o007 == 0 and _mode(workspace / "earlier.txt") & 0o007 == 0


def test_a_marker_that_is_a_link_does_not_make_a_directory_kgots(tmp_path, monkeypatch):
    from kgot.tools import access

    users = tmp_path / "closed"
    users.mkdir(mode=0o700)
    (tmp_path / "elsewhere").write_text("")
    (users / access.WORKSPACE_MARKER).symlink_to(tmp_path / "elsewhere")
    monkeypatch.setattr(access, "_made", set())
    with pytest.raises(ToolFailure, match="setfacl"):
        share_with_sandbox(users, SANDBOX_TEST_UID)
    assert _mode(users) == 0o700 and not _named_acl_users(users)


@pytest.mark.slow
def test_two_commands_share_one_workspace(tmp_path):
    """`kgot tools run python … --workspace DIR` twice: the second reads what the first left,
    in a process of its own (the docs' "reuse DIR" workflow)."""
    import subprocess
    import sys

    def run(code: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "kgot.cli.main", "tools", "run", "python"]
        argv += ["--arg", f"code={code}", "--workspace", str(tmp_path / "ws")]
        return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)

    first = run("open('/work/out/kept.txt', 'w').write('from the first command')")
    assert first.returncode == 0, first.stderr
    second = run("print(open('/mnt/inputs/workspace/kept.txt').read())")
    assert second.returncode == 0, second.stderr
    assert "from the first command" in second.stdout


def test_a_hard_linked_marker_does_not_make_a_directory_kgots(tmp_path, monkeypatch):
    from kgot.tools import access

    users = tmp_path / "closed"
    users.mkdir(mode=0o700)
    (tmp_path / "some-file").write_text("")
    os.link(tmp_path / "some-file", users / access.WORKSPACE_MARKER)
    monkeypatch.setattr(access, "_made", set())
    with pytest.raises(ToolFailure, match="setfacl"):
        share_with_sandbox(users, SANDBOX_TEST_UID)


class _SeeingSandbox:
    """Stands in for a sandbox whose jobs read files as another uid and see the host's
    directories except some (the fallback run by root)."""

    name = "fallback"
    file_uid = SANDBOX_TEST_UID

    def __init__(self, hidden: Path) -> None:
        self.hidden = hidden

    def hides_from_jobs(self, path: Path) -> bool:
        return Path(path).resolve().is_relative_to(self.hidden)


def test_a_workspace_every_job_could_see_is_not_shared(tmp_path):
    """Sharing with the uid all runs' jobs use would open the workspace to other runs."""
    visible = tmp_path / "visible-ws"
    sandbox = _SeeingSandbox(tmp_path / "hidden")
    session = ToolSession(
        ToolContext(settings=tools_settings(), sandbox=sandbox, workspace=visible)
    )
    session.save_bytes("notes.txt", b"private")
    with pytest.raises(ToolFailure, match="other runs' jobs") as refused:
        session.sandbox_mounts()
    assert refused.value.kind == "unavailable"
    assert _named_acl_users(visible) in (None, [])  # nothing was granted
    inside = tmp_path / "hidden" / "ws"
    hidden = ToolSession(ToolContext(settings=tools_settings(), sandbox=sandbox, workspace=inside))
    hidden.save_bytes("notes.txt", b"private")
    assert hidden.sandbox_mounts()  # under a hidden directory: shared and mounted


def test_the_fallback_launcher_knows_what_it_hides():
    from kgot.config import SandboxSettings
    from kgot.sandbox.fallback import FallbackLauncher

    launcher = FallbackLauncher(SandboxSettings(), None)
    for hidden in ("/tmp/x", "/home/someone/ws", "/root/ws", "/work/x"):
        if Path("/", Path(hidden).parts[1]).is_dir():  # covered when the host has it
            assert launcher.hides_from_jobs(Path(hidden)), hidden
    assert not launcher.hides_from_jobs(Path("/var/lib/some-workspace"))
    assert not launcher.hides_from_jobs(Path("/opt/some-workspace"))


def test_an_attachment_only_its_owner_may_read_is_given_to_the_sandbox_as_a_copy(tmp_path):
    """kgot leaves the user's file as it is and mounts a private copy the sandbox uid reads."""
    from kgot.tools.access import readable_by

    private = tmp_path / "data.csv"
    private.write_text("secret,1\n")
    os.chmod(private, 0o600)
    folder = tmp_path / "papers"
    folder.mkdir(mode=0o700)
    (folder / "a.txt").write_text("a")
    open_file = tmp_path / "open.txt"
    open_file.write_text("x")
    os.chmod(open_file, 0o644)
    sandbox = _SeeingSandbox(tmp_path)  # hides everything here: only the uid matters
    session = ToolSession(
        ToolContext(
            settings=tools_settings(), sandbox=sandbox, attachments=(private, folder, open_file)
        )
    )
    mounts = session.sandbox_mounts()
    assert [m.name for m in mounts] == ["data.csv", "papers", "open.txt"]  # names kept
    assert mounts[2] == open_file  # readable already: mounted as it is
    for copy, original in zip(mounts[:2], (private, folder), strict=True):
        assert copy != original and not copy.is_relative_to(tmp_path)
        if _named_acl_users(copy) is not None:  # the file system has ACLs
            assert readable_by(copy, SANDBOX_TEST_UID), copy
    assert (mounts[0]).read_text() == "secret,1\n" and (mounts[1] / "a.txt").read_text() == "a"
    assert _mode(private) == 0o600 and _named_acl_users(private) in (None, [])
    assert _mode(folder) == 0o700
    assert session.sandbox_mounts() == mounts  # copied once per session


@pytest.mark.slow
def test_a_private_attachment_reaches_the_python_tool_as_root(tmp_path):
    import subprocess
    import sys

    if os.getuid() != 0:
        pytest.skip("only root runs sandbox code as another uid; otherwise no copy is needed")
    private = tmp_path / "data.csv"
    private.write_text("secret,1\n")
    os.chmod(private, 0o600)
    argv = [sys.executable, "-m", "kgot.cli.main", "tools", "run", "python", "--attach"]
    argv += [str(private), "--arg", "code=print(open('/mnt/inputs/data.csv').read())"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert "secret,1" in done.stdout
    assert _mode(private) == 0o600
