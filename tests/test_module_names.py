"""Module names are unique in meaning: two modules of kgot may share a file name only when the
name means the same thing in both packages (each package's ``api.py`` is its public functions).

A name used in more than one package is listed here with the meaning its modules share. A new
module that takes a name already used must be added deliberately, or renamed so its name says
what it is (issue 28, part 5 renamed the last clashes: graph_files, file_tool, tool_session,
answer_scoring, tool_schemas, graph_state, argument_schemas).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]
# Not modules of kgot's own namespace: the tests, build output, package markers.
_SKIPPED_FOLDERS = {"tests", "build", "docs", "examples"}
_SKIPPED_NAMES = {"__init__", "__main__", "conftest"}

# name -> what every module of that name is, in its package.
SAME_MEANING = {
    "access": "who may touch what the package serves (MCP grants, the run's workspace)",
    "api": "the package's public functions",
    "base": "the contract the package's implementations follow",
    "client": "how the package talks to its remote service (model endpoints, HTTP servers)",
    "common": "helpers the package's modules share",
    "context": "the services the package's parts share while they work",
    "extensions": "the extensions (entry points) the package loads and serves",
    "ingest": "adding a text to an entity's graph",
    "market_data": "prices and quotes of traded symbols",
    "resident": "the sandbox's resident worker (host side and job side)",
    "runner": "running the package's units of work (graph jobs, tool calls)",
    "schema": "the tables the package keeps in the store",
    "views": "the graph as shown in prompts",
    "writes": "the package's write path to an entity's graph",
}


def modules_by_name() -> dict[str, set[str]]:
    found: dict[str, set[str]] = defaultdict(set)
    for path in PACKAGE.rglob("*.py"):
        relative = path.relative_to(PACKAGE)
        if relative.parts[0] in _SKIPPED_FOLDERS:
            continue
        if path.stem in _SKIPPED_NAMES or any(p.startswith(".") for p in relative.parts):
            continue
        found[path.stem].add(relative.as_posix())
    return found


def test_a_module_name_used_twice_means_the_same_thing_everywhere() -> None:
    shared = {name: paths for name, paths in modules_by_name().items() if len(paths) > 1}
    unexplained = {
        name: sorted(paths) for name, paths in shared.items() if name not in SAME_MEANING
    }
    assert unexplained == {}, (
        "modules share a name: rename one so the name says what it is, or, if the name means "
        "the same in each package, add it to SAME_MEANING in tests/test_module_names.py"
    )


def test_the_aide_row_modules_have_names_of_their_own() -> None:
    names = modules_by_name()
    assert names["records"] == {"graph_model/records.py"}  # the graph records sent to jobs
    assert names["aide_rows"] == {"aides/aide_rows.py"}
    assert names["advisor_rows"] == {"aides/advisor/advisor_rows.py"}
