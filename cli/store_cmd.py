"""`kgot entities …` and `kgot types …`: the persistent per-entity graphs and their types.

The store is ``store.db`` from the settings (``KGOT_DB``, ``[store] db`` in the config file) or
``--db`` on each command: a SQLite path or a ``postgresql://`` URL.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from kgot.cli.common import confirm_irreversible, print_json, printable, settings_from
from kgot.cli.layout import plural
from kgot.errors import UsageError

if TYPE_CHECKING:
    from kgot.persistence import Store, TypeDef

entities_app = typer.Typer(
    help="Persistent per-entity knowledge graphs (tenants).", no_args_is_help=True
)
types_app = typer.Typer(
    help="Node and edge types (JSON Schema validated), global or per entity.",
    no_args_is_help=True,
)

DbOption = Annotated[
    str | None,
    typer.Option(
        "--db",
        help="SQLite path or postgresql:// URL (default: KGOT_DB / config).",
        show_default=False,
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON.")]
EntityScope = Annotated[
    str | None,
    typer.Option(
        "--entity",
        "-e",
        help="The entity's own types (default: the global types).",
        show_default=False,
    ),
]


@contextmanager
def opened_store(
    ctx: typer.Context, db: str | None, *, create: bool = False, entity: str | None = None
) -> Iterator[Store]:
    """The configured store (``--db`` first), closed afterwards.

    Only commands that add something pass ``create=True``: the others must not answer a
    mistyped KGOT_DB / --db with a new, empty database (and directories) at the wrong place.
    ``entity`` names the entity the command needs, for the message when there is no store.
    """
    from kgot.persistence import StoreNotFoundError, no_store_for_entity, open_store

    settings = settings_from(ctx, {"store.db": db}).store
    location = settings.db
    try:
        store = open_store(location, create=create, limits=settings.limits())
    except StoreNotFoundError as missing:
        if entity is None:
            raise
        raise no_store_for_entity(entity, location) from missing
    try:
        yield store
    finally:
        store.close()


# ---------------------------------------------------------------------------- entities


@entities_app.command("list")
def entities_list(ctx: typer.Context, db: DbOption = None, as_json: JsonOption = False) -> None:
    """List entities with their graph version and size."""
    from kgot.persistence import StoreNotFoundError

    try:
        with opened_store(ctx, db) as store:
            entities = store.list_entities()
        missing = ""
    except StoreNotFoundError:
        entities, missing = [], f" (there is no kgot database at {_location(ctx, db)} yet)"
    if as_json:
        print_json([entity.to_dict() for entity in entities])
        return
    if not entities:
        typer.echo(f"no entities yet{missing}; create one with: kgot entities create NAME")
        return
    from kgot.cli.layout import Column, short_time, table_lines

    columns = [
        Column("entity", clip=False),  # typed back in every other command
        Column("version", right=True),
        Column("nodes", right=True),
        Column("edges", right=True),
        Column("updated"),
        Column("description", share=1),
    ]
    rows = [
        [
            entity.name,
            str(entity.version),
            f"{entity.nodes:,}",
            f"{entity.edges:,}",
            short_time(entity.updated_at),
            entity.description,
        ]
        for entity in entities
    ]
    for line in table_lines(columns, rows):
        typer.echo(line)


@entities_app.command("create")
def entities_create(
    ctx: typer.Context,
    name: Annotated[
        str,
        typer.Argument(
            help="Entity name: ASCII letters, digits, . @ - _ (unique regardless of case)."
        ),
    ],
    description: Annotated[str, typer.Option("--description", "-d", help="What it is.")] = "",
    types: Annotated[
        Path | None,
        typer.Option(
            "--types", help="JSON/YAML file of the entity's own types to add.", show_default=False
        ),
    ] = None,
    db: DbOption = None,
) -> None:
    """Create an empty entity, optionally with its own types (all or nothing)."""
    from kgot.persistence import load_type_file

    specs = load_type_file(types) if types is not None else []  # bad files fail first
    with opened_store(ctx, db, create=True) as store:
        store.create_entity(name, description, types=specs)  # one transaction
    extra = f" with {plural(len(specs), 'type')}" if specs else ""
    typer.echo(f"created entity {name!r}{extra}")


@entities_app.command("show")
def entities_show(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The entity.")],
    commits: Annotated[int, typer.Option(min=0, help="How many recent commits to list.")] = 10,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show an entity: size per label and relationship, and its latest commits."""
    with opened_store(ctx, db, entity=name) as store:
        info = store.get_entity(name)
        session = store.session(name)
        stats = session.stats()
        recent = session.commits(limit=commits)
    data = {**info.to_dict(), "stats": stats.to_dict(), "commits": recent}
    if as_json:
        print_json(data)
        return
    typer.echo(f"entity       {info.name}")
    if info.description:
        typer.echo(f"description  {info.description}")
    typer.echo(f"version      {info.version}")
    typer.echo(f"facts        {plural(stats.nodes, 'node')}, {plural(stats.edges, 'edge')}")
    for title, counts in (
        ("labels", stats.nodes_by_label),
        ("relations", stats.edges_by_relationship),
    ):
        if counts:
            typer.echo(f"{title:12} " + ", ".join(f"{k} {v:,}" for k, v in counts.items()))
    for commit in recent:
        when = (commit["committed_at"] or "")[:19].replace("T", " ")
        run = f" run {commit['run_id']}" if commit["run_id"] else ""
        typer.echo(f"  v{commit['version']:<5} {when} {commit['step']}{run}: {commit['summary']}")


