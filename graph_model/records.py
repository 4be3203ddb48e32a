"""Property-graph records, the rules every graph change must follow, and the graph diff.

Shared by the host and by sandbox jobs (standard library only). A graph travels into a job as
*records* in one JSON array, one record per line::

    [
    ["n","ada",{"label":"Person","name":"Ada Lovelace"}],
    ["e","ada","note_g","WROTE",{"relationship":"WROTE","year":1843}]
    ]

Records apply in order: a later record for the same node or edge replaces the earlier one, and
``["-n", id]`` / ``["-e", source, target, key]`` remove one. So after a small change the host
sends the array it sent before plus a few records, instead of encoding the graph again.

Jobs compare elements through their canonical JSON (sorted keys, no NaN): two elements are equal
exactly when their canonical texts are, so a diff compares strings instead of walking values.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Container, Iterable, Mapping
from typing import Any

NodeAttrs = dict[str, Any]
EdgeIdent = tuple[str, str, str]

# Attribute names with a fixed meaning. `id`, `source`, `target` and `key` would collide with the
# element's identity in node-link JSON and GraphML, so they cannot be ordinary properties.
LABEL = "label"
RELATIONSHIP = "relationship"
RESERVED_NODE_NAMES = frozenset({"id"})
RESERVED_EDGE_NAMES = frozenset({"source", "target", "key"})
# In the Node/Edge form the type is a field of its own, so its name cannot be a property either.
_NODE_NAMES_TAKEN = RESERVED_NODE_NAMES | {LABEL}
_EDGE_NAMES_TAKEN = RESERVED_EDGE_NAMES | {RELATIONSHIP}
# Labels and relationships are printed bare in views: one word, no whitespace or quotes.
TYPE_NAME = re.compile(r"[\w.:-]+")
MAX_TYPE_NAME = 100
MAX_VALUE_DEPTH = 100  # levels of lists/objects in one property value
MAX_PROBLEMS = 20


def canonical_json(value: Any) -> str:
    """Compact, key-sorted JSON; raises ``ValueError``/``TypeError`` for non-JSON values."""
    return json.dumps(
        value, sort_keys=True, ensure_ascii=False, allow_nan=False, separators=(",", ":")
    )


def _compact_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def node_record(node_id: str, attrs: Mapping[str, Any]) -> str:
    """One node as a record line (attributes in their own order, so jobs see them as the host
    does)."""
    return f'["n",{_compact_json(node_id)},{_compact_json(attrs)}]'


def edge_record(source: str, target: str, key: str, attrs: Mapping[str, Any]) -> str:
    return (
        f'["e",{_compact_json(source)},{_compact_json(target)},{_compact_json(key)},'
        f"{_compact_json(attrs)}]"
    )


def removal_record(node_id: str) -> str:
    return f'["-n",{_compact_json(node_id)}]'


def edge_removal_record(source: str, target: str, key: str) -> str:
    return f'["-e",{_compact_json(source)},{_compact_json(target)},{_compact_json(key)}]'


def records_text(records: Iterable[str]) -> str:
    """Record lines as one JSON array (one element per line), the job's input format."""
    return "[\n" + ",\n".join(records) + "\n]"


def parse_records(*texts: str) -> tuple[dict[str, NodeAttrs], dict[EdgeIdent, NodeAttrs]]:
    """Nodes and edges (in file order) from :func:`records_text` outputs, later records (and
    texts) replacing or removing earlier ones."""
    nodes: dict[str, NodeAttrs] = {}
    edges: dict[EdgeIdent, NodeAttrs] = {}
    for record in (record for text in texts for record in json.loads(text)):
        kind = record[0]
        if kind == "n":
            nodes[record[1]] = record[2]
        elif kind == "e":
            edges[(record[1], record[2], record[3])] = record[4]
        elif kind == "-n":
            nodes.pop(record[1], None)
        else:
            edges.pop((record[1], record[2], record[3]), None)
    return nodes, edges


_ABSENT = object()


