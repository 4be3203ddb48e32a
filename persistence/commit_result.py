"""What one commit did, as data: :class:`CommitResult` (pure, no database access).

:meth:`~kgot.persistence.EntitySession.commit` returns it, built from the commit's plan while
the rows are written, so a caller that reports a write (a run's trace, an ingestion's report,
the MCP ``save_facts`` answer) reads the facts it wrote, stated again or closed from here
instead of reading each fact's history back or parsing the commit's summary, which is text for
people.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from kgot.persistence.facts import FactKey


@dataclass(frozen=True)
class CommitResult:
    """The outcome of one :meth:`~kgot.persistence.EntitySession.commit`.

    Attributes:
        version: the entity's version after the call: the new version when something was
            written, else the version the change was checked against (or, for a result key
            committed before, that commit's version).
        written: a new version was written.
        already_committed: the provenance's result key had a commit already, so nothing was
            written again (``version`` is that commit's).
        written_facts: the facts this commit wrote a row for (new facts and new versions of
            changed ones), as fact keys.
        restated: facts the change added as the store already holds them: no row was written,
            the store counted them as ``corroborated`` (by a source new to the fact) or
            ``reinforced`` (by one it had).
        corroborated / reinforced: how many of ``restated`` each.
        closed: the facts that stopped being current, with the reason they closed for
            (``changed``, ``removed``, ``contradicted``, ``expired``, …).
        summary: the line the commit is listed with (``kgot graph log``); for display only.
    """

    version: int
    written: bool = False
    already_committed: bool = False
    written_facts: frozenset[FactKey] = frozenset()
    restated: tuple[FactKey, ...] = ()
    corroborated: int = 0
    reinforced: int = 0
    closed: Mapping[FactKey, str] = field(default_factory=lambda: MappingProxyType({}))

    summary: str = ""

    def wrote(self, key: FactKey) -> bool:
        """Whether this commit wrote a row for the fact ``key``."""
        return key in self.written_facts
