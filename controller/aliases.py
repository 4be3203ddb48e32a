"""Graph code of entity runs that names a merged-away node id reaches the canonical node.

Memory upkeep merges nodes that are one real thing (``kgot memory resolve``, write-time
resolution): the alias ids leave the current graph, so the graph the sandbox sees has no node
``apple_old`` once it was merged into ``apple``. A model (or an aide's notes) may still hold the
old id. Before graph code runs, every *exact* mention of a merged-away id is replaced by the id of
the node it now is:

* Python: a string literal whose value is exactly the id (``G.nodes["apple_old"]``); f-strings
  and ids built at run time are left alone.
* SPARQL: the node's IRI, as a prefixed name (``node:apple_old``) or in full
  (``<urn:kgot:node:apple_old>``).

Nothing else in the code changes, and code naming no merged-away id runs byte for byte as
written. The alias map is read once per entity version.
"""

from __future__ import annotations

import ast
import asyncio
import io
import re
import threading
import tokenize
import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kgot.graph_backends import RDF_NODE, rdf_decode_local, rdf_encode_local

if TYPE_CHECKING:
    from kgot.controller.context import RunContext
    from kgot.persistence import EntitySession

__all__ = ["canonical_code", "current_aliases", "rewrite_aliases"]

# A prefixed node name (`node:` then a local part that does not end in '.'), or a full node IRI.
_PREFIXED = re.compile(r"(?<![\w:\-%])node:((?:[\w\-%:]|\.(?=[\w\-%:]))+)")
_FULL = re.compile("<" + re.escape(RDF_NODE) + r"([^>\s]+)>")


def rewrite_aliases(code: str, aliases: Mapping[str, str], language: str) -> str:
    """``code`` with each exact mention of a key of ``aliases`` replaced by its value
    (``language``: ``python`` or ``sparql``)."""
    if not aliases or not code:
        return code
    if language == "sparql":
        return _rewrite_sparql(code, aliases)
    return _rewrite_python(code, aliases)


def _rewrite_sparql(query: str, aliases: Mapping[str, str]) -> str:
    def prefixed(match: re.Match[str]) -> str:
        target = aliases.get(rdf_decode_local(match.group(1)))
        return match.group(0) if target is None else "node:" + rdf_encode_local(target)

    def full(match: re.Match[str]) -> str:
        target = aliases.get(rdf_decode_local(match.group(1)))
        return match.group(0) if target is None else f"<{RDF_NODE}{rdf_encode_local(target)}>"

    return _FULL.sub(full, _PREFIXED.sub(prefixed, query))


def _rewrite_python(code: str, aliases: Mapping[str, str]) -> str:
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return code  # not Python: the sandbox reports the error as written
    line_starts = [0]
    for line in code.splitlines(keepends=True):
        line_starts.append(line_starts[-1] + len(line))
    edits: list[tuple[int, int, str]] = []
    for token in tokens:
        if token.type != tokenize.STRING:
            continue
        try:
            value = ast.literal_eval(token.string)
        except (ValueError, SyntaxError):
            continue  # an f-string or a concatenation: built at run time
        if isinstance(value, str) and value in aliases:
            start = line_starts[token.start[0] - 1] + token.start[1]
            end = line_starts[token.end[0] - 1] + token.end[1]
            edits.append((start, end, repr(aliases[value])))
    for start, end, text in reversed(edits):
        code = code[:start] + text + code[end:]
    return code


class _AliasCache:
    """The alias map of each live session, valid while the entity's version is the same."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._maps: weakref.WeakKeyDictionary[Any, tuple[int, dict[str, str]]] = (
            weakref.WeakKeyDictionary()
        )

    def get(self, session: EntitySession) -> dict[str, str]:
        version = session.version  # the run's view: merges by others reach it on refresh
        with self._lock:
            found = self._maps.get(session)
        if found is not None and found[0] == version:
            return found[1]
        aliases = _resolved(session.merged_ids())
        with self._lock:
            self._maps[session] = (version, aliases)
        return aliases


def _resolved(merged: Mapping[str, str]) -> dict[str, str]:
    """Each merged-away id mapped to the end of its chain of merges."""
    resolved: dict[str, str] = {}
    for alias in merged:
        seen = {alias}
        target = merged[alias]
        while target in merged and target not in seen:
            seen.add(target)
            target = merged[target]
        if target != alias:
            resolved[alias] = target
    return resolved


_CACHE = _AliasCache()


def current_aliases(session: EntitySession) -> dict[str, str]:
    """Merged-away id → the node it now is, for ``session``'s entity."""
    return _CACHE.get(session)


async def canonical_code(ctx: RunContext, code: str) -> str:
    """``code`` as it runs in ``ctx``'s run: unchanged without an entity or merged-away ids."""
    if ctx.session is None:
        return code
    aliases = await asyncio.to_thread(current_aliases, ctx.session)
    return rewrite_aliases(code, aliases, ctx.backend.language.name)
