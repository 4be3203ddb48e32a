"""Graph files: node-link JSON, GraphML, Turtle and N-Triples, chosen by extension.

Every format holds the same property graph without loss for JSON property values:

* ``.json`` — node-link JSON as NetworkX writes it: ``{"directed": true, "multigraph": true,
  "graph": {}, "nodes": [{"id", "label", …}], "edges": [{"source", "target", "key",
  "relationship", …}]}`` (``"links"`` is accepted for ``"edges"``).
* ``.graphml`` — via NetworkX; properties holding lists, objects or null are stored as JSON text
  and named in the graph attribute ``kgot_json`` so they read back as values.
* ``.ttl`` / ``.nt`` — the RDF mapping of :mod:`kgot.graph_backends.jobs.rdf_model`.

Reading checks the property-graph rules (every node a label, every edge a relationship, …) and
reports the first problems in one line naming the file. Writing is atomic: a temporary file in
the target directory is renamed over the target once complete.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import networkx as nx

from kgot.atomic_file import current_umask, replace_file
from kgot.config import DEFAULT_LIMITS, StoreLimits
from kgot.errors import ChangesetError, GraphFileError
from kgot.graph_backends.graph_state import (
    FillError,
    checked,
    fill_graph,
    normalize_in_place,
    raise_problems,
)
from kgot.graph_backends.jobs.outcome import collector_paused
from kgot.graph_backends.jobs.rdf_decode import decode
from kgot.graph_backends.jobs.rdf_model import (
    KG_SOURCE,
    NODE,
    PREFIXES,
    RDF_TYPE,
    REL,
    graph_ntriples,
)
from kgot.graph_model import INT_MAX, INT_MIN, MAX_VALUE_DEPTH

FORMATS = {
    ".json": "node-link JSON",
    ".graphml": "GraphML",
    ".ttl": "Turtle",
    ".nt": "N-Triples",
}
_JSON_ATTRIBUTES = "kgot_json"  # GraphML graph attribute naming JSON-encoded properties


def graph_format(path: Path) -> str:
    """The extension of ``path`` when kgot reads and writes it.

    Raises:
        GraphFileError: any other extension.
    """
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        known = ", ".join(f"{ext} ({name})" for ext, name in FORMATS.items())
        shown = f"extension {suffix!r}" if suffix else "no extension"
        raise GraphFileError(f"{path}: unknown graph format ({shown}); use {known}")
    return suffix


def read_import_file(path: Path, limits: StoreLimits = DEFAULT_LIMITS) -> nx.MultiDiGraph:
    """The graph in ``path``, read for an import: its size is checked before it is read, its
    node and edge counts as soon as it is parsed (before the graph is built).

    Raises:
        GraphFileError: the file is missing, too large, holds too many nodes or edges, or is
            not a valid graph file (one line naming the file and the cap or problem).
    """
    try:
        size = path.stat().st_size
    except OSError:
        size = 0  # a missing or unreadable file is reported by the reader, in its words
    if size > limits.max_import_bytes:
        raise GraphFileError(
            f"{path}: {_megabytes(size)} MB, more than the {_megabytes(limits.max_import_bytes)}"
            " MB one import may read (split the file, or raise the setting store.max_import_mb)"
        )
    return read_graph(path, max_nodes=limits.max_import_nodes, max_edges=limits.max_import_edges)


def _megabytes(size: int) -> str:
    return f"{size / 2**20:,.1f}".removesuffix(".0")


def read_graph(
    path: Path, *, max_nodes: int | None = None, max_edges: int | None = None
) -> nx.MultiDiGraph:
    """Read a property graph from ``path`` (format by extension).

    The graph is built once and checked in place: every node a label, every edge a
    relationship, JSON property values, and no id or edge key listed twice (``1`` and ``"1"``
    are the same id).

    Args:
        max_nodes, max_edges: caps of an import (``store.max_import_nodes`` / ``…_edges``).
            GraphML and RDF are counted while they are parsed, and reading stops being more
            than counting once a cap is passed; node-link JSON is counted once parsed, before
            its graph is built. A file over a cap is refused with its whole count.

    Raises:
        GraphFileError: unknown extension, unreadable file, malformed content or a graph that
            breaks the property-graph rules; one line naming the file and, where known, the
            line or the entry (``nodes[3]``).
    """
    path = Path(path)
    suffix = graph_format(path)
    if not path.is_file():
        raise GraphFileError(f"{path}: no such file")
    readers: dict[str, Callable[[Path, _Caps], nx.MultiDiGraph]] = {
        ".json": _read_json,
        ".graphml": _read_graphml,
        ".ttl": _read_rdf,
        ".nt": _read_rdf,
    }
    caps = _Caps(max_nodes, max_edges)
    try:
        with collector_paused():  # hundreds of thousands of new objects, no cycles among them
            graph = readers[suffix](path, caps)
            if suffix == ".graphml":  # other tools' GraphML may repeat identities in attributes
                return normalize_in_place(graph)
            raise_problems(graph)  # the other readers build normalised graphs
            return graph
    except OSError as error:
        raise GraphFileError(f"{path}: cannot read: {error.strerror or error}") from None
    except ChangesetError as error:
        raise GraphFileError(_rule_message(path, error.problems)) from None


def write_graph(graph: nx.MultiDiGraph, path: Path) -> None:
    """Write ``graph`` to ``path`` atomically (format by extension).

    A new file gets the usual mode for new files (``0o666`` less the umask); a file that is
    replaced keeps its mode.

    Raises:
        GraphFileError: unknown extension, a graph breaking the property-graph rules, or the
            file cannot be written (the target is then left as it was).
    """
    path = Path(path)
    suffix = graph_format(path)
    writers: dict[str, Callable[[nx.MultiDiGraph], bytes]] = {
        ".json": _json_bytes,
        ".graphml": _graphml_bytes,
        ".ttl": _turtle_bytes,
        ".nt": _ntriples_bytes,
    }
    with collector_paused():
        try:
            graph = checked(graph)
        except ChangesetError as error:
            raise GraphFileError(_rule_message(path, error.problems)) from None
        content = writers[suffix](graph)
    _write_atomically(path, content)


class _Caps(NamedTuple):
    """How many nodes and edges a file may hold (``None``: any number)."""

    nodes: int | None
    edges: int | None

    def check(self, path: Path, nodes: int, edges: int) -> None:
        for count, cap, noun in ((nodes, self.nodes, "node"), (edges, self.edges, "edge")):
            if cap is not None and count > cap:
                raise GraphFileError(
                    f"{path}: {count:,} {noun}s, more than the {cap:,} one import may hold "
                    f"(split the file, or raise the setting store.max_import_{noun}s)"
                )


def _rule_message(path: Path, problems: list[str]) -> str:
    more = f" (and {len(problems) - 1} more problems)" if len(problems) > 1 else ""
    return f"{path}: {problems[0]}{more}"


def _write_atomically(path: Path, content: bytes) -> None:
    directory = path.parent if str(path.parent) else Path(".")
    if not directory.is_dir():
        raise GraphFileError(f"{path}: directory {directory} does not exist")
    # Keep the mode of the file replaced, else what a new file gets.
    try:
        mode = path.stat().st_mode & 0o777 if path.exists() else 0o666 & ~current_umask()
        replace_file(directory / path.name, content, mode)
    except OSError as error:
        raise GraphFileError(f"{path}: cannot write: {error.strerror or error}") from None


# -- node-link JSON ---------------------------------------------------------------------------


def _json_bytes(graph: nx.MultiDiGraph) -> bytes:
    document = {
        "directed": True,
        "multigraph": True,
        "graph": {},
        "nodes": [{"id": node_id, **attrs} for node_id, attrs in graph.nodes(data=True)],
        "edges": [
            {"source": s, "target": t, "key": k, **attrs}
            for s, t, k, attrs in graph.edges(keys=True, data=True)
        ],
    }
    return json.dumps(document, ensure_ascii=False, allow_nan=False, indent=1).encode("utf-8")


def _read_json(path: Path, caps: _Caps) -> nx.MultiDiGraph:
    document, links = _node_link_document(path)
    caps.check(path, len(document["nodes"]), len(links))
    nodes = []
    for index, entry in enumerate(document["nodes"]):
        if type(entry) is not dict or "id" not in entry:
            raise GraphFileError(f'{path}: nodes[{index}] is not an object with an "id"')
        node_id = entry.pop("id")
        if type(node_id) is not str:
            node_id = _text_id(path, f"nodes[{index}]", node_id)
        nodes.append((node_id, entry))  # the entry itself becomes the attribute dict
    edges = []
    for index, entry in enumerate(links):
        if type(entry) is not dict or "source" not in entry or "target" not in entry:
            raise GraphFileError(
                f'{path}: edges[{index}] is not an object with "source" and "target"'
            )
        source, target = entry.pop("source"), entry.pop("target")
        if type(source) is not str:
            source = _text_id(path, f"edges[{index}]", source)
        if type(target) is not str:
            target = _text_id(path, f"edges[{index}]", target)
        key = entry.pop("key", None)
        # A key from another tool (NetworkX numbers parallel edges) is not a kgot key: kgot
        # keys the edge by its relationship.
        edges.append((source, target, key if type(key) is str and key else None, entry))
    try:
        return fill_graph(nodes, edges, strict=True)
    except FillError as error:
        raise GraphFileError(f"{path}: {_listing_problem(error, nodes, edges)}") from None


def _node_link_document(path: Path) -> tuple[dict[str, Any], list[Any]]:
    """The parsed document and its edge list, once its shape is right."""
    try:
        document = json.loads(path.read_bytes().decode("utf-8-sig"), parse_int=_bounded_int)
    except _IntegerTooLong as error:
        raise GraphFileError(f"{path}: {error}") from None
    except json.JSONDecodeError as error:
        raise GraphFileError(
            f"{path}: line {error.lineno}, column {error.colno}: invalid JSON ({error.msg})"
        ) from None
    except UnicodeDecodeError:
        raise GraphFileError(f"{path}: not UTF-8 text") from None
    except RecursionError:
        raise GraphFileError(
            f"{path}: the JSON nests arrays or objects too deeply to read; property values "
            f"nest at most {MAX_VALUE_DEPTH} levels"
        ) from None
    if not isinstance(document, dict) or not isinstance(document.get("nodes"), list):
        raise GraphFileError(
            f'{path}: not a node-link graph (expected an object with a "nodes" list)'
        )
    if document.get("directed") is False:
        raise GraphFileError(
            f'{path}: the graph is undirected ("directed": false); kgot graphs are directed, '
            'so write "directed": true with each edge from its source to its target'
        )
    links = document.get("edges", document.get("links", []))
    if not isinstance(links, list):
        raise GraphFileError(f'{path}: "edges" must be a list')
    return document, links


class _IntegerTooLong(ValueError):
    """An integer literal too long to convert (Python refuses over 4,300 digits)."""


def _bounded_int(literal: str) -> int:
    """An integer literal as an ``int``; one that Python would refuse to convert is reported
    as out of range (the checks after reading name the JSON path of shorter ones)."""
    if len(literal) <= 4_000:
        return int(literal)
    raise _IntegerTooLong(
        f"an integer of {len(literal.lstrip('-')):,} digits ({literal[:12]}…) is outside the "
        f"signed 64-bit range ({INT_MIN} to {INT_MAX}); store it as a string"
    )


def _listing_problem(error: FillError, nodes: list[Any], edges: list[Any]) -> str:
    """Which entries of a node-link file repeat a node or an edge, or name a missing node."""
    if error.kind == "duplicate_node":
        first, second = [i for i, (node_id, _) in enumerate(nodes) if node_id == error.item][:2]
        return (
            f"nodes[{second}] repeats the id {error.item!r} of nodes[{first}] (ids are "
            'compared as text, so 1 and "1" are one id); merge them or rename one'
        )
    if error.kind == "duplicate_edge":
        first, second = [i for i, (s, t, k, _) in enumerate(edges) if (s, t, k) == error.item][:2]
        source, target, key = error.item
        return (
            f"edges[{second}] repeats the key {key!r} of edges[{first}] between {source!r} and "
            f"{target!r}; parallel edges need different keys"
        )
    index = next(i for i, (s, t, _, _) in enumerate(edges) if error.item in (s, t))
    return f"edges[{index}] refers to node {error.item!r}, which is not listed"


def _text_id(path: Path, where: str, value: Any) -> str:
    """Ids from other tools may be numbers; they become their decimal text."""
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise GraphFileError(f"{path}: {where}: id {value!r} is not a string")


# -- GraphML -----------------------------------------------------------------------------------


def _is_plain(value: Any) -> bool:
    return isinstance(value, (str, int, float, bool))


def _graphml_bytes(graph: nx.MultiDiGraph) -> bytes:
    import io

    encoded = {"node": _json_names(d for _, d in graph.nodes(data=True))}
    encoded["edge"] = _json_names(d for *_, d in graph.edges(keys=True, data=True))
    copy = nx.MultiDiGraph()
    copy.graph[_JSON_ATTRIBUTES] = json.dumps(
        {scope: sorted(names) for scope, names in encoded.items()}
    )
    copy.add_nodes_from((n, _encode_values(d, encoded["node"])) for n, d in graph.nodes(data=True))
    copy.add_edges_from(
        (s, t, k, _encode_values(d, encoded["edge"]))
        for s, t, k, d in graph.edges(keys=True, data=True)
    )
    buffer = io.BytesIO()
    nx.write_graphml(copy, buffer, encoding="utf-8")
    return buffer.getvalue()


def _json_names(all_attrs: Any) -> set[str]:
    """Attribute names with at least one value GraphML cannot type (list, object, null)."""
    names: set[str] = set()
    for attrs in all_attrs:
        names.update(name for name, value in attrs.items() if not _is_plain(value))
    return names


def _encode_values(attrs: dict[str, Any], json_names: set[str]) -> dict[str, Any]:
    return {
        name: json.dumps(value, ensure_ascii=False) if name in json_names else value
        for name, value in attrs.items()
    }


def _read_graphml(path: Path, caps: _Caps) -> nx.MultiDiGraph:
    from xml.etree.ElementTree import ParseError

    try:
        # Repeated ids (NetworkX would merge them) and the caps are checked in one streaming
        # pass, so a file over a cap never reaches NetworkX, which holds the whole graph.
        _scan_graphml(path, caps)
        raw = nx.read_graphml(path, node_type=str, force_multigraph=True)
    except ParseError as error:
        line, column = error.position
        message = str(error).split(":")[0]
        raise GraphFileError(
            f"{path}: line {line}, column {column}: invalid XML ({message})"
        ) from None
    except (nx.NetworkXError, ValueError, KeyError, TypeError) as error:
        raise GraphFileError(f"{path}: not a usable GraphML graph ({error})") from None
    if not raw.is_directed():
        raise GraphFileError(
            f'{path}: the graph is undirected; kgot graphs are directed (edgedefault="directed")'
        )
    # Nodes that only edges name are not <node> elements: they count once built.
    caps.check(path, raw.number_of_nodes(), raw.number_of_edges())
    try:
        encoded = json.loads(raw.graph.get(_JSON_ATTRIBUTES, "{}"))
        node_names = set(encoded.get("node", []))
        edge_names = set(encoded.get("edge", []))
    except (ValueError, AttributeError, TypeError):
        raise GraphFileError(f"{path}: graph attribute {_JSON_ATTRIBUTES} is not valid") from None
    raw.graph.clear()
    if not node_names and not edge_names:
        return raw  # nothing to decode: the graph NetworkX built is the graph
    nodes = [
        (node_id, _decode_values(path, f"node {node_id!r}", attrs, node_names))
        for node_id, attrs in raw.nodes(data=True)
    ]
    edges = [
        (
            source,
            target,
            key if isinstance(key, str) else None,
            _decode_values(path, f"edge {source!r}->{target!r}", attrs, edge_names),
        )
        for source, target, key, attrs in raw.edges(keys=True, data=True)
    ]
    return fill_graph(nodes, edges)


def _decode_values(
    path: Path, where: str, attrs: dict[str, Any], names: set[str]
) -> dict[str, Any]:
    out = dict(attrs)
    for name in names & attrs.keys():
        if isinstance(attrs[name], str):
            try:
                out[name] = json.loads(attrs[name])
            except ValueError:
                raise GraphFileError(f"{path}: {where}: `{name}` is not valid JSON") from None
            except RecursionError:
                raise GraphFileError(f"{path}: {where}: `{name}` nests too deeply") from None
    return out


def _scan_graphml(path: Path, caps: _Caps) -> None:
    """Refuse a GraphML file listing a node id, or an edge id between two nodes, twice, or
    holding more nodes or edges than ``caps`` allow.

    Streams the XML and drops each element once read, so memory does not grow with the file
    (the file is read again by NetworkX afterwards). Past a cap the rest is only counted: the
    refusal names the whole count, and the ids of a refused file need no checking.

    Raises:
        GraphFileError: the first repeated id, with its line, or the count over a cap.
        xml.etree.ElementTree.ParseError: the XML is malformed.
    """
    from xml.etree.ElementTree import Element, iterparse

    namespace = "{http://graphml.graphdrawing.org/xmlns}"
    node_cap = caps.nodes if caps.nodes is not None else float("inf")
    edge_cap = caps.edges if caps.edges is not None else float("inf")
    nodes: dict[str, int] = {}
    edges: dict[tuple[str, str, str], int] = {}
    node_count = edge_count = 0
    open_elements: list[Element] = []
    for event, element in iterparse(path, events=("start", "end")):
        if event == "start":
            open_elements.append(element)
            continue
        open_elements.pop()
        tag = element.tag.removeprefix(namespace)
        if tag == "node":
            node_count += 1
            if node_count <= node_cap:
                node_id = element.get("id", "")
                earlier = nodes.setdefault(node_id, node_count)
                if earlier != node_count:
                    raise GraphFileError(
                        f"{path}: <node> #{node_count} repeats the id {node_id!r} of <node> "
                        f"#{earlier}; merge the two nodes or rename one"
                    )
        elif tag == "edge":
            edge_count += 1
            edge_id = element.get("id")
            if edge_id is not None and edge_count <= edge_cap:
                ident = (element.get("source", ""), element.get("target", ""), edge_id)
                earlier = edges.setdefault(ident, edge_count)
                if earlier != edge_count:
                    raise GraphFileError(
                        f"{path}: <edge> #{edge_count} repeats the id {edge_id!r} of <edge> "
                        f"#{earlier} between {ident[0]!r} and {ident[1]!r}; parallel edges "
                        "need different ids"
                    )
        if open_elements:
            # A cleared element still hangs in its parent: 50M empty <node>s are gigabytes.
            open_elements[-1].remove(element)
    caps.check(path, node_count, edge_count)


# -- RDF ---------------------------------------------------------------------------------------


def _ntriples_bytes(graph: nx.MultiDiGraph) -> bytes:
    return graph_ntriples(graph.nodes(data=True), graph.edges(keys=True, data=True)).encode("utf-8")


def _turtle_bytes(graph: nx.MultiDiGraph) -> bytes:
    import pyoxigraph as ox

    triples = ox.parse(_ntriples_bytes(graph), format=ox.RdfFormat.N_TRIPLES)
    content = ox.serialize(triples, format=ox.RdfFormat.TURTLE, prefixes=PREFIXES)
    assert content is not None  # serialize returns the bytes when given no output
    return content


def _read_rdf(path: Path, caps: _Caps) -> nx.MultiDiGraph:
    import pyoxigraph as ox

    rdf_format = ox.RdfFormat.TURTLE if path.suffix.lower() == ".ttl" else ox.RdfFormat.N_TRIPLES
    counts = _RdfCounts()
    try:
        triples = ox.parse(path=str(path), format=rdf_format)
        try:
            decoded = decode(counts.passing(triples, caps))
        except _OverCap:
            # The graph gathered so far is dropped; the rest is only counted, for the message.
            counts.add_all(triples)
            caps.check(path, *counts.totals())
            raise AssertionError("over a cap, yet within it") from None
    except SyntaxError as error:
        raise GraphFileError(
            f"{path}: {_rdf_position(error)}invalid {FORMATS[path.suffix.lower()]} "
            f"({_rdf_reason(error)})"
        ) from None
    # The counts while parsing are bounds (a group of parallel edges, some described, can
    # hold more edges than either count): the graph read is checked exactly.
    caps.check(path, len(decoded.nodes), len(decoded.edges))
    if decoded.problems:
        raise GraphFileError(_rule_message(path, decoded.problems))
    graph = nx.MultiDiGraph()
    graph.add_nodes_from(decoded.nodes.items())
    graph.add_edges_from((s, t, k, a) for (s, t, k), a in decoded.edges.items())
    return graph


class _OverCap(Exception):
    """An RDF file passed an import cap while it was being read."""


class _RdfCounts:
    """The nodes and edges an RDF file holds, counted triple by triple while it is parsed.

    Nodes are counted by their ``node: a type:`` triples, edges by the larger of the
    ``node: rel: node:`` triples and the edge descriptions (``kg:source`` triples). A file
    that follows the mapping says each once per node and edge (parallel edges are described),
    so these are its node count and at least its edge count, known with no memory kept.
    """

    def __init__(self) -> None:
        self.nodes = self.links = self.descriptions = 0

    def add(self, triple: Any) -> None:
        predicate = triple.predicate.value
        if predicate == KG_SOURCE:
            self.descriptions += 1
        elif triple.subject.value.startswith(NODE):
            if predicate == RDF_TYPE:
                self.nodes += 1
            elif predicate.startswith(REL) and triple.object.value.startswith(NODE):
                self.links += 1

    def add_all(self, triples: Iterable[Any]) -> None:
        for triple in triples:
            self.add(triple)

    def totals(self) -> tuple[int, int]:
        return self.nodes, max(self.links, self.descriptions)

    def passing(self, triples: Iterable[Any], caps: _Caps) -> Iterator[Any]:
        """``triples`` as they are counted; raises :class:`_OverCap` once a cap is passed."""
        node_cap = caps.nodes if caps.nodes is not None else float("inf")
        edge_cap = caps.edges if caps.edges is not None else float("inf")
        for triple in triples:
            self.add(triple)
            if self.nodes > node_cap or max(self.links, self.descriptions) > edge_cap:
                raise _OverCap
            yield triple


def _rdf_position(error: SyntaxError) -> str:
    if error.lineno:
        column = f", column {error.offset}" if error.offset else ""
        return f"line {error.lineno}{column}: "
    return ""


def _rdf_reason(error: SyntaxError) -> str:
    """Oxigraph's reason without the position it also spells out in its message."""
    message = str(error.msg or error)
    if message.startswith("Parser error") and ": " in message:
        message = message.split(": ", 1)[1]
    return message[:1].lower() + message[1:]
