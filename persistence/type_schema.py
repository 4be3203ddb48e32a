"""The JSON Schema dialect kgot types use: Draft 2020-12 with a linear-time regex engine.

Type schemas come from users and from the model, and every fact written to an entity is checked
against them, so checking must never hang or crash:

* ``pattern``, ``patternProperties`` and ``format: regex`` run on RE2 (``google-re2``), whose
  matching time is linear in the text: a backtracking pattern such as ``^(a+)+$`` cannot stall a
  run. RE2 has no backreferences or lookaround; a schema using them is refused when the type is
  created, naming the JSON path.
* The accepted ``format`` names are a fixed list (:data:`ACCEPTED_FORMATS`), each of which must
  really be checked; a missing checker package is an install error, never a silently unchecked
  format.
* ``$ref`` must be local and resolve, and no chain of ``$ref`` / ``allOf`` / ``anyOf`` /
  ``oneOf`` / ``not`` / ``if`` … may lead back to where it started without consuming input
  (validation would recurse forever); schemas and values nest at most :data:`MAX_SCHEMA_DEPTH`
  and :data:`MAX_VALUE_DEPTH` levels.
* Every keyword costs time linear in the value it checks: ``uniqueItems`` compares items by
  hashing (jsonschema's own check is quadratic for arrays of objects), ``iri`` /
  ``iri-reference`` are checked as the URI their non-ASCII characters map to (RFC 3987 §3.1)
  instead of by a parser that took half a millisecond per character, and ``uri-template`` by
  an RE2 pattern of RFC 6570's grammar (the package's validator is quadratic).
* What no per-keyword bound catches — a schema whose branches multiply (``anyOf`` in ``anyOf``
  …) — stops at a deadline (:func:`check_deadline`): every keyword checks the clock, and a
  check past its deadline raises :class:`CheckTimeout`. A new type must check its own example
  (or ``{}``) within :data:`TYPE_CHECK_SECONDS`.
"""

from __future__ import annotations

import functools
import json
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, NamedTuple
from urllib.parse import quote, unquote

import re2

from kgot.errors import KgotError

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError

# The `$schema` values a properties schema may declare: the one dialect it is validated with.
DIALECT_URIS = (
    "https://json-schema.org/draft/2020-12/schema",
    "https://json-schema.org/draft/2020-12/schema#",
)
MAX_SCHEMA_DEPTH = 40  # nesting of objects/arrays in a properties schema
MAX_VALUE_DEPTH = 32  # nesting of objects/arrays in one fact's properties
TYPE_CHECK_SECONDS = 5.0  # a new type's schema must check its example (or `{}`) within this
ACCEPTED_FORMATS = (
    "date",
    "date-time",
    "duration",
    "email",
    "hostname",
    "idn-email",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "iri",
    "iri-reference",
    "json-pointer",
    "regex",
    "relative-json-pointer",
    "time",
    "uri",
    "uri-reference",
    "uri-template",
    "uuid",
)
RESERVED_PREFIX = "_"
# Property names the graph backends and graph files use for the fact's own identity and type:
# a property of that name would be overwritten on load or make the graph unexportable.
RESERVED_PROPERTY_NAMES: Mapping[str, frozenset[str]] = {
    "node": frozenset({"id", "label"}),
    "edge": frozenset({"relationship", "source", "target", "key"}),
}

# Keywords whose value is one subschema, a map of subschemas, or a list of subschemas.
_ONE = frozenset(
    {
        "additionalProperties",
        "unevaluatedProperties",
        "items",
        "contains",
        "propertyNames",
        "not",
        "if",
        "then",
        "else",
        "unevaluatedItems",
        "additionalItems",
    }
)
_MAP = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})
_LIST = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
# Applicators that check the same instance again: a cycle through only these never ends.
_SAME_INSTANCE_ONE = frozenset({"not", "if", "then", "else"})
_SAME_INSTANCE_LIST = frozenset({"allOf", "anyOf", "oneOf"})
_DATA_KEYWORDS = frozenset({"enum", "const", "default", "examples"})


class FormatCheckerMissing(KgotError):
    """kgot was installed without the packages that check some accepted ``format`` s."""


