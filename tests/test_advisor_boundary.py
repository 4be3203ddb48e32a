"""Nothing outside the advisor's package names the advisor (issue 28, part 2).

kgot reaches the advisor (``aides/advisor/``) only through its entry points, as it would a
package installed from elsewhere, so the advisor can change, or leave the tree, without an edit
anywhere else. Every Python module of kgot outside that package is parsed: no import may name
a module with "advisor" in it, no identifier (a name, an attribute, a function, class,
argument or keyword, an import alias) may contain "advisor", and no string other than a
docstring may hold the package's dotted path (a dynamic import by name is still an import).
Docstrings and comments are prose and may mention the advisor; tests and docs are not checked.
The entry-point declarations in ``pyproject.toml`` are where kgot names the advisor's modules:
they may name its package only.
"""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

import kgot

ROOT = Path(kgot.__file__).resolve().parent  # the checkout: the repository root is the package
PACKAGE = ROOT / "aides" / "advisor"
WORD = "advisor"
DOTTED = "kgot.aides.advisor"
SKIPPED = {"tests", "docs", "build", "examples", ".git", ".venv", "__pycache__"}


def _modules() -> Iterator[Path]:
    for path in sorted(ROOT.rglob("*.py")):
        relative = path.relative_to(ROOT)
        if not SKIPPED.intersection(relative.parts) and not path.is_relative_to(PACKAGE):
            yield path


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the string nodes that are docstrings (prose, allowed)."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def _names(node: ast.AST) -> list[str]:
    """The identifiers ``node`` introduces or uses (imports: the modules and names)."""
    match node:
        case ast.Import(names=aliases):
            return [part for a in aliases for part in (a.name, a.asname) if part]
        case ast.ImportFrom(module=module, names=aliases):
            return [part for a in aliases for part in (a.name, a.asname) if part] + [module or ""]
        case ast.Name(id=name) | ast.Attribute(attr=name) | ast.arg(arg=name):
            return [name]
        case ast.FunctionDef(name=name) | ast.AsyncFunctionDef(name=name) | ast.ClassDef(name=name):
            return [name]
        case ast.keyword(arg=str() as name) | ast.ExceptHandler(name=str() as name):
            return [name]
        case ast.MatchAs(name=str() as name) | ast.MatchStar(name=str() as name):
            return [name]
        case ast.Global(names=names) | ast.Nonlocal(names=names):
            return list(names)
    return []


def mentions(source: str) -> list[str]:
    """Where ``source`` names the advisor: ``line: what`` for each identifier or import that
    contains the word, and each non-docstring string holding the package's dotted path."""
    tree = ast.parse(source)
    prose = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        found += [f"{line}: {name}" for name in _names(node) if WORD in name.lower()]
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in prose
            and DOTTED in node.value
        ):
            found.append(f"{line}: {node.value!r}")
    return found


@pytest.mark.parametrize(
    "source",
    [
        "from kgot.aides.advisor import agent_tools\n",
        "import kgot.aides.advisor.api as api\n",
        "from kgot.aides import advisor\n",
        "def advisor_of(store): ...\n",
        "x = tools.advisor_register\n",
        "f(advisor=None)\n",
        "import importlib\nimportlib.import_module('kgot.aides.advisor.program')\n",
        "class AdvisorOut: ...\n",
    ],
)
def test_the_check_sees_each_way_of_naming_it(source: str) -> None:
    assert mentions(source), source


def test_prose_and_plain_words_are_not_names() -> None:
    source = (
        '"""The advisor (kgot.aides.advisor) is an aide program."""\n'
        "# the advisor's tables\n"
        'HELP = "digest or advisor"\n'
        "def f():\n"
        '    """Uses kgot.aides.advisor indirectly."""\n'
    )
    assert mentions(source) == []


@pytest.mark.slow  # parses every module of kgot (~3 s)
def test_no_module_outside_the_package_names_the_advisor() -> None:
    found = {
        path.relative_to(ROOT).as_posix(): hits
        for path in _modules()
        if (hits := mentions(path.read_text(encoding="utf-8")))
    }
    assert found == {}, found
    assert len(list(_modules())) > 100  # the walk did find kgot's modules


def test_the_entry_points_name_only_the_package() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    declared = {
        f"{group}: {name}": value
        for group, points in project["entry-points"].items()
        for name, value in points.items()
        if WORD in name or WORD in value
    }
    assert len(declared) == 6, declared  # tools, program, commands, MCP tools, perf, tables
    outside = {key: value for key, value in declared.items() if not value.startswith(DOTTED)}
    assert outside == {}, outside
