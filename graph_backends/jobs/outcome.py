"""How a graph job reports back: one JSON file, ``out/result.json``.

A success carries either a read result (``value``, ``empty``, ``truncated``) or a changeset; a
failure carries ``kind`` (``syntax``, ``exception``, ``no_result``, ``violations``, ``forbidden``,
``wrong_form``), a one-line ``summary``, a ``detail`` text fit to show a model, and for rule
violations the list of ``problems``.
"""

from __future__ import annotations

import contextlib
import gc
import json
import math
import os
import signal
import traceback
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from kgot.graph_model.records import edge_dict, node_dict

RESULT_FILE = "out/result.json"
MAX_ITEMS = 20_000  # items (at every depth) kept from one read result; the rest is cut
MAX_DEPTH = 40
MAX_MESSAGE = 1_500


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic garbage collection while the job builds or compares large graphs.

    Those phases allocate hundreds of thousands of objects and create no cycles; the collector
    would walk every live object again and again (measured: 7x slower decoding of 16k triples).
    The model's own code runs with the collector on.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def output_path() -> str:
    """Absolute, so code that changes the working directory cannot misdirect the result."""
    return os.path.abspath(RESULT_FILE)


def write_outcome(path: str, outcome: Mapping[str, Any]) -> None:
    """Write ``outcome`` whole, or a failure saying why it cannot be: a value without a JSON
    form, or a result larger than the job may write. The text is built before the file is
    opened, so the host never finds half an outcome it would blame on the model's code."""
    try:
        text = json.dumps(outcome, ensure_ascii=False, allow_nan=False)
    except (ValueError, TypeError, RecursionError) as error:
        summary = f"the result cannot be stored as JSON: {_why_not_json(error)}"
        text = json.dumps(failure("unserialisable", summary[:MAX_MESSAGE]))
    data = text.encode("utf-8")
    # Past the file size limit a write fails (EFBIG) instead of killing the job.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    try:
        _write_file(path, data)
    except OSError as error:
        with contextlib.suppress(OSError):
            os.unlink(path)  # frees the space the small report below needs
        summary = (
            f"the result is too large to return ({len(data) / 1e6:.1f} MB as JSON: "
            f"{error.strerror}); return less data (a count, a sample, the first items)"
        )
        _write_file(path, json.dumps(failure("too_large", summary)).encode("utf-8"))


def _write_file(path: str, data: bytes) -> None:
    with open(path, "wb") as handle:
        handle.write(data)


def _why_not_json(error: BaseException) -> str:
    if "integer string conversion" in str(error):  # Python's own advice would not help here
        return "it holds an integer of over 4,300 digits; return str(n), or fewer digits"
    return " ".join(f"{type(error).__name__}: {error}".split())


def failure(kind: str, summary: str, detail: str = "", problems: list[str] | None = None) -> dict:
    return {
        "ok": False,
        "kind": kind,
        "summary": summary,
        "detail": detail or summary,
        "problems": problems or [],
    }


def changeset_outcome(changes: dict[str, Any], problems: list[str], broke: str) -> dict:
    """A write's outcome: its changeset, or the rule ``problems`` it broke (``broke`` begins
    the detail: "The changes break", "The update breaks")."""
    if problems:
        return failure(
            "violations",
            f"{len(problems)} rule violation(s): {problems[0]}",
            f"{broke} the graph rules; nothing was applied:\n- " + "\n- ".join(problems),
            problems,
        )
    return {"ok": True, "changeset": changes}


def add_restatements(
    changes: dict[str, list[Any]],
    node_ids: Iterable[Any],
    edge_idents: Iterable[tuple[Any, Any, Any]],
    *,
    before_nodes: Mapping[Any, Any],
    before_edges: Mapping[Any, Any],
    node_kept: Callable[[Any], bool],
    edge_kept: Callable[[tuple[Any, Any, Any]], bool],
) -> None:
    """Add to a write's ``changes`` the facts its code stated again and left as they were.

    ``node_ids`` and ``edge_idents`` are what the code stated (in order; the language decides
    what counts as stating); ``node_kept``/``edge_kept`` say whether one is still there after
    the write. Each that existed before, is still there and was not changed goes in as added,
    with the attributes it was loaded with: the diff alone cannot show it, the entity's store
    counts it (a corroboration or a reinforcement) and the host applies nothing for it.
    """
    changed_nodes = {node["id"] for node in changes["changed_nodes"]}
    changed_nodes.update(changes["removed_nodes"])
    for node_id in dict.fromkeys(node_ids):
        if node_id in before_nodes and node_id not in changed_nodes and node_kept(node_id):
            changes["added_nodes"].append(node_dict(node_id, before_nodes[node_id]))
    changed_edges = {(e["source"], e["target"], e["key"]) for e in changes["changed_edges"]}
    changed_edges.update(tuple(ident) for ident in changes["removed_edges"])
    for ident in dict.fromkeys(edge_idents):
        if ident in before_edges and ident not in changed_edges and edge_kept(ident):
            changes["added_edges"].append(edge_dict(ident, before_edges[ident]))