@entities_app.command("delete")
def entities_delete(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The entity.")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    db: DbOption = None,
) -> None:
    """Delete an entity with all its facts, history, own types, runs and checkpoints."""
    with opened_store(ctx, db, entity=name) as store:
        info = store.get_entity(name)  # unknown names fail before any question
        if not yes:
            nodes, edges = plural(info.nodes, "node"), plural(info.edges, "edge")
            confirm_irreversible(
                f"deleting entity {name!r} ({nodes}, {edges})",
                f"Delete entity {name!r} with {nodes} and {edges}?",
            )
        store.delete_entity(name)
    typer.echo(f"deleted entity {name!r}")


@entities_app.command("history")
def entities_history(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The entity.")],
    node: Annotated[str, typer.Argument(help="Node id.")],
    db: DbOption = None,
) -> None:
    """Print every stored version of one node as JSON (oldest first)."""
    with opened_store(ctx, db, entity=name) as store:
        versions = store.session(name).node_history(node)
    if not versions:
        raise UsageError(f"entity {name!r} has never had a node {node!r}")
    print_json(versions)


# ---------------------------------------------------------------------------- types


@types_app.command("list")
def types_list(
    ctx: typer.Context, entity: EntityScope = None, db: DbOption = None, as_json: JsonOption = False
) -> None:
    """List the node and edge types an entity may use (or the global ones)."""
    with opened_store(ctx, db, entity=entity) as store:
        catalog = store.type_catalog(entity)
    if as_json:
        print_json(catalog.to_dict())
        return
    for line in _catalog_lines(catalog):
        typer.echo(line)


def _catalog_lines(catalog: Any) -> list[str]:
    """``types list`` as text: node types, then edge types (with what they connect), one line
    each at the terminal's width; a description cut to fit says where the whole one is."""
    from kgot.cli.layout import Column, table_lines, terminal_width

    width = terminal_width()
    lines: list[str] = []
    clipped = False
    for kind, found in (("node", catalog.node_types), ("edge", catalog.edge_types)):
        if not found:
            continue
        columns = [Column("type", widest=28), Column("v"), Column("scope", widest=16)]
        columns.append(Column("by"))
        if kind == "edge":
            columns.append(Column("connects", share=1))
        columns.append(Column("description", share=2))
        rows = []
        for type_def in found.values():
            spec = type_def.spec
            row = [spec.name, str(type_def.version), type_def.scope or "global"]
            row.append(type_def.created_by)
            if kind == "edge":
                row.append(
                    f"{' | '.join(spec.source_types) or 'any'} -> "
                    f"{' | '.join(spec.target_types) or 'any'}"
                )
            row.append(spec.description)
            rows.append(row)
        table = table_lines(columns, rows, width)
        clipped = clipped or any(line.endswith("…") for line in table)
        if lines:
            lines.append("")
        lines.append(f"{plural(len(rows), kind + ' type')}:")
        lines += table
    if not lines:
        return ["no types yet; add some with: kgot types add FILE"]
    if clipped:
        lines += ["", "(cut to fit; `kgot types show NAME` prints a type whole, --json all)"]
    return lines