class CheckTimeout(Exception):
    """Validation went past the deadline of :func:`check_deadline`."""


# ---------------------------------------------------------------------------- deadline

_deadline = threading.local()  # .at: time.monotonic() value, or None


@contextmanager
def check_deadline(seconds: float | None) -> Iterator[None]:
    """Make validation in this thread raise :class:`CheckTimeout` once ``seconds`` have passed
    (``None``: no deadline of its own; an enclosing, earlier deadline still holds)."""
    previous: float | None = getattr(_deadline, "at", None)
    if seconds is not None:
        mine = time.monotonic() + seconds
        _deadline.at = mine if previous is None else min(previous, mine)
    try:
        yield
    finally:
        _deadline.at = previous


def past_deadline() -> bool:
    at: float | None = getattr(_deadline, "at", None)
    return at is not None and time.monotonic() > at


def _timed(keyword: Callable[..., Any]) -> Callable[..., Any]:
    """``keyword`` (a jsonschema keyword function) checking the deadline before it runs: each
    keyword applied to each part of a value is a step, so no schema outruns the clock long."""

    def check(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
        if past_deadline():
            raise CheckTimeout
        return keyword(validator, value, instance, schema)

    return check


# ---------------------------------------------------------------------------- RE2 patterns


class PatternError(ValueError):
    """A regular expression RE2 cannot compile."""


@functools.lru_cache(maxsize=2048)
def compile_pattern(pattern: str) -> Any:
    """The RE2 program for ``pattern`` (cached: type schemas are checked on every write).

    Raises:
        PatternError: RE2 cannot compile it (backreferences, lookaround, huge repetitions, …).
    """
    return compile_uncached(pattern)


def compile_uncached(pattern: str) -> Any:
    """:func:`compile_pattern` without the cache, for patterns that are data (``format:
    regex`` values), which would otherwise fill it with texts of up to a property's size."""
    options = re2.Options()
    options.log_errors = False  # RE2 would print each failure to stderr
    try:
        return re2.compile(pattern, options)
    except re2.error as error:
        reason = error.args[0] if error.args else error
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        raise PatternError(str(reason)) from None
    except (TypeError, UnicodeEncodeError) as error:
        raise PatternError(str(error)) from None


def pattern_matches(pattern: str, text: str) -> bool:
    """Whether ``pattern`` matches anywhere in ``text`` (ECMA-262 ``search`` semantics)."""
    try:
        return compile_pattern(pattern).search(text) is not None
    except UnicodeEncodeError:
        return False  # lone surrogates: refused as text elsewhere; never a crash here


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "string"):
        return
    ValidationError = _dialect().ValidationError  # noqa: N806  (the class, loaded lazily)
    try:
        matched = pattern_matches(pattern, instance)
    except PatternError as error:
        yield ValidationError(f"pattern {pattern!r} cannot be used: {error}")
        return
    if not matched:
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(
    validator: Any, patterns: Mapping[str, Any], instance: Any, schema: Any
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    ValidationError = _dialect().ValidationError  # noqa: N806  (the class, loaded lazily)
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            try:
                matched = pattern_matches(pattern, key)
            except PatternError as error:
                yield ValidationError(f"pattern {pattern!r} cannot be used: {error}")
                return
            if matched:
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _unique_items(
    validator: Any, unique: bool, instance: Any, schema: Any
) -> Iterator[ValidationError]:
    """``uniqueItems`` in linear time: items compared through a hashable identity with JSON
    Schema's equality (``1`` equals ``1.0``, ``true`` does not equal ``1``, object members in
    any order)."""
    if not unique or not validator.is_type(instance, "array"):
        return
    seen: dict[Any, int] = {}
    for index, item in enumerate(instance):
        first = seen.setdefault(_json_identity(item), index)
        if first != index:
            ValidationError = _dialect().ValidationError  # noqa: N806  (loaded lazily)
            yield ValidationError(
                f"items [{first}] and [{index}] are equal; each value may occur once"
            )
            return


def _json_identity(value: Any) -> Any:
    if isinstance(value, bool):
        return ("b", value)
    if isinstance(value, int | float):
        return ("n", value)  # 1 and 1.0 hash and compare equal
    if isinstance(value, str):
        return ("s", value)
    if isinstance(value, list):
        return ("a", tuple(_json_identity(item) for item in value))
    if isinstance(value, Mapping):
        return ("o", frozenset((key, _json_identity(item)) for key, item in value.items()))
    return ("z", None) if value is None else ("?", repr(value))


# Code points RFC 3987 allows in IRIs beyond ASCII: `ucschar` anywhere an unreserved
# character may stand, `iprivate` only in the query.
_UCSCHAR = re.compile(
    "[\u00a0-\ud7ff\uf900-\ufdcf\ufdf0-\uffef\U00010000-\U0001fffd\U00020000-\U0002fffd"
    "\U00030000-\U0003fffd\U00040000-\U0004fffd\U00050000-\U0005fffd\U00060000-\U0006fffd"
    "\U00070000-\U0007fffd\U00080000-\U0008fffd\U00090000-\U0009fffd\U000a0000-\U000afffd"
    "\U000b0000-\U000bfffd\U000c0000-\U000cfffd\U000d0000-\U000dfffd\U000e1000-\U000efffd]"
)
_IPRIVATE = re.compile("[\ue000-\uf8ff\U000f0000-\U000ffffd\U00100000-\U0010fffd]")
_NON_ASCII = re.compile("[^\x00-\x7f]+")


def _iri_as_uri(value: str) -> str | None:
    """The URI an IRI maps to (RFC 3987 §3.1: its allowed non-ASCII characters
    percent-encoded), or ``None`` when it holds a character no IRI may hold there.

    The mapping keeps validity both ways: IRI syntax differs from URI syntax only in allowing
    these characters exactly where URIs allow percent-encoded octets (``iprivate`` only in
    the query), so an IRI is valid exactly when its mapping is a valid URI.
    """
    if value.isascii():
        return value
    end = len(value) if "#" not in value else value.index("#")
    query = value.find("?", 0, end)
    for match in _NON_ASCII.finditer(value):
        for offset, character in enumerate(match.group(), match.start()):
            if _UCSCHAR.match(character):
                continue
            if _IPRIVATE.match(character) and query != -1 and query < offset < end:
                continue
            return None
    try:
        return _NON_ASCII.sub(lambda run: quote(run.group(), safe=""), value)
    except UnicodeEncodeError:  # lone surrogates
        return None


def _is_iri(value: object) -> bool:
    if not isinstance(value, str):
        return True
    from rfc3986_validator import validate_rfc3986

    uri = _iri_as_uri(value)
    return uri is not None and bool(validate_rfc3986(uri, rule="URI"))


def _is_iri_reference(value: object) -> bool:
    if not isinstance(value, str):
        return True
    from rfc3986_validator import validate_rfc3986

    uri = _iri_as_uri(value)
    return uri is not None and bool(validate_rfc3986(uri, rule="URI_reference"))


# RFC 6570 URI templates: literals and `{op varspec,…}` expressions (operators of levels 2–4;
# `= , ! @ |` are reserved for extensions). Matched by RE2 in linear time: the `uri_template`
# package's validator took 24 s on 200,000 characters.
_TEMPLATE_VARCHAR = r"(?:[A-Za-z0-9_]|%[0-9A-Fa-f]{2})"
_TEMPLATE_VARSPEC = rf"{_TEMPLATE_VARCHAR}(?:\.?{_TEMPLATE_VARCHAR})*(?::[1-9][0-9]{{0,3}}|\*)?"
_URI_TEMPLATE = (
    r"(?:[^\x00-\x20\x7f\"'%<>\\^`{|}]|%[0-9A-Fa-f]{2}"
    rf"|\{{[+#./;?&]?{_TEMPLATE_VARSPEC}(?:,{_TEMPLATE_VARSPEC})*\}})*"
)


def _is_uri_template(value: object) -> bool:
    if not isinstance(value, str):
        return True
    try:
        return compile_pattern(_URI_TEMPLATE).fullmatch(value) is not None
    except UnicodeEncodeError:  # lone surrogates
        return False


def _is_regex(value: object) -> bool:
    if not isinstance(value, str):
        return True
    compile_uncached(value)
    return True


class _Dialect(NamedTuple):
    validator: Any  # the Draft 2020-12 validator class with RE2 patterns
    format_checker: Any
    ValidationError: Any  # jsonschema.exceptions.ValidationError
    SchemaError: Any  # jsonschema.exceptions.SchemaError


@functools.cache
def _dialect() -> _Dialect:
    """jsonschema's parts for kgot's dialect, imported on first use.

    Importing jsonschema loads its format checkers, and the IRI checker's package
    (rfc3987-syntax) builds its parsers on import: over a second. Runs without an entity never
    check a type schema, so ``kgot ask`` on a graph file should not wait for it.
    """
    from jsonschema import Draft202012Validator, FormatChecker, validators
    from jsonschema.exceptions import SchemaError, ValidationError

    checker = FormatChecker(())
    checker.checkers = {
        name: entry
        for name, entry in Draft202012Validator.FORMAT_CHECKER.checkers.items()
        if name in ACCEPTED_FORMATS
    }
    checker.checks("regex", raises=PatternError)(_is_regex)
    checker.checks("iri")(_is_iri)
    checker.checks("iri-reference")(_is_iri_reference)
    checker.checks("uri-template")(_is_uri_template)
    keywords = {
        **Draft202012Validator.VALIDATORS,
        "pattern": _pattern,
        "patternProperties": _pattern_properties,
        "uniqueItems": _unique_items,
    }
    validator = validators.extend(
        Draft202012Validator,
        validators={name: _timed(keyword) for name, keyword in keywords.items()},
    )
    return _Dialect(validator, checker, ValidationError, SchemaError)


def missing_format_checkers() -> list[str]:
    """Accepted formats this installation cannot check (must be empty)."""
    checkers = _dialect().format_checker.checkers
    return [name for name in ACCEPTED_FORMATS if name not in checkers]


def make_validator(schema: Mapping[str, Any]) -> Any:
    """A validator for properties: Draft 2020-12, formats checked, RE2 for patterns.

    Raises:
        FormatCheckerMissing: a package that checks an accepted format is not installed.
    """
    missing = missing_format_checkers()
    if missing:
        raise FormatCheckerMissing(
            f"formats {', '.join(missing)} cannot be checked: reinstall kgot (it needs "
            "jsonschema[format-nongpl] and rfc3339-validator)"
        )
    dialect = _dialect()
    return dialect.validator(schema, format_checker=dialect.format_checker)


# ---------------------------------------------------------------------------- schema rules


def schema_problems(schema: Mapping[str, Any], kind: str | None = None) -> list[str]:
    """Rules a properties schema breaks (empty when it may be stored).

    Valid Draft 2020-12; nesting within :data:`MAX_SCHEMA_DEPTH`; an object schema; patterns
    RE2 compiles; accepted formats only; local ``$ref`` s that resolve without a cycle that
    consumes no input; no reserved property names (``_`` prefix; for ``kind`` ``node``: ``id``,
    ``label``; ``edge``: ``relationship``, ``source``, ``target``, ``key``).
    """
    depth_path = _too_deep(schema, "$", MAX_SCHEMA_DEPTH)
    if depth_path is not None:
        return [
            f"properties schema at {_clip(depth_path)}: nests deeper than {MAX_SCHEMA_DEPTH} "
            "levels (rule: schema depth; use $defs and $ref for repeated parts)"
        ]
    problems = list(_pattern_problems(schema))
    if problems:
        return problems
    dialect = _dialect()
    try:
        dialect.validator.check_schema(schema, format_checker=dialect.format_checker)
    except dialect.SchemaError as error:  # already the most relevant one (best_match)
        return [
            f"properties schema at {error.json_path}: {error.message} "
            f"(rule: JSON Schema Draft 2020-12 `{error.validator}`)"
        ]
    declared_type = schema.get("type", "object")
    if declared_type not in ("object", ["object"]):
        problems.append(
            f"properties schema at $.type: must be 'object' (properties are an object), "
            f"got {declared_type!r}"
        )
    for path, key, value in walk_schema(schema, "$"):
        if key == "format" and isinstance(value, str) and value not in ACCEPTED_FORMATS:
            problems.append(
                f"properties schema at {path}: unknown format {value!r} would never be "
                f"checked (use one of: {', '.join(ACCEPTED_FORMATS)})"
            )
    problems.extend(_identity_problems(schema))
    problems.extend(_ref_problems(schema))
    reserved = RESERVED_PROPERTY_NAMES.get(kind or "", frozenset())
    for name in declared_property_names(schema):
        if name.startswith(RESERVED_PREFIX):
            problems.append(
                f"properties schema declares {name!r}: names starting with '_' are reserved "
                "for kgot metadata (_confidence, _source_kind, …)"
            )
        elif name in reserved:
            problems.append(
                f"properties schema declares {name!r}: {kind} properties may not be named "
                f"{', '.join(sorted(reserved))} (graph files use these names for the "
                f"{kind} itself; rename it, e.g. {name}_value)"
            )
    if not problems:
        problems.extend(_runtime_problems(schema))
    return problems


def _identity_problems(schema: Mapping[str, Any]) -> list[str]:
    """``$schema`` and ``$id`` of every subschema (keywords, not property names that happen to
    be spelled like them)."""
    problems: list[str] = []
    for _pointer, where, subschema in _subschemas(schema, "", "$"):
        if not isinstance(subschema, Mapping):
            continue
        if "$schema" in subschema and subschema["$schema"] not in DIALECT_URIS:
            # Validation is always Draft 2020-12: a schema written for another draft would be
            # read with other meanings (Draft 4's `dependencies` silently checks nothing).
            problems.append(
                f"properties schema at {_child_path(where, '$schema')}: declares the dialect "
                f"{subschema['$schema']!r}, but kgot validates with Draft 2020-12 (rule: "
                f"dialect); remove `$schema` or set it to {DIALECT_URIS[0]!r} and use that "
                "draft's keywords"
            )
        if "$id" in subschema and where != "$":
            problems.append(
                f"properties schema at {_child_path(where, '$id')}: nested `$id` is not "
                "supported (put shared parts under $defs and refer to them with '#/$defs/…')"
            )
    return problems


def example_problems(schema: Mapping[str, Any], example: Mapping[str, Any]) -> list[str]:
    """How ``example`` breaks ``schema`` (assumed to pass :func:`schema_problems`)."""
    validator = make_validator(schema)  # built before the clock starts (see _runtime_problems)
    try:
        with check_deadline(TYPE_CHECK_SECONDS):
            errors = sorted(validator.iter_errors(dict(example)), key=error_order)
    except RecursionError:
        return [f"example: {cycle_message()}"]
    except CheckTimeout:
        return [f"example: {too_costly_message(TYPE_CHECK_SECONDS)}"]
    return [
        f"example at {error.json_path}: {error.message} (rule: {error.validator})"
        for error in errors
    ]


def cycle_message() -> str:
    return (
        "validation recursed without end (a `$ref` cycle that consumes no input, or values "
        f"nested deeper than {MAX_VALUE_DEPTH} levels) (rule: finite validation)"
    )


def too_costly_message(seconds: float) -> str:
    return (
        f"checking took more than {seconds:g} s (rule: check time); the schema makes too much "
        "work of it: fewer nested anyOf/oneOf/allOf branches, or smaller values"
    )


def error_order(error: Any) -> tuple[str, str]:
    return (error.json_path, str(error.validator))


def _runtime_problems(schema: Mapping[str, Any]) -> list[str]:
    """Last line of defence behind the static checks: validating ``{}`` must terminate."""
    # Building the validator is outside the deadline: it loads format checkers (up to a
    # second, once per process, longer on a busy machine), which says nothing of the schema.
    validator = make_validator(schema)
    try:
        with check_deadline(TYPE_CHECK_SECONDS):
            for _ in validator.iter_errors({}):
                pass
    except RecursionError:
        return [f"properties schema: {cycle_message()}"]
    except CheckTimeout:
        return [f"properties schema: {too_costly_message(TYPE_CHECK_SECONDS)}"]
    return []


def _pattern_problems(schema: Mapping[str, Any]) -> Iterator[str]:
    for path, key, value in walk_schema(schema, "$"):
        if key == "pattern" and isinstance(value, str):
            found = [(path, value)]
        elif key == "patternProperties" and isinstance(value, Mapping):
            found = [(_child_path(path, k), k) for k in value if isinstance(k, str)]
        else:
            continue
        for where, pattern in found:
            try:
                compile_pattern(pattern)
            except PatternError as error:
                yield (
                    f"properties schema at {where}: pattern {pattern!r} is not supported: "
                    f"{error} (rule: patterns run on RE2, a linear-time engine without "
                    "backreferences or lookaround)"
                )


def walk_schema(value: Any, path: str) -> Iterator[tuple[str, str, Any]]:
    """``(json_path, key, value)`` for every key of every object in a schema, skipping data
    keywords (``enum``, ``const``, ``default``, ``examples``)."""
    if isinstance(value, Mapping):
        for key, child in value.items():
            child_path = _child_path(path, key)
            yield child_path, key, child
            if key not in _DATA_KEYWORDS:
                yield from walk_schema(child, child_path)
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from walk_schema(child, f"{path}[{index}]")


def _child_path(path: str, key: Any) -> str:
    if isinstance(key, str) and re.match(r"^[A-Za-z_$][A-Za-z0-9_$]*$", key):
        return f"{path}.{key}"
    return f"{path}[{json.dumps(key)}]"


def _too_deep(value: Any, path: str, limit: int) -> str | None:
    """The path of the first value nested deeper than ``limit`` (iterative: no recursion).

    Paths are only spelled out when some value is too deep: this runs on every fact written,
    and building a path per key cost several times the check itself.
    """
    if not _deeper_than(value, limit):
        return None
    stack: list[tuple[Any, str, int]] = [(value, path, 0)]
    while stack:
        item, where, depth = stack.pop()
        if depth > limit:
            return where
        if isinstance(item, Mapping):
            stack.extend((child, _child_path(where, key), depth + 1) for key, child in item.items())
        elif isinstance(item, list):
            stack.extend((child, f"{where}[{i}]", depth + 1) for i, child in enumerate(item))
    return None


def _deeper_than(value: Any, limit: int) -> bool:
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        if isinstance(item, Mapping):
            stack.extend((child, depth + 1) for child in item.values())
        elif isinstance(item, list):
            stack.extend((child, depth + 1) for child in item)
    return False


def value_depth_exceeds(value: Any, limit: int = MAX_VALUE_DEPTH) -> str | None:
    """The JSON path of the first part of ``value`` nested deeper than ``limit``, if any."""
    return _too_deep(value, "$", limit)


def declared_property_names(schema: Mapping[str, Any]) -> Iterator[str]:
    """The top-level property names a properties schema declares (``properties`` and
    ``required``): what type settings such as ``identity`` may name."""
    found = schema.get("properties")
    properties: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    yield from (name for name in properties if isinstance(name, str))
    required = schema.get("required")
    if isinstance(required, list):
        yield from (name for name in required if isinstance(name, str) and name not in properties)


# ---------------------------------------------------------------------------- $ref graph


def _ref_problems(root: Mapping[str, Any]) -> list[str]:
    """Local references that do not resolve, and cycles that consume no input."""
    locations: dict[str, tuple[Any, str]] = {}  # JSON pointer -> (subschema, JSON path)
    anchors: dict[str, str] = {}
    for pointer, path, subschema in _subschemas(root, "", "$"):
        locations[pointer] = (subschema, path)
        if isinstance(subschema, Mapping):
            for keyword in ("$anchor", "$dynamicAnchor"):
                if isinstance(subschema.get(keyword), str):
                    anchors.setdefault(subschema[keyword], pointer)
    problems: list[str] = []
    edges = {
        pointer: _same_instance_steps(
            pointer, path, subschema, locations=locations, anchors=anchors, problems=problems
        )
        for pointer, (subschema, path) in locations.items()
        if isinstance(subschema, Mapping)
    }
    cycle = _find_cycle(edges)
    if cycle is not None:
        route = " -> ".join("#" + pointer for pointer in [cycle[-1][0], *(p for p, _ in cycle)])
        problems.append(
            f"properties schema at {cycle[-1][1]}: a `$ref` cycle that consumes no input "
            f"({route}); validation would never end (rule: references must descend into a "
            "property or item before they repeat)"
        )
    return problems


def _same_instance_steps(
    pointer: str,
    path: str,
    subschema: Mapping[str, Any],
    *,
    locations: Mapping[str, Any],
    anchors: Mapping[str, str],
    problems: list[str],
) -> list[tuple[str, str]]:
    """Where validation of the same instance goes next from ``subschema``:
    ``[(pointer, JSON path of the step)]``; unusable references go to ``problems``."""
    steps: list[tuple[str, str]] = []
    for keyword in ("$ref", "$dynamicRef"):
        reference = subschema.get(keyword)
        if not isinstance(reference, str):
            continue
        where = f"{path}.{keyword}"
        target = _resolve(reference, anchors) if reference.startswith("#") else None
        if not reference.startswith("#"):
            problems.append(
                f"properties schema at {where}: only local references ('#/$defs/…') are "
                f"allowed, not {reference!r}"
            )
        elif target is None or target not in locations:
            problems.append(
                f"properties schema at {where}: {reference!r} does not point to a "
                "subschema of this schema (rule: references resolve)"
            )
        else:
            steps.append((target, where))
    for keyword in _SAME_INSTANCE_ONE:
        if keyword in subschema:
            steps.append((f"{pointer}/{keyword}", f"{path}.{keyword}"))
    for keyword in _SAME_INSTANCE_LIST:
        if isinstance(subschema.get(keyword), list):
            steps.extend(
                (f"{pointer}/{keyword}/{index}", f"{path}.{keyword}[{index}]")
                for index in range(len(subschema[keyword]))
            )
    dependent = subschema.get("dependentSchemas")
    if isinstance(dependent, Mapping):
        steps.extend(
            (
                f"{pointer}/dependentSchemas/{_escape(str(name))}",
                _child_path(f"{path}.dependentSchemas", name),
            )
            for name in dependent
        )
    return steps


def _clip(path: str, limit: int = 120) -> str:
    return path if len(path) <= limit else path[: limit - 1] + "…"


def _subschemas(value: Any, pointer: str, path: str) -> Iterator[tuple[str, str, Any]]:
    """Every subschema position in a schema: ``(JSON pointer, JSON path, subschema)``."""
    yield pointer, path, value
    if not isinstance(value, Mapping):
        return
    for key, child in value.items():
        if not isinstance(key, str):
            continue
        child_pointer, child_path = f"{pointer}/{_escape(key)}", _child_path(path, key)
        if key in _ONE:
            yield from _subschemas(child, child_pointer, child_path)
        elif key in _MAP and isinstance(child, Mapping):
            for name, sub in child.items():
                yield from _subschemas(
                    sub, f"{child_pointer}/{_escape(str(name))}", _child_path(child_path, name)
                )
        elif key in _LIST and isinstance(child, list):
            for index, sub in enumerate(child):
                yield from _subschemas(sub, f"{child_pointer}/{index}", f"{child_path}[{index}]")


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def _resolve(reference: str, anchors: Mapping[str, str]) -> str | None:
    fragment = unquote(reference[1:])
    if fragment == "" or fragment.startswith("/"):
        return fragment
    return anchors.get(fragment)


def _find_cycle(edges: Mapping[str, list[tuple[str, str]]]) -> list[tuple[str, str]] | None:
    """A cycle in the same-instance graph as ``[(pointer, path of the step into it)]``."""
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    for start in edges:
        if state.get(start):
            continue
        path: list[tuple[str, str]] = [(start, "")]
        iterators = [iter(edges.get(start, ()))]
        state[start] = 1
        while iterators:
            step = next(iterators[-1], None)
            if step is None:
                state[path[-1][0]] = 2
                path.pop()
                iterators.pop()
                continue
            target, where = step
            if state.get(target) == 1:
                index = next(i for i, (p, _) in enumerate(path) if p == target)
                return [*path[index + 1 :], (target, where)]
            if not state.get(target):
                state[target] = 1
                path.append((target, where))
                iterators.append(iter(edges.get(target, ())))
    return None
