"""``find`` and ``neighbours``: what graph code calls to reach nodes its graph may not hold.

An entity run on a large entity gives graph code a working set, not the entity
(``controller/working_set.py``). A job cannot reach the store, so these helpers answer from
what the host sent with the job (``in/options.json``: ``{"lookups": {"answers": {key: ids}}}``).
A call the host has not answered yet stops the code with :class:`FactsNeeded`; the job reports
what it needs (outcome kind ``needs``), the host reads the answer and the nodes in it from the
store, adds them to the graph and runs the same code again with the answer. Code is
deterministic and sees nothing but the graph, so the run that completes is the one that would
have run on the whole entity.

Without ``lookups`` in the options the graph is whole (an ephemeral run, or an entity small
enough to load) and the helpers answer from ``G`` itself, the same answers the store would give.
Standard library and ``graph_model/records.py`` only: this module travels in the job's zip.
"""

from __future__ import annotations

import json
import math
from typing import Any

from kgot.graph_model.records import has_values

MAX_LIMIT = 1000
DEFAULT_LIMIT = 100
_SCALARS = (str, int, float, bool)


class FactsNeeded(BaseException):
    """The code asked for something the host has not answered yet. A ``BaseException``, so
    that code catching ``Exception`` does not go on with a wrong answer."""

    def __init__(self, request: dict[str, Any]) -> None:
        super().__init__(request)
        self.request = request


def request_key(request: dict[str, Any]) -> str:
    """The answers' key of a request (its canonical JSON)."""
    return json.dumps(request, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def find_request(label: Any, limit: Any, properties: dict[str, Any]) -> dict[str, Any]:
    """A checked ``find`` request.

    Raises:
        TypeError, ValueError: arguments the code must fix (shown to the model as its error).
    """
    if label is not None and not isinstance(label, str):
        raise TypeError("find(label=…): the label must be a string, such as 'Company'")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise ValueError(f"find(limit=…) must be a whole number from 1 to {MAX_LIMIT}")
    if label is None and not properties:
        raise ValueError("find() needs a label or a property to match, e.g. find('Company')")
    for name, value in properties.items():
        if not isinstance(value, _SCALARS) or (isinstance(value, float) and math.isnan(value)):
            raise TypeError(
                f"find({name}=…): compare with a string, number or boolean, "
                f"not {type(value).__name__}"
            )
    return {
        "find": {"label": label, "limit": limit, "properties": dict(sorted(properties.items()))}
    }


def neighbours_request(node_id: Any) -> dict[str, Any]:
    if not isinstance(node_id, str):
        raise TypeError("neighbours(id): node ids are strings")
    return {"neighbours": node_id}


def matches(attrs: dict[str, Any], label: str | None, properties: dict[str, Any]) -> bool:
    """Whether a node's attributes (``label`` included) match a find request; values compare
    as JSON values do (:func:`~kgot.graph_model.records.has_values`)."""
    if label is not None and attrs.get("label") != label:
        return False
    return has_values(attrs, properties)


def linked_ids(graph: Any, node_id: str) -> list[str]:
    """Ids of the nodes linked to ``node_id`` by an edge either way, sorted: ``neighbours()``
    in a job, and the host's answer to it for a working set."""
    if node_id not in graph:
        return []
    return sorted(str(n) for n in {*graph.successors(node_id), *graph.predecessors(node_id)})


def helpers(graph: Any, answers: dict[str, list[str]] | None) -> dict[str, Any]:
    """The helpers graph code sees beside ``G``: answered from ``answers`` (a working set),
    or from ``graph`` itself when ``answers`` is None (the whole graph)."""

    def find(label: str | None = None, *, limit: int = DEFAULT_LIMIT, **properties: Any) -> list:
        """Ids of the graph's nodes with this label and these property values, sorted, at
        most ``limit`` (1000 at most)."""
        request = find_request(label, limit, properties)
        if answers is None:
            spec = request["find"]
            found = sorted(
                str(node_id)
                for node_id, attrs in graph.nodes(data=True)
                if matches(attrs, spec["label"], spec["properties"])
            )
            return found[:limit]
        return _answered(answers, request)

    def neighbours(node_id: str) -> list:
        """Ids of the nodes linked to ``node_id`` by an edge either way, sorted."""
        request = neighbours_request(node_id)
        if answers is None:
            return linked_ids(graph, node_id)
        return _answered(answers, request)

    return {"find": find, "neighbours": neighbours}


def _answered(answers: dict[str, list[str]], request: dict[str, Any]) -> list[str]:
    found = answers.get(request_key(request))
    if found is None:
        raise FactsNeeded(request)
    return list(found)