class _Budget:
    def __init__(self, items: int) -> None:
        self.left = items
        self.cut = False


def to_jsonable(value: Any, max_items: int = MAX_ITEMS) -> tuple[Any, bool]:
    """``value`` as plain JSON data, and whether it had to be cut to ``max_items`` items.

    Items are list elements and object entries at every depth: a list of 5 numbers is 5
    items, a list of 5 two-key objects 15.

    Containers (dicts, lists, sets, generators, NetworkX views, NumPy/pandas objects) become
    JSON objects and arrays; anything without a JSON form becomes its ``repr``.
    """
    budget = _Budget(max_items)
    return _convert(value, budget, 0), budget.cut


def _convert(value: Any, budget: _Budget, depth: int) -> Any:
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if depth >= MAX_DEPTH:
        return repr(value)
    plain = _library_value(value)
    if plain is not value:
        return _convert(plain, budget, depth + 1)
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", errors="replace")
    if isinstance(value, Mapping):
        return _convert_mapping(value, budget, depth)
    if isinstance(value, (set, frozenset)):
        try:
            value = sorted(value)
        except TypeError:
            value = sorted(value, key=repr)
    if not hasattr(value, "__iter__"):
        return repr(value)
    items = []
    try:
        for item in value:
            if budget.left <= 0:
                budget.cut = True
                break
            budget.left -= 1
            items.append(_convert(item, budget, depth + 1))
    except Exception:  # an iterator that fails half way: keep its repr
        return repr(value)
    return items


def _convert_mapping(value: Mapping[Any, Any], budget: _Budget, depth: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, item in value.items():
        if budget.left <= 0:
            budget.cut = True
            break
        budget.left -= 1
        out[_key_text(key)] = _convert(item, budget, depth + 1)
    return out


def _library_value(value: Any) -> Any:
    """NumPy and pandas values as plain Python data (``value`` itself for anything else)."""
    module = type(value).__module__ or ""
    if module.startswith("numpy") and hasattr(value, "tolist"):
        return value.tolist()
    if module.startswith("pandas") and hasattr(value, "to_dict"):
        return value.to_dict(orient="records") if hasattr(value, "columns") else value.to_dict()
    return value


def _key_text(key: Any) -> str:
    if isinstance(key, str):
        return key
    if isinstance(key, (int, float, bool)) or key is None:
        return json.dumps(key)
    return repr(key)


def is_empty(value: Any) -> bool:
    """No answer at all: nothing, an empty string or an empty collection (``0``/``False`` are
    answers)."""
    if value is None:
        return True
    if isinstance(value, str):
        return not value.strip()
    if isinstance(value, (list, dict)):
        return not value
    return False


def describe_exception(error: BaseException, filename: str) -> tuple[str, str]:
    """A one-line summary and a short traceback of ``error`` limited to the model's own code.

    Line numbers count from the first line of the code the model wrote.
    """
    if isinstance(error, SyntaxError) and error.filename == filename:
        where = f"line {error.lineno}" + (f", column {error.offset}" if error.offset else "")
        summary = f"{where}: SyntaxError: {error.msg}"
        text = (error.text or "").rstrip("\n")
        detail = summary
        if text.strip():
            stripped = text.lstrip()
            caret = max(0, (error.offset or 1) - 1 - (len(text) - len(stripped)))
            detail += f"\n    {stripped}\n    {' ' * caret}^"
        return summary, detail
    frames = traceback.extract_tb(error.__traceback__)
    own = [frame for frame in frames if frame.filename == filename]
    message = "".join(traceback.format_exception_only(type(error), error)).strip()
    if len(message) > MAX_MESSAGE:
        message = message[:MAX_MESSAGE] + f"… [{len(message) - MAX_MESSAGE} more characters]"
    first = message.splitlines()[0] if message else type(error).__name__
    summary = f"line {own[-1].lineno}: {first}" if own else first
    lines = ["Traceback (lines of your code, most recent call last):"]
    lines += [f"  line {frame.lineno}: {(frame.line or '').strip()}" for frame in own]
    if frames and frames[-1].filename != filename:
        lines.append(f"  raised inside {frames[-1].name}() of {_module_of(frames[-1].filename)}")
    lines.append(message)
    return summary, "\n".join(lines)


def _module_of(path: str) -> str:
    parts = path.replace("\\", "/").split("/")
    if "site-packages" in parts:
        return "/".join(parts[parts.index("site-packages") + 1 :])
    return parts[-1]
