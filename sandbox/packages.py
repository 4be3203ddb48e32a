"""Opt-in packages for LLM-written code: an allow-list and a read-only cache, never ``pip`` inside.

KGoT lets the model ``pip install`` whatever it likes; kgot does not. By default a job can import
only what the host's Python already has. A user may list packages in
``SandboxSettings.allow_packages`` (``[sandbox] allow_packages = ["scipy", "shapely>=2"]``); a job
that asks for them (:attr:`Job.packages`) gets them installed **on the host**, by pip, as
binary wheels only (no build scripts run), into a cache directory that every sandbox mounts
read-only at ``/opt/kgot/packages`` and puts on ``sys.path``. Nothing in the sandbox can write
there, and a name outside the allow-list is refused before anything is downloaded.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from collections.abc import Set as AbstractSet
from importlib import metadata
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from kgot.config import SandboxSettings, default_data_dir
from kgot.errors import ConfigError

INSTALL_TIMEOUT_S = 600.0
_LOCK_NAME = ".kgot-install.lock"
# Entries pip --target makes that no RECORD lists inside the cache (console scripts are recorded
# relative to the temporary prefix pip installed into).
_PIP_TARGET_EXTRAS = ("bin", "__pycache__")


class PackageRefused(Exception):
    """A job asked for a package that is not allowed or could not be installed (one line)."""


def packages_dir(settings: SandboxSettings) -> Path:
    """Where allowed packages are installed for this Python version."""
    if settings.packages_dir:
        return Path(settings.packages_dir).expanduser()
    tag = f"py{sys.version_info.major}{sys.version_info.minor}"
    return default_data_dir() / "sandbox-packages" / tag


class PackageCache:
    """Installs allowed packages into the shared read-only cache, once each.

    Safe across threads and processes: two kgot processes sharing ``packages_dir`` take turns
    (a file lock), and the second finds the package installed by the first.
    """

    def __init__(self, settings: SandboxSettings) -> None:
        self.settings = settings
        self.directory = packages_dir(settings)
        self.allowed: dict[str, Requirement] = {}
        for entry in settings.allow_packages:
            try:
                requirement = Requirement(entry)
            except InvalidRequirement as error:
                raise ConfigError(
                    f"invalid entry {entry!r} in sandbox.allow_packages ({error}); "
                    "use a pip requirement such as `scipy` or `scipy>=1.13`"
                ) from None
            self.allowed[canonicalize_name(requirement.name)] = requirement
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return bool(self.allowed)

    def prepare(self) -> Path | None:
        """Create the cache directory (so sandboxes can mount it); ``None`` when disabled."""
        if not self.enabled:
            return None
        self.directory.mkdir(parents=True, exist_ok=True)
        return self.directory

    def installed(self) -> dict[str, str]:
        """The distributions already in the cache: canonical name → version."""
        if not self.directory.is_dir():
            return {}
        return {
            canonicalize_name(name): dist.version
            for dist in metadata.distributions(path=[str(self.directory)])
            if (name := dist.metadata["Name"])
        }

    def satisfied(self, requirement: Requirement, installed: dict[str, str]) -> bool:
        """Whether the cache holds a version the allow-list entry accepts (an entry changed
        from ``scipy`` to ``scipy>=1.14`` no longer accepts a cached 1.13)."""
        version = installed.get(canonicalize_name(requirement.name))
        return version is not None and requirement.specifier.contains(version, prereleases=True)

    def clear(self) -> int:
        """Remove every installed package from the cache (under the install lock, so no install
        is half-removed); returns how many distributions were removed. Running sandboxes see
        the cache empty from their next job.

        Raises:
            ConfigError: the directory holds something no cached package installed
                (``packages_dir`` names a directory of the user's own): nothing is removed.
        """
        if not self.directory.is_dir():
            return 0
        with self._lock, self._installing():
            removed = len(self.installed())
            owned = self._owned_entries()
            foreign = sorted(e.name for e in self.directory.iterdir() if e.name not in owned)
            if foreign:
                shown = ", ".join(repr(name) for name in foreign[:5])
                more = f" and {len(foreign) - 5} more" if len(foreign) > 5 else ""
                raise ConfigError(
                    f"sandbox.packages_dir {self.directory} holds {shown}{more}, which no "
                    "package in the cache installed; kgot empties only a directory of its own "
                    "and removed nothing: point packages_dir at an empty directory, or remove "
                    "what is there yourself"
                )
            for entry in self.directory.iterdir():
                if entry.name == _LOCK_NAME:
                    continue
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry)
                else:
                    entry.unlink()
        return removed

    def ensure(self, names: tuple[str, ...] | list[str]) -> None:
        """Install the requested packages unless already cached.

        Raises:
            PackageRefused: a name is not on the allow-list, or pip failed (its last line).
        """
        wanted: list[Requirement] = []
        for name in names:
            canonical = canonicalize_name(name.strip())
            if canonical not in self.allowed:
                allowed = ", ".join(sorted(self.allowed)) or "none"
                raise PackageRefused(
                    f"package {name!r} is not allowed in the sandbox (allowed: {allowed}); "
                    "use the libraries already available, or ask the user to add it to "
                    "sandbox.allow_packages"
                )
            wanted.append(self.allowed[canonical])
        present = self.installed()
        if all(self.satisfied(r, present) for r in wanted):
            return
        with self._lock, self._installing():
            installed = self.installed()
            missing = [r for r in wanted if not self.satisfied(r, installed)]
            if missing:
                # pip --target leaves an old version's metadata beside the new one: remove the
                # stale distribution first, so the cache holds one version of each package.
                self._remove({canonicalize_name(r.name) for r in missing} & set(installed))
                self._install(missing)

    def _owned_entries(self) -> set[str]:
        """The top-level names in the cache that its distributions installed (from their
        RECORD files), plus the lock and what ``pip --target`` adds beside them."""
        owned = {_LOCK_NAME, *_PIP_TARGET_EXTRAS}
        root = self.directory.resolve()
        for dist in metadata.distributions(path=[str(self.directory)]):
            owned.update(path.relative_to(root).parts[0] for path in self._record_paths(dist))
        return owned

    def _record_paths(self, dist: metadata.Distribution) -> Iterator[Path]:
        """The resolved paths of ``dist``'s RECORD entries that lie inside the cache (an entry
        pointing outside it is never touched)."""
        root = self.directory.resolve()
        for file in dist.files or ():
            path = (self.directory / file).resolve()
            if root in path.parents:
                yield path

    def _remove(self, names: AbstractSet[str]) -> None:
        """Delete the files of these cached distributions (from their RECORD), then the
        directories left empty."""
        root = self.directory.resolve()
        for dist in metadata.distributions(path=[str(self.directory)]):
            if canonicalize_name(dist.metadata["Name"] or "") not in names:
                continue
            parents: set[Path] = set()
            for path in self._record_paths(dist):
                path.unlink(missing_ok=True)
                parents.update(p for p in path.parents if root in p.parents)
            for directory in sorted(parents, key=lambda p: len(p.parts), reverse=True):
                with contextlib.suppress(OSError):  # not empty: other packages' files
                    directory.rmdir()

    @contextlib.contextmanager
    def _installing(self) -> Iterator[None]:
        """Hold the cache's install lock (blocks while another process installs)."""
        self.prepare()
        fd = os.open(self.directory / _LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # releases the lock

    def _install(self, requirements: list[Requirement]) -> None:
        self.prepare()
        command = [
            sys.executable, "-m", "pip", "install",
            "--target", str(self.directory),
            "--only-binary=:all:",  # wheels only: no package's build script runs on the host
            "--upgrade",  # replaces a cached version the allow-list no longer accepts
            "--no-input", "--disable-pip-version-check", "--quiet",
            *self.settings.pip_args,
            *(str(r) for r in requirements),
        ]  # fmt: skip
        try:
            done = subprocess.run(
                command, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S, check=False
            )
        except subprocess.TimeoutExpired:
            raise PackageRefused(
                f"installing {', '.join(map(str, requirements))} took over "
                f"{INSTALL_TIMEOUT_S:g} s; try again later"
            ) from None
        if done.returncode != 0:
            lines = [line for line in done.stderr.splitlines() if line.strip()]
            raise PackageRefused(
                f"could not install {', '.join(map(str, requirements))}: "
                f"{lines[-1] if lines else f'pip exited with {done.returncode}'}"
            )