def has_values(attrs: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    """Whether ``attrs`` hold the ``wanted`` values as JSON values compare: ``1`` equals
    ``1.0`` but not ``True`` nor ``"1"``. Graph code's ``find()`` in a job and the store that
    answers it for a working set both ask this, so the two answers agree."""
    for name, value in wanted.items():
        held = attrs.get(name, _ABSENT)  # a value absent is not a null one
        if isinstance(held, bool) != isinstance(value, bool):
            return False
        if isinstance(held, str) != isinstance(value, str) or held != value:
            return False
    return True


def describe_id(value: Any) -> str:
    """How an id appears in messages: strings quoted, other values with their type."""
    if isinstance(value, str):
        return repr(value)
    return f"{value!r} ({type(value).__name__})"


def describe_edge(source: Any, target: Any, key: Any) -> str:
    return f"edge {describe_id(source)} -[{key}]-> {describe_id(target)}"


# Integers are stored and checkpointed as signed 64-bit numbers: LangGraph's checkpoint
# serializer (msgpack) refuses anything wider, and a value that cannot be checkpointed would
# only fail after it was committed.
INT_MIN = -(2**63)
INT_MAX = 2**63 - 1
_IDENTIFIER = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")


def child_path(path: str, key: Any) -> str:
    """The JSON path of ``key`` (an object member or a list index) under ``path``."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    if isinstance(key, str) and _IDENTIFIER.fullmatch(key):
        return f"{path}.{key}"
    return f"{path}[{json.dumps(key, ensure_ascii=False)}]"


def value_problem(value: Any) -> str | None:
    """Why ``value`` cannot be stored as a property, or ``None`` when it can.

    Property values are JSON values: strings (valid Unicode), finite numbers, integers within
    the signed 64-bit range, booleans, null, and lists and objects (string keys) of those,
    nested at most :data:`MAX_VALUE_DEPTH` levels. Scalars, by far the most common values, are
    checked without serialising anything.
    """
    found = locate_value_problem(value, "$")
    if found is None:
        return None
    path, why = found
    return why if path == "$" else f"holds at {path[1:]} a value that {why}"


def locate_value_problem(value: Any, path: str) -> tuple[str, str] | None:
    """``(JSON path, why)`` of the first part of ``value`` (found at ``path``) that cannot be
    stored, or ``None``. Walked without recursion: any depth is safe."""
    if not isinstance(value, (list, tuple, dict)):
        why = _scalar_problem(value)
        return None if why is None else (path, why)
    stack: list[tuple[Any, str, int]] = [(value, path, 1)]
    while stack:
        container, where, depth = stack.pop()
        if depth > MAX_VALUE_DEPTH:
            return where, f"nests lists and objects more than {MAX_VALUE_DEPTH} levels deep"
        if isinstance(container, dict):
            for key in container:
                if not isinstance(key, str):
                    return (
                        where,
                        f"has the object key {key!r} ({type(key).__name__}); keys are strings",
                    )
            items: Iterable[tuple[Any, Any]] = container.items()
        else:
            items = enumerate(container)
        for key, item in items:
            if isinstance(item, (list, tuple, dict)):
                stack.append((item, child_path(where, key), depth + 1))
                continue
            why = _scalar_problem(item)
            if why:
                return child_path(where, key), why
    return None


def _scalar_problem(value: Any) -> str | None:
    if isinstance(value, str):
        return _text_problem(value)
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return None if INT_MIN <= value <= INT_MAX else _int_out_of_range(value)
    if isinstance(value, float):
        return None if math.isfinite(value) else _NOT_FINITE
    return (
        f"is a {type(value).__name__}, which has no JSON form (store a string, number, "
        "boolean, null, list or object instead)"
    )


_NOT_FINITE = "is not a finite number (NaN and infinity have no JSON form)"


def _int_out_of_range(value: int) -> str:
    # str() of an int over 4,300 digits raises (CPython's guard against quadratic conversion)
    digits = f"{len(str(abs(value))):,}" if value.bit_length() <= 13_000 else "over 3,900"
    return (
        f"is an integer of {digits} digits, outside the signed 64-bit range ({INT_MIN} to "
        f"{INT_MAX}) (store it as a string, or as a float if an approximation will do)"
    )


def oversized_problem(value: Any, limit: int) -> str | None:
    """Why ``value`` is too large for a property (more than ``limit`` bytes as UTF-8 JSON), or
    ``None``. Scalars and strings that cannot reach the limit are not serialised."""
    if value is None or isinstance(value, (bool, int, float)):
        return None
    if isinstance(value, str) and 6 * len(value) + 2 <= limit:  # \u0001 is 6 bytes of JSON
        return None
    size = len(json.dumps(value, ensure_ascii=False).encode("utf-8", "replace"))
    if size <= limit:
        return None
    return (
        f"the value is {size:,} bytes of JSON, more than the {limit:,} a property may hold "
        "(rule: property size; keep large content in a file and store its path or URL; the cap "
        "is the setting store.max_property_bytes)"
    )


def _text_problem(text: str) -> str | None:
    if text.isascii():
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "holds text that is not valid Unicode (a lone surrogate)"
    return None


def property_problems(
    where: str, properties: Mapping[Any, Any], reserved: Container[str], skip: str | None = None
) -> list[str]:
    """Problems with the properties of one element.

    Args:
        where: how messages name the element.
        properties: name -> value.
        reserved: names that cannot be properties (the element's identity or type).
        skip: the type attribute when ``properties`` are an element's whole attributes
            (``label`` of a node, ``relationship`` of an edge).
    """
    problems = []
    for name, value in properties.items():
        if name == skip:
            continue
        if not isinstance(name, str) or not name:
            problems.append(f"{where}: property name {name!r} must be a non-empty string")
        elif name in reserved:
            role = "type" if name in (LABEL, RELATIONSHIP) else "identity"
            problems.append(
                f"{where}: `{name}` is reserved (it is the element's {role}), "
                "store this value under another property name"
            )
        else:
            whole = child_path("$", name)
            found = locate_value_problem(value, whole)
            if found:
                path, why = found
                inside = "" if path == whole else f"at {path} "
                problems.append(f"{where}: property `{name}` {inside}{why}")
    return problems


def type_name_problem(where: str, field: str, value: Any) -> str | None:
    """Why ``value`` cannot be a node label or an edge relationship (``field`` says which).

    Types are printed bare in graph views and prompts, so they are one word: letters, digits,
    ``_``, ``.``, ``:`` and ``-`` (no whitespace, quotes, brackets or control characters that
    could make a label read as another view line).
    """
    if value is None or value == "":
        noun = "label: its type" if field == LABEL else "relationship: its type"
        return f"{where}: missing `{field}` (every {_OWNER[field]} needs a non-empty string {noun})"
    if not isinstance(value, str) or not value:
        return f"{where}: `{field}` must be a non-empty string, not {value!r}"
    if len(value) > MAX_TYPE_NAME or not TYPE_NAME.fullmatch(value):
        fixed = re.sub(r"[^\w.:-]+", "_", value).strip("_")[:MAX_TYPE_NAME] or "Thing"
        return (
            f"{where}: `{field}` {value[:80]!r} is not a type name: use one word of letters, "
            f"digits and _ . : - (at most {MAX_TYPE_NAME} characters; no spaces, quotes or "
            f"brackets), e.g. {fixed!r}"
        )
    return None


_OWNER = {LABEL: "node", RELATIONSHIP: "edge"}


def check_node(
    node_id: Any, label: Any, properties: Mapping[Any, Any], *, attrs: bool = False
) -> list[str]:
    """Every rule one node breaks.

    Args:
        node_id: the node's id.
        label: its label.
        properties: its properties, or (``attrs=True``) all its attributes, label included.
    """
    where = f"node {describe_id(node_id)}"
    problems = []
    if not isinstance(node_id, str) or not node_id:
        problems.append(f"{where}: ids must be non-empty strings (e.g. {str(node_id)!r})")
    why = type_name_problem(where, LABEL, label)
    if why:
        problems.append(why)
    reserved = RESERVED_NODE_NAMES if attrs else _NODE_NAMES_TAKEN
    return problems + property_problems(where, properties, reserved, LABEL if attrs else None)


def check_edge(
    source: Any,
    target: Any,
    key: Any,
    relationship: Any,
    properties: Mapping[Any, Any],
    *,
    attrs: bool = False,
) -> list[str]:
    """Every rule one edge breaks on its own (whether its ends exist is the caller's check).

    Args:
        key: the edge key (a non-empty string).
        properties: its properties, or (``attrs=True``) all its attributes, relationship
            included.
    """
    where = describe_edge(source, target, key)
    problems = []
    for name, value in (("source", source), ("target", target)):
        if not isinstance(value, str) or not value:
            problems.append(f"{where}: {name} must be a non-empty string node id")
    why = type_name_problem(where, RELATIONSHIP, relationship)
    if why:
        problems.append(why)
    if not isinstance(key, str) or not key:
        problems.append(f"{where}: edge keys must be non-empty strings")
    reserved = RESERVED_EDGE_NAMES if attrs else _EDGE_NAMES_TAKEN
    return problems + property_problems(
        where, properties, reserved, RELATIONSHIP if attrs else None
    )


def node_problems(node_id: Any, attrs: Mapping[Any, Any]) -> list[str]:
    """Every rule a node given as (id, attributes with its label) breaks."""
    if (
        type(node_id) is str
        and node_id
        and _type_name_ok(attrs.get(LABEL))
        and _properties_ok(attrs, LABEL, RESERVED_NODE_NAMES)
    ):
        return []  # the common case, without building a single message
    return check_node(node_id, attrs.get(LABEL), attrs, attrs=True)


def edge_problems(source: Any, target: Any, key: Any, attrs: Mapping[Any, Any]) -> list[str]:
    """Every rule an edge given as (source, target, key, attributes) breaks on its own."""
    if (
        type(key) is str
        and key
        and type(source) is str
        and source
        and type(target) is str
        and target
        and _type_name_ok(attrs.get(RELATIONSHIP))
        and _properties_ok(attrs, RELATIONSHIP, RESERVED_EDGE_NAMES)
    ):
        return []
    return check_edge(source, target, key, attrs.get(RELATIONSHIP), attrs, attrs=True)


_GOOD_TYPE_NAMES: set[str] = set()  # labels and relationships seen to be valid (they repeat)


def _type_name_ok(value: Any) -> bool:
    if type(value) is not str:
        return False
    if value in _GOOD_TYPE_NAMES:
        return True
    if len(value) > MAX_TYPE_NAME or not TYPE_NAME.fullmatch(value):
        return False
    if len(_GOOD_TYPE_NAMES) < 10_000:
        _GOOD_TYPE_NAMES.add(value)
    return True


def _properties_ok(attrs: Mapping[Any, Any], skip: str, reserved: frozenset[str]) -> bool:
    """Whether every property is valid: a fast check that builds no messages."""
    for name, value in attrs.items():
        if name == skip:
            continue
        if type(name) is not str or not name or name in reserved:
            return False
        kind = type(value)
        if kind is str:
            if not value.isascii() and _text_problem(value):
                return False
        elif kind is bool or value is None:
            continue
        elif kind is int:
            if not INT_MIN <= value <= INT_MAX:
                return False
        elif kind is float:
            if not math.isfinite(value):
                return False
        elif value_problem(value):
            return False
    return True


def node_dict(node_id: str, attrs: Mapping[str, Any]) -> dict[str, Any]:
    """The :class:`~kgot.graph_backends.base.Node` dict form of a node."""
    props = {k: v for k, v in attrs.items() if k != LABEL}
    return {"id": node_id, "label": attrs.get(LABEL), "properties": props}


def edge_dict(ident: EdgeIdent, attrs: Mapping[str, Any]) -> dict[str, Any]:
    """The :class:`~kgot.graph_backends.base.Edge` dict form of an edge."""
    props = {k: v for k, v in attrs.items() if k != RELATIONSHIP}
    source, target, key = ident
    return {
        "source": source,
        "target": target,
        "relationship": attrs.get(RELATIONSHIP),
        "key": key,
        "properties": props,
    }


def diff_graphs(
    before_nodes: Mapping[str, Mapping[str, Any]],
    before_edges: Mapping[EdgeIdent, Mapping[str, Any]],
    after_nodes: Mapping[Any, Mapping[Any, Any]],
    after_edges: Mapping[tuple[Any, Any, Any], Mapping[Any, Any]],
    *,
    other_nodes: Container[Any] = (),
) -> tuple[dict[str, list[Any]], list[str]]:
    """The changeset (as a dict) turning *before* into *after*, and every rule *after* breaks.

    Args:
        before_nodes: id -> attributes (label included) before the change; objects the change
            could not have touched (copies, when code ran on the graph).
        before_edges: (source, target, key) -> attributes.
        after_nodes: id -> attributes, as the code left them.
        after_edges: (source, target, key) -> attributes.
        other_nodes: nodes that exist besides ``after_nodes`` (when only the region of a graph
            that changed is compared); edges may end at them.

    Only new and changed elements are checked: what was valid before stays valid.
    """
    problems: list[str] = []
    changes: dict[str, list[Any]] = {
        "added_nodes": [],
        "changed_nodes": [],
        "removed_nodes": [],
        "added_edges": [],
        "changed_edges": [],
        "removed_edges": [],
    }
    for node_id, attrs in after_nodes.items():
        old = before_nodes.get(node_id) if isinstance(node_id, str) else None
        if old is not None and _same(attrs, old):
            continue
        found = node_problems(node_id, attrs)
        if found:
            problems.extend(found)
            continue
        kind = "added_nodes" if old is None else "changed_nodes"
        changes[kind].append(node_dict(node_id, attrs))
    problems.extend(_duplicate_id_problems(after_nodes))
    changes["removed_nodes"] = [n for n in before_nodes if n not in after_nodes]

    for ident, attrs in after_edges.items():
        old = before_edges.get(ident)
        if old is not None and _same(attrs, old):
            continue
        source, target, key = ident
        found = edge_problems(source, target, key, attrs)
        for end in (source, target):
            if end not in after_nodes and end not in other_nodes:
                found.append(
                    f"{describe_edge(*ident)}: endpoint {describe_id(end)} is not a node "
                    "(add that node with a label first)"
                )
        if found:
            problems.extend(found)
            continue
        kind = "added_edges" if old is None else "changed_edges"
        changes[kind].append(edge_dict(ident, attrs))
    changes["removed_edges"] = [list(i) for i in before_edges if i not in after_edges]
    return changes, cap_problems(problems)


def _same(after: Mapping[Any, Any], before: Mapping[str, Any]) -> bool:
    """Equal attributes, telling ``1``, ``1.0`` and ``True`` apart (Python's ``==`` does not)."""
    if after.keys() != before.keys():
        return False
    for name, old in before.items():
        new = after[name]
        if type(new) is not type(old):
            return False
        if isinstance(old, (list, dict)):
            try:
                if canonical_json(new) != canonical_json(old):
                    return False
            except (TypeError, ValueError, RecursionError):
                return False
        elif new != old:
            return False
    return True


def private_copy(attrs: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of JSON attributes that code changing the original cannot reach."""
    return {
        name: json.loads(json.dumps(value)) if isinstance(value, (list, dict)) else value
        for name, value in attrs.items()
    }


def _duplicate_id_problems(after_nodes: Mapping[Any, Any]) -> list[str]:
    """Two different keys that name the same id once written as text (1 and '1')."""
    seen: dict[str, Any] = {}
    problems = []
    for node_id in after_nodes:
        text = str(node_id)
        if text in seen and seen[text] is not node_id:
            problems.append(
                f"duplicate id {text!r}: nodes {describe_id(seen[text])} and "
                f"{describe_id(node_id)} would share it; merge them or give one another id"
            )
        seen.setdefault(text, node_id)
    return problems


def cap_problems(problems: list[str], limit: int = MAX_PROBLEMS) -> list[str]:
    """The problems with identical ones grouped (:func:`group_problems`), at most ``limit``
    lines, then a line counting the rest."""
    grouped = group_problems(problems)
    if len(grouped) <= limit:
        return grouped
    extra = len(grouped) - limit
    return [*grouped[:limit], f"… and {extra} more problems of the same kinds"]


# How problem lines name their element (see `describe_id` and the persistence checks):
# `node 'x' (Label): …`, `node 'x' at $.p: …`, `edge 'a' -[rel]-> 'b' key 'k': …`.
_QUOTED = r"""(?:'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")"""
_NODE_LINE = re.compile(
    rf"node (?P<id>{_QUOTED})(?P<type> \([^()]*\))?(?P<rest>(?::| at ).*)", re.S
)
_EDGE_LINE = re.compile(
    rf"edge (?P<id>{_QUOTED} -\[(?P<type>[^\]]*)\]-> {_QUOTED}(?: key {_QUOTED})?)"
    r"(?P<rest>(?::| at ).*)",
    re.S,
)
EXAMPLES = 3  # element ids a grouped problem line names


def group_problems(problems: list[str]) -> list[str]:
    """One line per distinct violation: the same rule broken the same way by many nodes or
    edges of one type (or the very same line repeated) becomes one line with a count and the
    first few ids — ``nodes 'n0', 'n1', 'n2' and 77 more (Gadget): label 'Gadget' is not …``.

    Lines keep the order of their first occurrence; lines about one element stay as they are.
    """
    groups: dict[tuple[str, str, str], list[str]] = {}
    for line in problems:
        match = _NODE_LINE.fullmatch(line) or _EDGE_LINE.fullmatch(line)
        if match is None:
            groups.setdefault(("", "", line), []).append("")
            continue
        kind = "node" if match.re is _NODE_LINE else "edge"
        # A node's label is one part of the group; an edge's relationship is inside its id.
        type_part = (match.group("type") or "") if kind == "node" else ""
        members = groups.setdefault((kind, type_part, match.group("rest")), [])
        members.append(match.group("id"))
    return [
        _group_line(kind, type_part, rest, ids) for (kind, type_part, rest), ids in groups.items()
    ]


def _group_line(kind: str, type_part: str, rest: str, ids: list[str]) -> str:
    if not kind:
        return rest if len(ids) == 1 else f"{rest} ({len(ids)} times)"
    unique = list(dict.fromkeys(ids))
    if len(unique) == 1:
        return f"{kind} {unique[0]}{type_part}{rest}"
    shown = ", ".join(unique[:EXAMPLES])
    more = f" and {len(unique) - EXAMPLES:,} more" if len(unique) > EXAMPLES else ""
    return f"{kind}s {shown}{more}{type_part}{rest}"
