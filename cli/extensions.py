"""Commands other packages add to `kgot`: the ``kgot.cli`` extension point
(:mod:`kgot.extension_points`; the advisor's `kgot aide user …`, `briefing`, … come this way).

An entry point of the group names ``register(groups: CommandGroups) -> None``. It adds a
command group of its own (``groups.root.add_typer(its_app, name="…")``) or commands to one of
kgot's groups (``groups.group("aide").command("…")(…)``). Every ``kgot`` command, ``--help``
included, runs the registrations as it starts, so an extension's module imports typer and what
its commands' signatures need, and leaves everything else to the commands' bodies.

An extension that cannot be loaded or registered is not dropped silently: every command then
stops with one ``kgot: error: …`` line naming it and the fix (exit 2).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import typer

from kgot.errors import ConfigError, KgotError
from kgot.extension_points import CLI_COMMANDS, Registry, function_check

__all__ = ["COMMAND_EXTENSIONS", "CommandGroups", "CommandRegistration", "add_extension_commands"]


@dataclass(frozen=True)
class CommandGroups:
    """What a command extension may extend: the `kgot` command and its groups by name."""

    root: typer.Typer
    groups: Mapping[str, typer.Typer]

    def group(self, name: str) -> typer.Typer:
        """The `kgot NAME` group.

        Raises:
            ConfigError: kgot has no such group.
        """
        found = self.groups.get(name)
        if found is None:
            raise ConfigError(
                f"kgot has no `kgot {name}` command group to extend; its groups: "
                f"{', '.join(sorted(self.groups))}"
            )
        return found


CommandRegistration = Callable[[CommandGroups], None]


COMMAND_EXTENSIONS: Registry[CommandRegistration] = Registry(
    CLI_COMMANDS, "command extension", function_check("register(groups)")
)


def add_extension_commands(groups: CommandGroups) -> list[ConfigError]:
    """Let every command extension add its commands, in name order; what went wrong, one
    error per extension that could not (the others' commands are added all the same)."""
    failures: list[ConfigError] = []
    for name in COMMAND_EXTENSIONS.names():
        try:
            register = COMMAND_EXTENSIONS.get(name)
        except ConfigError as error:  # it names the extension, its distribution and the fix
            failures.append(error)
            continue
        if register is None:
            continue
        try:
            register(groups)
        except Exception as error:  # a third party's registration may fail in any way
            said = error if isinstance(error, KgotError) else f"{type(error).__name__}: {error}"
            failures.append(
                ConfigError(
                    f"the command extension {name!r} could not add its commands: {said}; "
                    "reinstall or uninstall the distribution that provides it"
                )
            )
    return failures
