"""The store's boundary holds as a rule of the source tree: no module outside ``persistence/``
touches a private (``_``) name of a :class:`~kgot.persistence.Store` or an
:class:`~kgot.persistence.EntitySession`, nor imports a private name of ``kgot.persistence``.
Packages use the public API instead (``Store.read``/``Store.write``, ``EntitySession.read``/
``write``/``entity_id``, table sets).

The tree is read with :mod:`ast`, not searched as text, so prose and strings never count. Which
expression is a store or a session is not known without running a type checker; kgot names
them ``store`` and ``session`` (``self.store``, ``memory._session``, ``ctx.session``) or
annotates them, and the check recognises both. Tests are outside the rule: they may look
inside what they test.
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2]
_RECEIVER_WORDS = ("store", "session")
_RECEIVER_TYPES = {"Store", "EntitySession"}


def private_members() -> set[str]:
    """Every ``_name`` (not dunder) defined on or assigned to ``self`` in Store and
    EntitySession."""
    names: set[str] = set()
    for module, cls in (("store.py", "Store"), ("session.py", "EntitySession")):
        tree = ast.parse((PACKAGE / "persistence" / module).read_text("utf-8"))
        for node in tree.body:
            if not (isinstance(node, ast.ClassDef) and node.name == cls):
                continue
            for inner in ast.walk(node):
                if isinstance(inner, ast.FunctionDef | ast.AsyncFunctionDef):
                    names.add(inner.name)
                elif (
                    isinstance(inner, ast.Attribute)
                    and isinstance(inner.value, ast.Name)
                    and inner.value.id == "self"
                ):
                    names.add(inner.attr)
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


class _Checker(ast.NodeVisitor):
    def __init__(self, members: set[str]) -> None:
        self.members = members
        self.problems: list[str] = []
        self.persistence_modules: set[str] = set()  # names bound to kgot.persistence modules
        self.typed: list[set[str]] = [set()]  # names annotated Store/EntitySession, per scope

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if module == "kgot.persistence" or module.startswith("kgot.persistence."):
            for alias in node.names:
                if _is_private(alias.name):
                    self.problems.append(f"{node.lineno}: imports {alias.name} from {module}")
                elif module == "kgot.persistence" and alias.name.islower():
                    self.persistence_modules.add(alias.asname or alias.name)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.name.startswith("kgot.persistence.") and alias.asname:
                self.persistence_modules.add(alias.asname)

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        arguments = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
        typed = {
            a.arg
            for a in arguments
            if a.annotation is not None and _RECEIVER_TYPES & _annotation_names(a.annotation)
        }
        self.typed.append(self.typed[-1] | typed)
        self.generic_visit(node)
        self.typed.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._function(node)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self._function(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        base = node.value
        module_private = isinstance(base, ast.Name) and base.id in self.persistence_modules
        store_private = node.attr in self.members and self._is_store_or_session(base)
        if _is_private(node.attr) and (module_private or store_private):
            self.problems.append(f"{node.lineno}: {ast.unparse(node)}")
        self.generic_visit(node)

    def _is_store_or_session(self, expression: ast.expr) -> bool:
        if isinstance(expression, ast.Name):
            if expression.id in ("self", "cls"):
                return False
            name = expression.id
            if name in self.typed[-1]:
                return True
        elif isinstance(expression, ast.Attribute):
            name = expression.attr
        else:
            return False
        return any(word in name.lower() for word in _RECEIVER_WORDS)


def _annotation_names(annotation: ast.expr) -> set[str]:
    """The names an annotation mentions, in a quoted one too (``"EntitySession | None"``)."""
    names = set()
    for node in ast.walk(annotation):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            try:
                names |= _annotation_names(ast.parse(node.value, mode="eval").body)
            except SyntaxError:
                continue
    return names


def problems_in(source: str, members: set[str]) -> list[str]:
    checker = _Checker(members)
    checker.visit(ast.parse(source))
    return checker.problems


@pytest.mark.slow
def test_no_module_outside_persistence_touches_a_private_name_of_the_store() -> None:
    members = private_members()
    assert {"_context", "_entity_id", "_entity_row"} <= members  # the scan sees the classes
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        if relative.parts[0] in ("persistence", "tests", "build") or "egg-info" in str(relative):
            continue
        for problem in problems_in(path.read_text("utf-8"), members):
            found.append(f"{relative}:{problem}")
    assert found == [], (
        "use the store's public API (Store.read/write, EntitySession.read/write/entity_id):\n"
        + "\n".join(found)
    )


def test_the_check_finds_each_kind_of_private_use() -> None:
    members = private_members()
    source = textwrap.dedent(
        """
        from kgot.persistence.engine import _is_transient
        from kgot.persistence import upkeep_store
        from kgot.persistence import Store

        def f(store, db: Store, other: "EntitySession", backend, self_like):
            store._context
            self.store._entity_row
            memory._session._entity_id
            db._types
            other._view
            upkeep_store._anything
            backend._view          # not a store: a backend's own attribute
            wire._read             # not a store either
            store.read()           # public
        """
    )
    assert [p.split(": ", 1)[1] for p in problems_in(source, members)] == [
        "imports _is_transient from kgot.persistence.engine",
        "store._context",
        "self.store._entity_row",
        "memory._session._entity_id",
        "db._types",
        "other._view",
        "upkeep_store._anything",
    ]
