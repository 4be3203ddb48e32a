"""`kgot sandbox …`: run a file in the sandbox, and check which isolation is active."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from kgot.cli.common import print_json, settings_from
from kgot.errors import UsageError

app = typer.Typer(
    help="Run code in the sandbox LLM-written code runs in, and check its guarantees.",
    no_args_is_help=True,
)

SandboxOption = Annotated[
    str | None,
    typer.Option(
        "--sandbox",
        help="Isolation: auto, bwrap, fallback, docker or subprocess (no isolation).",
        show_default=False,
    ),
]
_TIMEOUT_EXIT = 124  # what coreutils' `timeout` uses


@app.command("exec")
def exec_file(
    ctx: typer.Context,
    file: Annotated[Path, typer.Option("--file", "-f", help="Python file to run.")],
    timeout: Annotated[
        float | None, typer.Option("--timeout", help="Wall-clock seconds.", show_default=False)
    ] = None,
    memory_mb: Annotated[
        int | None, typer.Option("--memory-mb", help="Memory limit in MB.", show_default=False)
    ] = None,
    mount: Annotated[
        list[Path] | None,
        typer.Option(
            "--mount", help="Host file or directory shown read-only at /mnt/inputs/<name>."
        ),
    ] = None,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Print {stdout, stderr, exit_code, timed_out, error, …}; `outputs` lists the "
            "names of the files left in /work/out.",
        ),
    ] = False,
    sandbox: SandboxOption = None,
) -> None:
    """Run FILE in the sandbox; exit with its exit code (124 on timeout)."""
    if file.is_dir():
        raise UsageError(f"{file} is a directory; pass a Python file with --file")
    if not file.is_file():
        raise UsageError(f"file {file} does not exist; pass a Python file with --file")
    try:
        code = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise UsageError(f"cannot read {file}: {error}; pass a UTF-8 Python file") from None
    mounts = []
    for path in mount or []:
        if not path.exists():
            raise UsageError(f"mount {path} does not exist; pass an existing file to --mount")
        mounts.append(path.resolve())  # `--mount .` shows the directory under its own name
    settings = settings_from(ctx, _overrides(sandbox, timeout, memory_mb)).sandbox
    settings = settings.model_copy(update={"pool_size": 0})  # one job: no warm pool to keep

    from kgot.sandbox import Job, open_sandbox

    box = open_sandbox(settings)
    try:
        result = box.run(Job(code, mounts=tuple(mounts)))
    except ValueError as error:  # a job the contract refuses: two mounts with one name, `/`
        raise UsageError(f"{error}; pass files or directories with distinct names") from None
    finally:
        box.close()
    if as_json:
        print_json(
            {
                "stdout": result.stdout,
                "stderr": result.stderr,
                "exit_code": result.exit_code,
                "timed_out": result.timed_out,
                "error": result.error,
                "duration_ms": round(result.duration_ms, 3),
                "sandbox": box.name,
                "outputs": sorted(result.outputs),
                "truncated": result.truncated,
            }
        )
    else:
        typer.echo(result.stdout, nl=False)
        typer.echo(result.stderr, nl=False, err=True)
        if result.error:
            typer.echo(f"kgot: sandbox: {result.error}", err=True)
    if result.timed_out:
        raise typer.Exit(_TIMEOUT_EXIT)
    if result.exit_code is None:
        raise typer.Exit(1)
    code_out = result.exit_code if result.exit_code >= 0 else 128 - result.exit_code
    raise typer.Exit(code_out)


@app.command("check")
def check(
    ctx: typer.Context,
    sandbox: SandboxOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the checks as JSON.")] = False,
) -> None:
    """Show which isolation is active, then self-test its guarantees (exit 1 if one fails)."""
    settings = settings_from(ctx, _overrides(sandbox, None, None)).sandbox
    settings = settings.model_copy(update={"pool_size": 1})

    from kgot.sandbox import open_sandbox, self_test

    box = open_sandbox(settings)
    try:
        description = _describe(box)
        results = self_test(box)
    finally:
        box.close()
    failed = [r for r in results if not r.passed]
    if as_json:
        print_json(
            {
                **description,
                "checks": [
                    {"name": r.name, "passed": r.passed, "detail": r.detail, "warning": r.warning}
                    for r in results
                ],
                "ok": not failed,
            }
        )
    else:
        typer.echo(f"isolation: {description['isolation']}")
        for key in ("process_cap", "tool", "warning"):
            if description.get(key):
                typer.echo(f"{key.replace('_', ' ')}: {description[key]}")
        for result in results:
            typer.echo(f"{'PASS' if result.passed else 'FAIL'}  {result.name}: {result.detail}")
            if result.warning:
                typer.echo(f"WARN  {result.name}: {result.warning}")
        typer.echo(f"{len(results) - len(failed)}/{len(results)} guarantees hold")
    if failed:
        raise typer.Exit(1)


@app.command("packages")
def packages(
    ctx: typer.Context,
    clear: Annotated[
        bool, typer.Option("--clear", help="Remove every package from the sandbox's cache.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the listing as JSON.")] = False,
) -> None:
    """List the allow-listed packages and what the sandbox's package cache holds (--clear
    empties it; allowed packages are installed again when a job next asks for them)."""
    from kgot.sandbox import PackageCache

    cache = PackageCache(settings_from(ctx, {}).sandbox)
    removed = cache.clear() if clear else 0
    installed = cache.installed()
    rows = []
    for name, requirement in sorted(cache.allowed.items()):
        version = installed.get(name)
        if version is None:
            state = "not installed (installed when a job asks for it)"
        elif cache.satisfied(requirement, installed):
            state = "installed"
        else:
            state = f"stale: {version} does not satisfy {requirement}; reinstalled on next use"
        rows.append({"requirement": str(requirement), "version": version, "state": state})
    others = sorted(set(installed) - set(cache.allowed))  # dependencies pip brought along
    if as_json:
        print_json(
            {
                "directory": str(cache.directory),
                "allowed": rows,
                "dependencies": {name: installed[name] for name in others},
                "removed": removed,
            }
        )
        return
    if clear:
        typer.echo(f"removed {removed} package(s) from {cache.directory}")
    typer.echo(f"cache: {cache.directory}")
    if not rows:
        typer.echo("allowed: none (set [sandbox] allow_packages to let jobs ask for packages)")
    for row in rows:
        typer.echo(f"  {row['requirement']}: {row['state']}")
    if others:
        listed = ", ".join(f"{name} {installed[name]}" for name in others)
        typer.echo(f"dependencies in the cache: {listed}")


def _overrides(kind: str | None, timeout: float | None, memory_mb: int | None) -> dict[str, Any]:
    return {"sandbox.kind": kind, "sandbox.timeout": timeout, "sandbox.memory_mb": memory_mb}


def _describe(box: Any) -> dict[str, str]:
    """What the active sandbox is built from, for the first lines of `check`."""
    description = {"isolation": box.name}
    launcher = getattr(box, "launcher", None)
    if launcher is not None:
        caps = {
            "cgroup+rlimit": "RLIMIT_NPROC (unprivileged uid) + pids and memory cgroup per worker",
            "rlimit": "RLIMIT_NPROC (unprivileged uid); no memory cgroup",
            "cgroup": "pids + memory cgroup per worker",
            "none": "NOT ENFORCED (root without a writable pids cgroup)",
        }
        description["process_cap"] = caps.get(launcher.process_cap, launcher.process_cap)
    bwrap = getattr(launcher, "bwrap", None)
    if bwrap and launcher is not None:
        description["tool"] = f"{bwrap} ({launcher.describe()})"
        if launcher.note:
            description["warning"] = launcher.note
    if box.name.startswith("fallback"):
        from kgot.sandbox import FALLBACK_WARNING

        description["warning"] = FALLBACK_WARNING
    if box.name == "subprocess":
        description["warning"] = "no file-system or network isolation: trusted code only"
    return description
