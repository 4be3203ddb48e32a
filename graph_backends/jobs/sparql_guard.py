"""Keeps SPARQL inside the kgot graph: rejects clauses that reach other graphs or the network.

Oxigraph (and any remote endpoint) executes ``LOAD <url>`` and ``SERVICE <url>`` by making HTTP
requests, and named-graph clauses (``GRAPH``, ``FROM``, ``WITH``, ``USING``, graph management)
address data outside the default graph that kgot maps — at a shared endpoint, other runs'
graphs. So every query and update is checked before it runs:

1. ``\\uXXXX`` / ``\\UXXXXXXXX`` escapes are decoded first, as the SPARQL grammar prescribes,
   and the decoded text is what runs afterwards: the engine sees exactly what was checked.
2. A text in which one of the words SERVICE, GRAPH, FROM, NAMED, LOAD, WITH, USING, CREATE,
   COPY, MOVE, ADD, CLEAR or DROP occurs (in any case, anywhere: names, strings and comments
   count too) is parsed with rdflib's SPARQL 1.1 grammar (the whole text must parse), and the
   syntax tree is walked for every construct that leaves the default graph: SERVICE, GRAPH
   patterns and quads, FROM / FROM NAMED, LOAD, WITH, USING, CREATE, COPY, MOVE, ADD, and CLEAR
   or DROP of anything but ``DEFAULT`` (``ALL`` and ``NAMED`` address every graph of the
   store). Such a text that the grammar rejects never runs.

Each of those constructs needs its keyword spelled out in the decoded text, so a text without
any of the words cannot hold one: it skips the parse (and rdflib's import, about 150 ms per
job), which most queries and updates do. The engine still rejects what is not valid SPARQL.
Brackets nested more than :data:`MAX_NESTING` levels deep are refused before either parser
sees them (both recurse per level; Oxigraph's crashes its process).

Parsing costs a few milliseconds per hundred characters and deep nesting recurses, so this
runs inside the sandbox job (its timeout and memory cap bound a pathological text), not in the
host. A light scan of the text's keywords tells queries from updates (for a precise message)
and finds the line and column of a forbidden clause. Standard library + rdflib.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

_ESCAPE = re.compile(r"\\u([0-9A-Fa-f]{4})|\\U([0-9A-Fa-f]{8})")
_BLANKED = re.compile(
    r"""
      '''(?:[^'\\]|\\.|'(?!''))*'''      # long strings
    | \"\"\"(?:[^"\\]|\\.|"(?!""))*\"\"\"
    | '(?:[^'\\\n]|\\.)*'                # short strings
    | "(?:[^"\\\n]|\\.)*"
    | <[^<>"{}|^`\\\x00-\x20]*>          # IRIs (a `<` followed by a space is less-than)
    | \#[^\n]*                           # comments
    """,
    re.VERBOSE | re.DOTALL,
)
# A bare word: not part of a prefixed name, variable, blank node, language tag or number.
_WORD = re.compile(r"(?<![\w:@?$\-%\\])([A-Za-z]+)(?![\w:\-])")
# Any occurrence of a keyword that some forbidden construct needs. Deliberately wider than
# SPARQL's tokens (only letters end a match: `.GRAPH`, `_:graph`, `prop:from` and "Load" all
# count), so a text it finds nothing in certainly holds no such construct.
_MAY_LEAVE_GRAPH = re.compile(
    r"(?<![A-Za-z])(?:SERVICE|GRAPH|FROM|NAMED|LOAD|WITH|USING|CREATE|COPY|MOVE|ADD|CLEAR|DROP)"
    r"(?![A-Za-z])",
    re.IGNORECASE,
)

_ONLY_DEFAULT = "kgot uses only the default graph"
_FORBIDDEN = {
    "SERVICE": "SERVICE (a federated query to another endpoint) is not allowed; "
    "query only the kgot graph",
    "LOAD": "LOAD (fetching a document into the store) is not allowed; "
    "write the triples with INSERT DATA instead",
    "FROM": "FROM / FROM NAMED (a dataset clause) is not allowed; the kgot graph is the "
    "default graph, so remove the clause",
    "GRAPH": f"GRAPH (a named graph) is not allowed; {_ONLY_DEFAULT}, so write the pattern or "
    "triples without GRAPH",
    "WITH": f"WITH (an update's target graph) is not allowed; {_ONLY_DEFAULT}",
    "USING": f"USING (an update's dataset clause) is not allowed; {_ONLY_DEFAULT}",
    "CREATE": f"CREATE (graph management) is not allowed; {_ONLY_DEFAULT}",
    "COPY": f"COPY (graph management) is not allowed; {_ONLY_DEFAULT}",
    "MOVE": f"MOVE (graph management) is not allowed; {_ONLY_DEFAULT}",
    "ADD": f"ADD (graph management) is not allowed; {_ONLY_DEFAULT}",
    "CLEAR": f"CLEAR of anything but DEFAULT (a named graph, NAMED or ALL) is not allowed; "
    f"{_ONLY_DEFAULT}, so write CLEAR DEFAULT",
    "DROP": f"DROP of anything but DEFAULT (a named graph, NAMED or ALL) is not allowed; "
    f"{_ONLY_DEFAULT}, so write DROP DEFAULT",
}
# Syntax-tree nodes (rdflib's names) that always leave the default graph, by keyword.
_CONSTRUCTS = {
    "ServiceGraphPattern": "SERVICE",
    "GraphGraphPattern": "GRAPH",
    "QuadsNotTriples": "GRAPH",
    "DatasetClause": "FROM",
    "Load": "LOAD",
    "UsingClause": "USING",
    "Create": "CREATE",
    "Copy": "COPY",
    "Move": "MOVE",
    "Add": "ADD",
}
# The one CLEAR/DROP target that is the kgot graph. `ALL` (and `NAMED`) mean every graph of the
# store: harmless in a job's private store, but at a shared endpoint other runs' graphs too, so
# the rule is the same everywhere: only the default graph.
_KGOT_GRAPH = "DEFAULT"
QUERY_FORMS = frozenset({"SELECT", "ASK", "CONSTRUCT", "DESCRIBE"})
UPDATE_FORMS = frozenset(
    {"INSERT", "DELETE", "CLEAR", "DROP", "LOAD", "CREATE", "COPY", "MOVE", "ADD", "WITH"}
)
_PROLOGUE = frozenset({"PREFIX", "BASE"})
MAX_MESSAGE = 240
# Deeper bracket nesting is refused before any parser sees it: rdflib's grammar recurses per
# level (its limit in the job is between 500 and 1,000 levels) and Oxigraph's parser crashes
# its process at a few thousand. Real queries nest a handful of levels.
MAX_NESTING = 500
_BRACKET = re.compile(r"[{}()\[\]]")

# Where the engine itself locates a syntax error: (line, column, message) or None.
EngineSyntax = Callable[[str], "tuple[int, int, str] | None"]


@dataclass(frozen=True)
class Finding:
    """Why a SPARQL text cannot run, and where."""

    kind: str  # "forbidden" | "wrong_form" | "wrong_language" | "syntax" | "too_complex"
    message: str
    line: int = 0
    column: int = 0

    def __str__(self) -> str:
        if self.kind == "syntax":
            where = f" at line {self.line}, column {self.column}" if self.line else ""
            return f"SPARQL syntax error{where}: {self.message}"
        where = f"line {self.line}, column {self.column}: " if self.line else ""
        return where + self.message


@dataclass(frozen=True)
class Checked:
    """The text to run (escapes decoded) and, when it must not run, why."""

    text: str
    finding: Finding | None


def decode_escapes(text: str) -> str:
    """``text`` with ``\\uXXXX`` and ``\\UXXXXXXXX`` replaced by their characters.

    Raises:
        ValueError: an escape that names no character (beyond U+10FFFF, or a surrogate).
    """
    if "\\u" not in text and "\\U" not in text:
        return text

    def character(match: re.Match[str]) -> str:
        code = int(match.group(1) or match.group(2), 16)
        if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
            raise ValueError(f"{match.group(0)} is not a Unicode character")
        return chr(code)

    return _ESCAPE.sub(character, text)


def keywords(text: str) -> list[tuple[str, int]]:
    """Upper-cased bare words of ``text`` with their offsets, outside strings/IRIs/comments."""
    return [(m.group(1).upper(), m.start(1)) for m in _WORD.finditer(_blanked(text))]


def _blanked(text: str) -> str:
    """``text`` with strings, IRIs and comments blanked out (line breaks and offsets kept)."""
    return _BLANKED.sub(lambda m: re.sub(r"[^\n]", " ", m.group()), text)


def form_of(text: str) -> str | None:
    """``query``, ``update`` or ``None`` (no SPARQL form found), from the first keyword after
    the prologue."""
    for word, _ in keywords(text):
        if word in _PROLOGUE:
            continue
        if word in QUERY_FORMS:
            return "query"
        if word in UPDATE_FORMS:
            return "update"
        return None
    return None


def looks_like_python(text: str) -> bool:
    return bool(
        re.search(r"^\s*(import |from \w+ import |def |for .+ in .+:|result\s*=)", text, re.M)
        or re.search(r"\bG\.(nodes|edges|add_|successors|predecessors)", text)
    )


def check(
    text: str,
    expected: str,
    engine_syntax: EngineSyntax | None = None,
    *,
    standard_only: bool = False,
) -> Checked:
    """Whether ``text`` may run as ``expected`` (``query`` or ``update``), and the text to run.

    Args:
        text: the SPARQL the model wrote.
        expected: ``query`` (SELECT, ASK, CONSTRUCT, DESCRIBE) or ``update``.
        engine_syntax: locates a syntax error the way the engine would (its messages are more
            precise than the grammar's); called only for texts the grammar rejects.
        standard_only: parse every text, so that only SPARQL 1.1 passes. For engines whose
            extensions kgot does not know (a remote endpoint: Virtuoso's ``DEFINE
            input:grab-all`` fetches IRIs without any of the keywords).

    Otherwise texts in which no keyword of a forbidden construct occurs are not parsed here:
    they pass, and the engine (Oxigraph, whose only ways out are SERVICE and LOAD) reports their
    syntax errors when it runs them.
    """
    try:
        decoded = decode_escapes(text)
    except ValueError as error:
        return Checked(text, Finding("syntax", str(error)))
    if decoded is not text and _ESCAPE.search(decoded):
        # An engine that decodes escapes once more would run something else than was checked.
        return Checked(
            text,
            Finding("syntax", "an escape sequence spells another escape; write the characters"),
        )
    finding = _form_finding(decoded, expected) or _nesting_finding(decoded)
    if finding is None and (standard_only or may_leave_graph(decoded)):
        finding = _parse_finding(decoded, expected, engine_syntax)
    return Checked(decoded, finding)


def may_leave_graph(text: str) -> bool:
    """Whether ``text`` (escapes decoded) spells a keyword of a construct that leaves the
    default graph anywhere; only such texts need the parse."""
    return _MAY_LEAVE_GRAPH.search(text) is not None


def _form_finding(text: str, expected: str) -> Finding | None:
    form = form_of(text)
    if form is None and looks_like_python(text):
        return Finding(
            "wrong_language",
            "this looks like Python, but this graph takes SPARQL "
            + ("(SELECT or ASK)" if expected == "query" else "UPDATE (INSERT DATA { … })"),
        )
    if form == "update" and expected == "query":
        return Finding(
            "wrong_form",
            "this is a SPARQL UPDATE, but a read query is expected: write SELECT … WHERE { … } "
            "or ASK { … }",
        )
    if form == "query" and expected == "update":
        return Finding(
            "wrong_form",
            "this is a SPARQL query, but graph changes are SPARQL UPDATEs: INSERT DATA { … }, "
            "DELETE DATA { … } or DELETE { … } INSERT { … } WHERE { … }",
        )
    return None


def _nesting_finding(text: str) -> Finding | None:
    """Brackets (outside strings, IRIs and comments) nested deeper than :data:`MAX_NESTING`."""
    depth = 0
    for match in _BRACKET.finditer(_blanked(text)):
        if match.group() in "{([":
            depth += 1
            if depth > MAX_NESTING:
                line, column = _line_column(text, match.start())
                return Finding(
                    "too_complex",
                    f"the text nests brackets more than {MAX_NESTING} levels deep; write it with "
                    "fewer nested groups",
                    line,
                    column,
                )
        else:
            depth = max(0, depth - 1)
    return None


def _parse_finding(text: str, expected: str, engine_syntax: EngineSyntax | None) -> Finding | None:
    from pyparsing import ParseBaseException
    from rdflib.plugins.sparql import parser

    try:
        tree = (parser.Query if expected == "query" else parser.UpdateUnit).parse_string(
            text, parse_all=True
        )
    except ParseBaseException as error:
        return _syntax_finding(text, error, engine_syntax)
    except RecursionError:
        return Finding(
            "too_complex",
            "the text nests brackets too deeply to be checked; write it with fewer nested groups",
        )
    for keyword in _forbidden_constructs(tree):
        line, column = _position(text, keyword)
        return Finding("forbidden", _FORBIDDEN[keyword], line, column)
    return None


def _syntax_finding(text: str, error: Any, engine_syntax: EngineSyntax | None) -> Finding:
    located = engine_syntax(text) if engine_syntax is not None else None
    if located is not None:
        line, column, message = located
    else:  # the grammar's own account: where it gave up and what it found there
        line, column = error.lineno, error.col
        found = getattr(error, "found", "")
        message = f"unexpected {found}" if found else "this is not valid SPARQL 1.1"
    message = " ".join(message.split())
    if len(message) > MAX_MESSAGE:
        message = message[:MAX_MESSAGE] + "…"
    return Finding("syntax", message, line, column)


def _forbidden_constructs(tree: Any) -> Iterator[str]:
    """Keywords of the constructs in an rdflib syntax tree that leave the default graph.

    The walk uses its own stack: trees of deeply nested texts are deep.
    """
    from rdflib.plugins.sparql.parserutils import CompValue

    stack = [tree]
    while stack:
        item = stack.pop()
        if isinstance(item, str):  # terms (IRIs, variables, literals) are strings
            continue
        if isinstance(item, CompValue):
            keyword = _CONSTRUCTS.get(item.name)
            if keyword is not None:
                yield keyword
            # CompValue.get answers the key's name for a missing key: use dict's own lookup.
            elif item.name == "Modify" and dict.get(item, "withClause") is not None:
                yield "WITH"
            elif item.name in ("Clear", "Drop") and dict.get(item, "graphiri") != _KGOT_GRAPH:
                yield item.name.upper()
            stack.extend(reversed(list(dict.values(item))))
        elif isinstance(item, dict):
            stack.extend(reversed(list(item.values())))
        elif hasattr(item, "__iter__"):  # ParseResults, lists
            stack.extend(reversed(list(item)))


def _position(text: str, keyword: str) -> tuple[int, int]:
    """Line and column of the first ``keyword`` outside strings, IRIs and comments."""
    for word, offset in keywords(text):
        if word == keyword:
            return _line_column(text, offset)
    return 0, 0


def _line_column(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1