@types_app.command("show")
def types_show(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="Type name.")],
    entity: EntityScope = None,
    history: Annotated[
        bool, typer.Option("--history", help="Every version in this scope (JSON).")
    ] = False,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show a type: its meaning, upkeep settings and properties (the one the entity sees, or
    every version as JSON)."""
    with opened_store(ctx, db, entity=entity) as store:
        if history:
            versions = store.type_history(name, entity=entity)
            if not versions:
                raise UsageError(_no_type(name, entity))
            print_json(
                [
                    {**_type_json(t), "retired_at": _iso(retired), "retired_reason": reason}
                    for t, retired, reason in versions
                ]
            )
            return
        catalog = store.type_catalog(entity)
    found = catalog.node_types.get(name) or catalog.edge_types.get(name)
    if found is None:
        raise UsageError(_no_type(name, entity))
    if as_json:
        print_json(_type_json(found))
        return
    for label, value in _type_lines(found):
        _echo_field(label, value)


def _type_json(type_def: TypeDef) -> dict[str, Any]:
    """A type's JSON: its definition as a type file spells it, its version and origin, and
    ``evergreen`` (whether its facts never decay: ``half_life_days`` is null)."""
    data: dict[str, Any] = {}
    for key, value in type_def.to_dict().items():
        data[key] = value
        if key == "half_life_days":
            data["evergreen"] = type_def.upkeep.evergreen
    return data


def _type_lines(type_def: TypeDef) -> list[tuple[str, str]]:
    """``types show`` as label/value lines: what the type means, then how upkeep treats it."""
    spec = type_def.spec
    scope = (
        f"{spec.kind} type of entity {type_def.scope!r}"
        if type_def.scope
        else (f"global {spec.kind} type")
    )
    lines = [
        ("type", f"{spec.name} ({scope}, v{type_def.version}, by {type_def.created_by})"),
        ("description", " ".join(spec.description.split())),
    ]
    if spec.kind == "edge":
        sources = " | ".join(spec.source_types) or "any"
        lines.append(("connects", f"{sources} -> {' | '.join(spec.target_types) or 'any'}"))
    lines += _upkeep_lines(type_def)
    schema = spec.properties
    declared = schema.get("properties")
    names = list(declared) if isinstance(declared, dict) else []
    required = set(schema.get("required") or [])
    listed = ", ".join(f"{n}{' (required)' * (n in required)}" for n in names)
    lines.append(("properties", listed or "none declared"))
    if spec.example is not None:
        lines.append(("example", json.dumps(spec.example, ensure_ascii=False, default=str)))
    lines.append(("schema", f"kgot types show {spec.name}{_scope_flag(type_def)} --json"))
    return lines


def _upkeep_lines(type_def: TypeDef) -> list[tuple[str, str]]:
    """The upkeep settings (docs/persistence.md "Upkeep settings"), defaults spelled out."""
    upkeep = type_def.upkeep
    lines: list[tuple[str, str]] = []
    if type_def.kind == "node":
        lines.append(("identity", ", ".join(upkeep.identity) or "none"))
        lines.append(("functional", ", ".join(upkeep.functional) or "none"))
    else:
        lines.append(
            (
                "functional",
                "true (at most one current edge per source node)"
                if upkeep.functional_edge
                else "false",
            )
        )
    half_life = upkeep.half_life_days
    lines.append(
        (
            "half_life_days",
            "evergreen (never decays)"
            if half_life is None
            else f"{half_life:g} (freshness halves every {half_life:g} days)",
        )
    )
    ttl = upkeep.ttl_days
    lines.append(
        (
            "ttl_days",
            "none (never expires)"
            if ttl is None
            else f"{ttl:g} (a fact expires {ttl:g} days after it was written or reinforced)",
        )
    )
    lines.append(("rank_weight", f"{upkeep.rank_weight:g}"))
    return lines


def _scope_flag(type_def: TypeDef) -> str:
    return f" --entity {type_def.scope}" if type_def.scope else ""


def _echo_field(label: str, value: str) -> None:
    """One ``label  value`` line, the value wrapped to 80 columns under itself."""
    import textwrap

    indent = " " * 16
    text = textwrap.fill(
        printable(value),
        width=80,
        initial_indent=f"{label:<15} ",
        subsequent_indent=indent,
        break_long_words=False,
        break_on_hyphens=False,
    )
    typer.echo(text)


@types_app.command("add")
def types_add(
    ctx: typer.Context,
    file: Annotated[Path, typer.Argument(help="JSON or YAML file with one or more types.")],
    entity: EntityScope = None,
    shadow: Annotated[
        bool,
        typer.Option(
            "--shadow",
            help="With --entity: the entity's types may take the names of global types and "
            "replace them for this entity.",
        ),
    ] = False,
    db: DbOption = None,
) -> None:
    """Add types from a file (all or nothing), globally or to one entity."""
    if shadow and entity is None:
        raise UsageError("--shadow needs --entity NAME (only an entity's types shadow global ones)")
    # Global types may be the first thing a store holds; an entity's need the entity.
    with opened_store(ctx, db, create=entity is None, entity=entity) as store:
        added = store.load_types(file, entity=entity, shadow=shadow)
    _report(added, "added")


@types_app.command("update")
def types_update(
    ctx: typer.Context,
    file: Annotated[Path, typer.Argument(help="JSON or YAML file with the new definitions.")],
    entity: EntityScope = None,
    db: DbOption = None,
) -> None:
    """Store new versions of existing types (all or nothing); facts keep the version they were
    validated against until they change."""
    from kgot.persistence import load_type_file

    specs = load_type_file(file)
    with opened_store(ctx, db, entity=entity) as store:
        updated = store.update_types(specs, entity=entity)
    _report(updated, "updated")


@types_app.command("remove")
def types_remove(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="Type name.")],
    entity: EntityScope = None,
    db: DbOption = None,
) -> None:
    """Retire a type (its versions stay as history); refused while it is still in use."""
    with opened_store(ctx, db, entity=entity) as store:
        version = store.remove_type(name, entity=entity)
    scope = f"of entity {entity!r}" if entity else "(global)"
    typer.echo(f"removed type {name!r} {scope} (version {version} retired)")


def _report(types: list[TypeDef], verb: str) -> None:
    for type_def in types:
        scope = f"of entity {type_def.scope!r}" if type_def.scope else "(global)"
        typer.echo(f"{verb} {type_def.kind} type {type_def.name!r} {scope} v{type_def.version}")


def _no_type(name: str, entity: str | None) -> str:
    scope = f"entity {entity!r}" if entity else "the global scope"
    return f"no type {name!r} in {scope}; list types with `kgot types list`"


def _location(ctx: typer.Context, db: str | None) -> str:
    from kgot.persistence import parse_target

    return parse_target(settings_from(ctx, {"store.db": db}).store.db).display


def _iso(value: Any) -> str | None:
    from kgot.persistence import iso

    return iso(value)


# ---------------------------------------------------------------------------- graph --entity
# The `--entity` variants of `kgot graph export|import|stats` (registered in graph_cmd.py).


def export_entity(
    ctx: typer.Context,
    entity: str,
    file: Path,
    meta: bool,
    db: str | None,
    *,
    as_of: str | None = None,
) -> None:
    """Write an entity's graph to FILE (format by extension): the current one, or the one it
    had at the version or time ``as_of`` names."""
    from kgot.graph_backends import graph_format, write_graph
    from kgot.persistence import export_graph

    graph_format(file)  # an unusable target fails before the store is opened
    wanted = None if as_of is None else _version_or_time(as_of)
    with opened_store(ctx, db, entity=entity) as store:
        session = store.session(entity)
        version = None if wanted is None else _past_version(store, session, entity, wanted)
        graph = export_graph(session, include_meta=meta, as_of=version)
        version = graph.graph.get("kgot_version", 0)
    write_graph(graph, file)
    moment = f", as of {_iso(wanted)}" if isinstance(wanted, datetime) else ""
    typer.echo(
        f"wrote {file}: {plural(graph.number_of_nodes(), 'node')}, "
        f"{plural(graph.number_of_edges(), 'edge')} of entity {entity!r} (version {version}"
        f"{moment})",
        err=True,
    )


_AS_OF_FORMS = (
    "a version as `kgot entities show` lists them (5 or v5) or an ISO time "
    "(2024-05-01T12:00:00Z; no zone means UTC)"
)


def _version_or_time(text: str) -> int | datetime:
    """``--as-of``: a version number (``5``, ``v5``) or an aware datetime.

    Raises:
        UsageError: neither.
    """
    from kgot.persistence import as_utc

    plain = text.strip()
    digits = plain[1:] if plain[:1] in ("v", "V") else plain
    if digits.isascii() and digits.isdigit():
        return int(digits)
    try:
        moment = datetime.fromisoformat(plain[:-1] + "+00:00" if plain[-1:] in "Zz" else plain)
    except ValueError:
        raise UsageError(f"--as-of takes {_AS_OF_FORMS}, not {text!r}") from None
    return as_utc(moment)


def _past_version(store: Store, session: Any, entity: str, wanted: int | datetime) -> int:
    """The version ``wanted`` names in ``entity``'s history.

    Raises:
        UsageError: a version the entity never had, or a time before the entity existed.
    """
    if isinstance(wanted, int):
        if wanted > session.version:
            raise UsageError(
                f"entity {entity!r} has no version {wanted}: its versions run from 0 (empty) "
                f"to {session.version}; see `kgot entities show {entity}`"
            )
        return wanted
    created = store.get_entity(entity).created_at
    if created is not None and wanted < created:
        raise UsageError(
            f"entity {entity!r} did not exist yet at {_iso(wanted)}: it was created at "
            f"{_iso(created)}"
        )
    return int(session.version_at(wanted))


def import_entity(
    ctx: typer.Context,
    entity: str,
    file: Path,
    replace: bool,
    dry_run: bool,
    db: str | None,
    *,
    raw: bool = False,
) -> None:
    """Merge the graph in FILE into an entity (validated, one atomic commit), through the
    memory's write-time rules and the import's trust unless ``raw``."""
    from kgot.errors import ChangesetError
    from kgot.graph_backends import read_import_file
    from kgot.memory import import_with_rules
    from kgot.persistence import CommitConflictError, Provenance, import_graph

    trust = settings_from(ctx).memory.trust_for("import")
    provenance = Provenance(
        run_id="",
        step="import",
        source_ref=str(file.resolve()),
        source_kind=trust.source_kind,
        confidence=trust.confidence,
    )
    with opened_store(ctx, db, entity=entity) as store:
        graph = read_import_file(file, store.limits)  # size and counts before building it
        session = store.session(entity)
        try:
            if raw:
                result = import_graph(session, graph, provenance, replace=replace, dry_run=dry_run)
            else:
                outcome = import_with_rules(
                    session, graph, provenance, replace=replace, dry_run=dry_run
                )
        except CommitConflictError:
            raise UsageError(
                f"other writers kept changing facts of entity {entity!r} that {file} touches, "
                "so nothing was imported (the file is fine; run the import again when they "
                "are done)"
            ) from None
        except ChangesetError as rejected:
            raise UsageError(
                f"{file} does not fit entity {entity!r}, nothing was imported: {rejected} "
                f"(fix the file, or add the missing types with `kgot types add --entity "
                f"{entity} FILE`)"
            ) from None
    if raw:
        _report_raw_import(file, entity, result, dry_run)
        return
    queued = f"; {plural(outcome.queued, 'suggestion')} for review" if outcome.queued else ""
    landed = f"; {plural(len(outcome.notes), 'note')} of the rules" if outcome.notes else ""
    if dry_run:
        typer.echo(
            f"dry run: importing {file} into entity {entity!r} would apply: "
            f"{outcome.planned.summary()}{queued}{landed}"
        )
    elif (
        outcome.written is not None
        and outcome.written.version is not None
        and (outcome.written.version != outcome.version_before)
    ):
        typer.echo(
            f"imported {file} into entity {entity!r}: {outcome.planned.summary()} "
            f"(version {outcome.written.version}){queued}{landed}"
        )
    else:
        typer.echo(
            f"{file} holds nothing new for entity {entity!r} (version {outcome.version_before})"
            f"{queued}"
        )
    for note in outcome.notes:
        typer.echo(printable(f"  {note}"), err=True)


def _report_raw_import(file: Path, entity: str, result: Any, dry_run: bool) -> None:
    summary = result.changeset.summary()
    if dry_run:
        typer.echo(f"dry run: importing {file} into entity {entity!r} would apply: {summary}")
    elif result.changed:
        typer.echo(
            f"imported {file} into entity {entity!r}: {summary} (version {result.version_after})"
        )
    else:
        typer.echo(
            f"{file} holds nothing new for entity {entity!r} (version {result.version_after})"
        )


def entity_stats(ctx: typer.Context, entity: str, db: str | None) -> None:
    """Print an entity's node and edge counts per label and relationship as JSON."""
    with opened_store(ctx, db, entity=entity) as store:
        print_json(store.session(entity).stats().to_dict())
