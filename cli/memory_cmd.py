"""`kgot memory …`: upkeep of an entity's long-lived graph (issue 15; docs/memory.md).

Each command is a self-contained function on one entity (``--entity``, required); the store is
the one `kgot entities` uses (``--db`` / ``KGOT_DB`` / config).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any

import typer

from kgot.cli.common import print_json, printable, settings_from
from kgot.cli.layout import plural
from kgot.cli.store_cmd import DbOption, JsonOption, opened_store
from kgot.errors import UsageError

if TYPE_CHECKING:
    from kgot.persistence import Suggestion

app = typer.Typer(
    help="Upkeep of an entity's graph: resolve duplicates, review the curation queue.",
    no_args_is_help=True,
)

EntityOption = Annotated[
    str,
    typer.Option("--entity", "-e", help="The entity whose graph to work on.", show_default=False),
]
SuggestionArgument = Annotated[
    int, typer.Argument(help="The suggestion's id (see `kgot memory suggestions`).")
]

ReasonOption = Annotated[
    str | None,
    typer.Option(
        "--reason",
        help="Why (kept with the suggestion; `memory suggestions --status …` shows it).",
        show_default=False,
    ),
]


@app.command("resolve")
def resolve(
    ctx: typer.Context,
    entity: EntityOption,
    apply: Annotated[
        bool,
        typer.Option("--apply", help="Merge the duplicates and queue the suggestions."),
    ] = False,
    explain: Annotated[
        tuple[str, str] | None,
        typer.Option(
            "--explain",
            metavar="ID ID",
            help="Show why two nodes would be merged, suggested or kept apart: the names, the "
            "identities, and each shared field's comparison and weight. Writes nothing.",
        ),
    ] = None,
    adjudicate: Annotated[
        bool,
        typer.Option(
            "--adjudicate",
            help="Ask the configured model about the merge suggestions (best first): 'same' "
            "merges, 'different' rejects, 'unsure' leaves it for a person. With --apply it "
            "acts on the queue; without, it only reports the answers. Costs model calls.",
        ),
    ] = False,
    max_calls: Annotated[
        int, typer.Option("--max-calls", help="--adjudicate: the most model calls.")
    ] = 20,
    max_cost: Annotated[
        float | None,
        typer.Option(
            "--max-cost",
            metavar="USD",
            help="--adjudicate: stop once the calls cost this much (needs the model's price).",
            show_default=False,
        ),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(help="--adjudicate: `provider:name` of the model (default: configured)."),
    ] = None,
    base_url: Annotated[
        str | None, typer.Option(help="--adjudicate: OpenAI-compatible endpoint of the model.")
    ] = None,
    as_json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """Find nodes that are one real thing. Without --apply nothing is written."""
    from kgot.memory import open_memory

    if explain is not None and (apply or adjudicate):
        raise UsageError("--explain writes nothing; leave out --apply and --adjudicate")
    if not adjudicate and (model or base_url or max_cost is not None or max_calls != 20):
        raise UsageError("--max-calls, --max-cost, --model and --base-url go with --adjudicate")
    settings = settings_from(ctx, {"llm.model": model, "llm.base_url": base_url})
    report = None
    with opened_store(ctx, db, entity=entity) as store:
        memory = open_memory(store, entity, settings=settings.memory)
        if explain is not None:
            explained = memory.explain(*explain)
        else:
            result = memory.resolve(apply=apply)
            if adjudicate:
                report = _adjudicate(memory, result, settings, apply, max_calls, max_cost)
    if explain is not None:
        if as_json:
            print_json(explained.to_json())
        else:
            for line in explained.lines():
                typer.echo(printable(line))
        return
    data = result.to_json()
    if report is not None:
        data["adjudication"] = report.to_json()
    if as_json:
        print_json(data)
        return
    _print_resolution(data, report, apply=apply, entity=entity)


def _print_resolution(data: dict[str, Any], report: Any, *, apply: bool, entity: str) -> None:
    """``kgot memory resolve``'s lines: merges, suggestions, the model's verdicts."""
    verb = "merged" if apply else "would merge"
    for merge in data["merges"]:
        typer.echo(
            printable(
                f"{verb} {', '.join(merge['aliases'])} into {merge['canonical']} "
                f"({merge['type']}, score {merge['score']}: {merge['reason']})"
            )
        )
    for row in data["suggestions"]:
        queued = f"suggestion {row['id']}" if row["id"] is not None else "not queued"
        typer.echo(
            printable(
                f"maybe the same {row['type']}: {' and '.join(row['nodes'])} "
                f"(score {row['score']}; {queued})"
            )
        )
    if report is not None:
        for decision in report.decisions:
            typer.echo(
                printable(
                    f"the model says {decision.verdict}: {' and '.join(decision.nodes)} "
                    f"({decision.done}; {decision.reason})"
                )
            )
        cost = "unknown cost" if report.cost_usd is None else f"${report.cost_usd:.4f}"
        stopped = (
            f"; stopped at {report.stopped_by}, {report.left} not asked" if report.left else ""
        )
        typer.echo(f"adjudication: {plural(report.calls, 'model call')}, {cost}{stopped}")
    if not data["merges"] and not data["suggestions"] and report is None:
        typer.echo(f"no duplicates found in entity {entity!r}")
    elif not apply:
        typer.echo("nothing was changed; run with --apply to merge and queue suggestions")


def _adjudicate(
    memory: Any,
    result: Any,
    settings: Any,
    apply: bool,
    max_calls: int,
    max_cost: float | None,
) -> Any:
    """The model's verdicts on the merge suggestions: the queue's open ones (--apply, after
    filing this resolution's), or this dry run's."""
    from kgot.llm import LLMClient
    from kgot.memory import adjudicate_suggestions, pairs_of

    client = LLMClient.from_settings("execution", settings.llm.execution, llm=settings.llm)
    pairs = None if apply else pairs_of(result.suggestions, result.suggestion_ids)
    return adjudicate_suggestions(
        memory, client, pairs=pairs, apply=apply, max_calls=max_calls, max_cost_usd=max_cost
    )


@app.command("suggestions")
def suggestions(
    ctx: typer.Context,
    entity: EntityOption,
    status: Annotated[str, typer.Option("--status", help="open, accepted or rejected.")] = "open",
    as_json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """List the curation queue: merges and contradictions the rules would not decide."""
    from kgot.memory import open_memory

    with opened_store(ctx, db, entity=entity) as store:
        rows = open_memory(store, entity).suggestions(status)
    if as_json:
        print_json([row.to_dict() for row in rows])
        return
    if not rows:
        typer.echo(f"no {status} suggestions in entity {entity!r}")
        return
    for row in rows:
        typer.echo(printable(f"{row.id}  {row.kind}  {_describe(row)}{_decided(row)}"))


def _decided(row: Suggestion) -> str:
    """Who decided a decided suggestion and why, as the line's tail."""
    decision = row.decision or {}
    if row.status == "open" or not decision:
        return ""
    reason = decision.get("reason")
    return f"; {row.status} by {decision.get('by', 'unknown')}" + (f": {reason}" if reason else "")


def _describe(row: Suggestion) -> str:
    payload = row.payload
    score = row.score
    if row.kind == "merge":
        nodes = " and ".join(str(n) for n in payload.get("nodes", ()))
        return (
            f"{nodes} may be one {payload.get('type', 'node')} (score {score}; "
            f"{payload.get('reason', '')})"
        )
    if payload.get("fact") == "node":
        return (
            f"{payload.get('node')}.{payload.get('property')}: keep "
            f"{json.dumps(payload.get('old'))} (confidence {payload.get('old_confidence')}) or "
            f"take {json.dumps(payload.get('new'))} (confidence {payload.get('new_confidence')})"
        )
    old, new = payload.get("old") or {}, payload.get("new") or {}
    return (
        f"{payload.get('source')} -{payload.get('relationship')}->: keep {old.get('target')} "
        f"(confidence {payload.get('old_confidence')}) or take {new.get('target')} "
        f"(confidence {payload.get('new_confidence')})"
    )


@app.command("verify")
def verify(
    ctx: typer.Context,
    entity: EntityOption,
    text: Annotated[
        str | None,
        typer.Argument(
            help='A claim in words, e.g. "Apple\'s CEO is Tim Cook" (extracted by the model).',
            show_default=False,
        ),
    ] = None,
    subject: Annotated[
        str | None,
        typer.Option(
            "--subject", help="The node the claim is about: id or name.", show_default=False
        ),
    ] = None,
    prop: Annotated[
        str | None, typer.Option("--property", help="A property claim: the property.")
    ] = None,
    value: Annotated[
        str | None, typer.Option("--value", help="A property claim: the value claimed.")
    ] = None,
    relation: Annotated[
        str | None, typer.Option("--relation", help="A relation claim: the relationship.")
    ] = None,
    obj: Annotated[
        str | None, typer.Option("--object", help="A relation claim: the target's id or name.")
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(help="`provider:name` for the free-text extraction (default: configured)."),
    ] = None,
    base_url: Annotated[
        str | None, typer.Option(help="OpenAI-compatible endpoint for the extraction model.")
    ] = None,
    as_json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """Check a claim against the entity's graph: corroborated, contradicted, mixed or
    inconclusive. A structured claim needs no model; a sentence is extracted by the model."""
    from kgot.errors import UsageError
    from kgot.memory import Claim, verify_claim, verify_text

    structured = any(v is not None for v in (subject, prop, value, relation, obj))
    if text is not None and structured:
        raise UsageError(
            "give either a claim in words or --subject with --property/--value or "
            "--relation/--object, not both"
        )
    if text is None:
        if subject is None:
            raise UsageError(
                "give a claim: --subject S (--property P --value V | --relation R --object O), "
                'or a sentence such as "Apple\'s CEO is Tim Cook"'
            )
        # bad input: refused before the store is opened, in the flags' words
        claim = Claim.checked(subject, prop, value, relation, obj, spell="--{}".format)
    settings = settings_from(ctx, {"store.db": db, "llm.model": model, "llm.base_url": base_url})
    with opened_store(ctx, db, entity=entity) as store:
        session = store.session(entity)
        if text is None:
            verdict = verify_claim(
                session,
                claim.subject,
                property=claim.property,
                value=claim.value,
                relation=claim.relation,
                object=claim.object,
            )
        else:
            from kgot.llm import LLMClient

            client = LLMClient.from_settings("execution", settings.llm.execution, llm=settings.llm)
            verdict = verify_text(session, text, client)
    data = verdict.to_json()
    if as_json:
        print_json(data)
        return
    described = verdict.claim.describe() if verdict.claim is not None else "the text"
    facts = [f"supported by {', '.join(verdict.supporting)}"] if verdict.supporting else []
    if verdict.contradicting:
        facts.append(f"contradicted by {', '.join(verdict.contradicting)}")
    typer.echo(
        printable(
            f"{verdict.verdict} (confidence {verdict.confidence:g}): {described}"
            + (f"; {'; '.join(facts)}" if facts else "")
        )
    )
    for note in verdict.notes:
        typer.echo(printable(f"  {note}"))


@app.command("accept")
def accept(
    ctx: typer.Context,
    entity: EntityOption,
    suggestion: SuggestionArgument,
    reason: ReasonOption = None,
    db: DbOption = None,
) -> None:
    """Carry out a suggestion: merge the nodes, or let the newer value supersede."""
    from kgot.memory import open_memory

    with opened_store(ctx, db, entity=entity) as store:
        done = open_memory(store, entity).accept(suggestion, decision=_by_person(reason))
    typer.echo(printable(done))


@app.command("reject")
def reject(
    ctx: typer.Context,
    entity: EntityOption,
    suggestion: SuggestionArgument,
    reason: ReasonOption = None,
    db: DbOption = None,
) -> None:
    """Close a suggestion without changing the graph."""
    from kgot.memory import open_memory

    with opened_store(ctx, db, entity=entity) as store:
        done = open_memory(store, entity).reject(suggestion, decision=_by_person(reason))
    typer.echo(printable(done))


def _by_person(reason: str | None) -> dict[str, str]:
    return {"by": "person", **({"reason": reason} if reason else {})}


@app.command("upkeep")
def upkeep(
    ctx: typer.Context,
    entity: EntityOption,
    now: Annotated[
        str | None,
        typer.Option(
            "--now",
            help="The moment to judge ages at (ISO 8601, e.g. 2026-03-01T12:00:00Z); "
            "default: the current time.",
            show_default=False,
        ),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Report what would change; write nothing.")
    ] = False,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose",
            "-v",
            help="List each fact or node the pass expired, pruned, promoted or merged (or "
            "left, or skipped) with its reason; with --json, as a changes list.",
        ),
    ] = False,
    as_json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """Expire facts past their time to live, prune faded ones, promote well-corroborated ones,
    merge duplicates; print how many of each (-v: each fact and why). Nothing is deleted:
    closed facts stay in history."""
    from kgot.memory import open_memory, parse_now

    moment = parse_now(now) if now is not None else None  # a bad --now: before any write
    with opened_store(ctx, db, entity=entity) as store:
        report = open_memory(store, entity).upkeep(now=moment, dry_run=dry_run)
    if as_json:
        print_json(report.to_json(changes=verbose))
        return
    if dry_run:
        typer.echo("dry run: nothing was written")
    for line in report.counter_lines():
        typer.echo(line)
    if not verbose:
        if report.changes:
            count = len(report.changes)
            typer.echo(f"run with -v to list the {count} change{'s' * (count != 1)} and why")
        return
    from kgot.cli.memory_views import wrapped

    for change in report.changes:
        for line in wrapped(change.line(), indent="  ", hanging="      "):
            typer.echo(printable(line))


@app.command("search")
def search(
    ctx: typer.Context,
    entity: EntityOption,
    query: Annotated[
        str, typer.Argument(help="Words to look for (names, aliases, titles, descriptions).")
    ],
    limit: Annotated[int, typer.Option("--limit", "-n", help="At most this many hits.")] = 10,
    fact_type: Annotated[
        str | None,
        typer.Option("--type", help="Only facts of this node label or relationship."),
    ] = None,
    min_confidence: Annotated[
        float | None,
        typer.Option("--min-confidence", help="Only facts at least this confident (0 to 1)."),
    ] = None,
    now: Annotated[
        str | None,
        typer.Option(
            "--now",
            help="The moment freshness is computed at (ISO 8601); default: the current time.",
            show_default=False,
        ),
    ] = None,
    as_json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """Search the entity's current facts (nodes and edges), best first: 0.6 relevance,
    0.15 type rank weight, 0.15 confidence, 0.10 freshness. Under each hit: the properties
    and edges the query matched (ceo: Tim Cook, -[ceo]-> Tim Cook) and its key properties.
    Searching writes nothing."""
    from kgot.errors import UsageError
    from kgot.memory import open_memory, parse_now

    if limit < 1:
        raise UsageError(f"--limit must be at least 1, not {limit}")
    if min_confidence is not None and not 0.0 <= min_confidence <= 1.0:
        raise UsageError(f"--min-confidence must be between 0 and 1, not {min_confidence:g}")
    moment = parse_now(now) if now is not None else None
    with opened_store(ctx, db, entity=entity) as store:
        hits = open_memory(store, entity, settings=settings_from(ctx).memory).search(
            query, limit=limit, type=fact_type, min_confidence=min_confidence, now=moment
        )
    if as_json:
        print_json([hit.to_dict() for hit in hits])
        return
    if not hits:
        typer.echo(f"nothing in entity {entity!r} matches {query!r}")
        return
    from kgot.cli.memory_views import hit_lines

    for hit in hits:
        for line in hit_lines(hit):
            typer.echo(line)


@app.command("embed")
def embed(
    ctx: typer.Context,
    entity: EntityOption,
    as_json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """Embed the entity's nodes whose vector is missing or stale (after turning embeddings on,
    or an outage of the endpoint). Needs [memory] embeddings or embeddings_base_url."""
    from kgot.errors import KgotError, ModelError, UsageError
    from kgot.memory import open_memory

    settings = settings_from(ctx).memory
    with opened_store(ctx, db, entity=entity) as store:
        memory = open_memory(store, entity, settings=settings)
        if memory.embedder is None:
            raise UsageError(
                'embeddings are off: set [memory] embeddings = "provider:model" or '
                "[memory] embeddings_base_url in the config file (see docs/memory.md)"
            )
        try:
            report = memory.embed()
        except KgotError:
            raise
        except Exception as error:  # the endpoint: vectors stored before it stay
            first = str(error).strip().splitlines()[0] if str(error).strip() else repr(error)
            raise ModelError(
                f"the embedding model {memory.embedder.model!r} failed: {first} (vectors made "
                "before it are kept; run the command again)"
            ) from None
    data = {"embedded": report.embedded, "unchanged": report.unchanged}
    if as_json:
        print_json(data)
        return
    typer.echo(
        f"embedded {report.embedded} node(s) of entity {entity!r} with "
        f"{memory.embedder.model!r}; {report.unchanged} already current"
    )


@app.command("feedback")
def feedback(
    ctx: typer.Context,
    entity: EntityOption,
    fact: Annotated[
        list[str],
        typer.Argument(
            help="The fact: a node id, an edge as `kgot memory search` shows it "
            "('SOURCE -[KEY]-> TARGET'), or an edge as three words SOURCE RELATIONSHIP TARGET.",
            show_default=False,
        ),
    ],
    good: Annotated[bool, typer.Option("--good", help="The fact was right and useful.")] = False,
    bad: Annotated[bool, typer.Option("--bad", help="The fact was wrong or useless.")] = False,
    db: DbOption = None,
) -> None:
    """Say whether a fact was good: --good adds 0.20 to its strength (capped at 1), which keeps
    it fresh in ranking; --bad is counted. No fact version is written."""
    from kgot.errors import UsageError
    from kgot.memory import find_edge, open_memory

    if good == bad:
        raise UsageError("give exactly one of --good or --bad")
    if len(fact) not in (1, 3):
        raise UsageError(
            "give the fact as one id (a node id, or 'SOURCE -[KEY]-> TARGET') or as three "
            f"words SOURCE RELATIONSHIP TARGET; got {len(fact)} words"
        )
    with opened_store(ctx, db, entity=entity) as store:
        memory = open_memory(store, entity)
        key = find_edge(memory.session, *fact) if len(fact) == 3 else fact[0]
        use = memory.feedback(key, good)
    shown = fact[0] if len(fact) == 1 else " ".join(fact)
    typer.echo(
        printable(
            f"{'good' if good else 'bad'} feedback on {shown}: strength {use.strength:.2f} "
            f"({use.good} good, {use.bad} bad)"
        )
    )


@app.command("forget")
def forget(
    ctx: typer.Context,
    entity: EntityOption,
    fact: Annotated[
        list[str],
        typer.Argument(
            help="The fact: a node id (its edges go with it), an edge as `kgot memory search "
            "--json` shows it ('SOURCE -[KEY]-> TARGET'), or an edge as three words SOURCE "
            "RELATIONSHIP TARGET.",
            show_default=False,
        ),
    ],
    prop: Annotated[
        str | None,
        typer.Option(
            "--property",
            "-p",
            help="Forget only this property of the node (e.g. ceo); the node stays.",
            show_default=False,
        ),
    ] = None,
    as_json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """Forget a fact: retire a node (with its edges), one property of a node, or an edge.
    Nothing is deleted: the fact closes as 'forgotten', history keeps it, and search, reads
    and runs no longer see it."""
    from kgot.errors import UsageError
    from kgot.memory import open_memory

    if len(fact) not in (1, 3):
        raise UsageError(
            "give the fact as one id (a node id, or 'SOURCE -[KEY]-> TARGET') or as three "
            f"words SOURCE RELATIONSHIP TARGET; got {len(fact)} words"
        )
    with opened_store(ctx, db, entity=entity) as store:
        done = open_memory(store, entity).forget(fact[0] if len(fact) == 1 else fact, property=prop)
    if as_json:
        print_json(done.to_json())
        return
    typer.echo(printable(done.line()))
