"""A labelled set of node pairs for entity resolution, and its scoring.

Each pair says what the rules should do with two nodes:

* ``merge`` — the same real thing, and the evidence is strong enough to merge unasked;
* ``suggest`` — the same (or very likely the same) thing, but the names alone do not prove it
  (acronyms, initials, a name inside a longer one): the rules must *not* merge; a suggestion
  is welcome and counted separately;
* ``distinct`` — different things: never merged (a suggestion is tolerated, a person rejects it).

Precision is over the pairs the rules merge (correct when labelled ``merge``), recall over the
pairs labelled ``merge``. Each pair is resolved on its own (:func:`kgot.memory.resolve_all`
over its two nodes), so the blocking that picks candidates is exercised too. Imported by the
tests (tests/memory/) and by ``python -m kgot.benchmarks.perf_memory``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from kgot.graph_model import Node
from kgot.memory.resolution import resolve_all

__all__ = [
    "IDENTITY_BY_TYPE",
    "PAIRS",
    "EvaluationReport",
    "LabelledPair",
    "evaluate",
    "synthetic_nodes",
]

Expect = Literal["merge", "suggest", "distinct"]

# Identity properties of the types the set uses (as a store's type settings would give them).
IDENTITY_BY_TYPE: Mapping[str, tuple[str, ...]] = {"Asset": ("symbol",)}


@dataclass(frozen=True)
class LabelledPair:
    a: Node
    b: Node
    expect: Expect
    note: str


# (type of a, a, type of b, b, expect, note); a node is a name, or a dict of its properties.
NodeSpec = str | Mapping[str, Any]
_O = "Organization"
_P = "Person"

_ROWS: list[tuple[str, NodeSpec, str, NodeSpec, Expect, str]] = [
    # Legal forms and punctuation
    (_O, "Apple Inc.", _O, "Apple, Inc.", "merge", "suffix"),
    (_O, "Apple Inc.", _O, "apple incorporated", "merge", "suffix"),
    (_O, "Apple, Inc.", _O, "apple incorporated", "merge", "suffix"),
    (_O, "Microsoft Corporation", _O, "Microsoft Corp.", "merge", "suffix"),
    (_O, "Alphabet Inc.", _O, "Alphabet", "merge", "suffix"),
    (_O, "The Coca-Cola Company", _O, "Coca-Cola", "merge", "the, company"),
    (_O, "Coca Cola", _O, "CocaCola", "merge", "spacing"),
    (_O, "Nestlé S.A.", _O, "Nestle SA", "merge", "accent, dotted form"),
    (_O, "Siemens AG", _O, "Siemens", "merge", "suffix"),
    (_O, "Volkswagen Aktiengesellschaft", _O, "Volkswagen AG", "merge", "suffix"),
    (_O, "Toyota Motor Corporation", _O, "Toyota Motor Corp", "merge", "suffix"),
    (_O, "HSBC Holdings plc", _O, "HSBC Holdings PLC", "merge", "suffix case"),
    (_O, "Unilever PLC", _O, "Unilever", "merge", "suffix"),
    (_O, "BP p.l.c.", _O, "BP plc", "merge", "dotted plc"),
    (_O, "The Goldman Sachs Group, Inc.", _O, "Goldman Sachs Group", "merge", "the, suffix"),
    (_O, "Goldman Sachs & Co.", _O, "Goldman Sachs", "merge", "& Co."),
    (_O, "Procter & Gamble Co.", _O, "Procter and Gamble", "merge", "ampersand"),
    (_O, "Johnson & Johnson", _O, "Johnson and Johnson", "merge", "ampersand"),
    (_O, "AT&T Inc.", _O, "AT and T", "merge", "ampersand"),
    (_O, "McDonald's Corporation", _O, "McDonalds", "merge", "apostrophe"),
    (_O, "Nokia Oyj", _O, "Nokia", "merge", "suffix"),
    (_O, "Ericsson AB", _O, "Ericsson", "merge", "suffix"),
    (_O, "Equinor ASA", _O, "Equinor", "merge", "suffix"),
    (_O, "Airbus SE", _O, "Airbus", "merge", "suffix"),
    (_O, "ING Groep N.V.", _O, "ING Groep NV", "merge", "dotted form"),
    (_O, "Heineken N.V.", _O, "Heineken", "merge", "suffix"),
    (_O, "Ferrari S.p.A.", _O, "Ferrari SpA", "merge", "dotted form"),
    (_O, "BHP Group Limited", _O, "BHP Group Ltd", "merge", "suffix"),
    (
        _O,
        "Commonwealth Bank of Australia Pty Ltd",
        _O,
        "Commonwealth Bank of Australia",
        "merge",
        "two suffixes",
    ),
    (_O, "Berkshire Hathaway Inc.", _O, "Berkshire Hathaway", "merge", "suffix"),
    (_O, "Exxon Mobil Corporation", _O, "ExxonMobil", "merge", "spacing, suffix"),
    (_O, "J.P. Morgan Chase & Co.", _O, "JPMorgan Chase", "merge", "dotted initials"),
    (_O, "Meta Platforms, Inc.", _O, "Meta Platforms", "merge", "suffix"),
    (_O, "Walt Disney Co", _O, "The Walt Disney Company", "merge", "the, company"),
    (_O, "Robert Bosch GmbH", _O, "Robert Bosch", "merge", "suffix"),
    (_O, "Blackstone L.P.", _O, "Blackstone LP", "merge", "dotted form"),
    (_O, "KPMG LLP", _O, "KPMG", "merge", "suffix"),
    (_O, "Samsung Electronics Co., Ltd.", _O, "Samsung Electronics", "merge", "two suffixes"),
    (
        _O,
        "Banco Bilbao Vizcaya Argentaria, S.A.",
        _O,
        "Banco Bilbao Vizcaya Argentaria",
        "merge",
        "suffix",
    ),
    (_O, "Alibaba Group Holding Limited", _O, "Alibaba Group Holding", "merge", "suffix"),
    (_O, "Tencent Holdings Ltd.", _O, "Tencent Holdings", "merge", "suffix"),
    (_O, "3M", _O, "3M Company", "merge", "number kept, suffix"),
    (_O, "7-Eleven", _O, "7 Eleven Inc", "merge", "hyphen"),
    (_O, "I.B.M.", _O, "IBM", "merge", "dotted acronym"),
    # Unicode forms
    (_O, "ＡＰＰＬＥ ＩＮＣ．", _O, "Apple Inc.", "merge", "full-width"),
    (_O, "Ｔｏｙｏｔａ", _O, "Toyota", "merge", "full-width"),
    (_O, "ＩＢＭ", _O, "IBM", "merge", "full-width"),
    (_O, "Ｓｏｎｙ\u3000Ｇｒｏｕｐ", _O, "Sony Group", "merge", "ideographic space"),
    (_O, "Société Générale", _O, "Societe Generale", "merge", "accents"),
    (_O, "L’Oréal", _O, "L'Oreal", "merge", "typographic apostrophe"),
    (_O, "Apple\u200bInc", _O, "Apple", "merge", "zero-width space"),
    (_O, "Газпром", _O, "ГАЗПРОМ", "merge", "Cyrillic case"),
    (_O, "Apple   Inc", _O, "Apple Inc", "merge", "spaces"),
    ("Place", "São Paulo", "Place", "Sao Paulo", "merge", "accent"),
    ("Place", "Zürich", "Place", "Zurich", "merge", "accent"),
    (_O, "トヨタ自動車", _O, "トヨタ自動車株式会社", "suggest", "kabushiki kaisha glued on"),
    (_O, "Sony", _O, "ソニー", "suggest", "another script"),
    # Misspellings
    (_O, "Goldman Sachs", _O, "Goldmann Sachs", "merge", "typo"),
    (_O, "Morgan Stanley", _O, "Morgan Stanly", "merge", "typo"),
    (_O, "Berkshire Hathaway", _O, "Berkshire Hathway", "merge", "typo"),
    (_O, "Deutsche Telekom", _O, "Deutsche Telecom", "merge", "spelling variant"),
    (_O, "Procter & Gamble", _O, "Proctor & Gamble", "merge", "typo"),
    (_O, "Microsoft", _O, "Microsft", "suggest", "one-word typo: suggest only"),
    (_O, "Nvidia", _O, "Nvidea", "suggest", "one-word typo: suggest only"),
    # Aliases
    (
        _O,
        {"name": "International Business Machines", "aliases": ["IBM"]},
        _O,
        "IBM",
        "merge",
        "alias",
    ),
    (_O, {"name": "Alphabet", "aliases": ["Google"]}, _O, "Google LLC", "merge", "alias"),
    (
        _O,
        {"name": "Meta Platforms", "aliases": ["Facebook"]},
        _O,
        "Facebook, Inc.",
        "merge",
        "alias",
    ),
    (_O, {"name": "Toyota Motor", "aliases": "Toyota"}, _O, "TOYOTA", "merge", "alias string"),
    # Acronyms: at most a suggestion without an alias
    (_O, "IBM", _O, "International Business Machines", "suggest", "acronym"),
    (_O, "BMW", _O, "Bayerische Motoren Werke AG", "suggest", "acronym"),
    (_O, "GE", _O, "General Electric", "suggest", "acronym"),
    (_O, "NASA", _O, "National Aeronautics and Space Administration", "suggest", "acronym"),
    (_O, "AMD", _O, "Advanced Micro Devices, Inc.", "suggest", "acronym"),
    (_O, "BBVA", _O, "Banco Bilbao Vizcaya Argentaria", "suggest", "acronym"),
    (_O, "IBM", _O, "Intl Bus Mach", "distinct", "abbreviations are not enough"),
    # Look-alikes
    (_O, "Meta", _O, "Meta Financial Group", "distinct", "one-word name inside a longer one"),
    (_O, "Alphabet", _O, "Alphabet Holdings", "distinct", "holding company"),
    (_O, "Delta Air Lines", _O, "Delta Dental", "distinct", "shared first word"),
    (_O, "American Airlines", _O, "American Express", "distinct", "shared first word"),
    (_O, "Bank of China", _O, "Bank of Chile", "distinct", "one word off"),
    (_O, "Deutsche Bank", _O, "Deutsche Bahn", "distinct", "one word off"),
    (_O, "Apple Inc.", _O, "Apple Hospitality REIT", "distinct", "longer name"),
    (_O, "Apple", _O, "Applied Materials", "distinct", "prefix"),
    (_O, "Ford Motor Company", _O, "Ford Foundation", "distinct", "shared first word"),
    (_O, "General Motors", _O, "General Mills", "distinct", "one word off"),
    (_O, "Samsung Electronics", _O, "Samsung SDI", "distinct", "sibling company"),
    (_O, "Sony Group", _O, "Sony Music Group", "distinct", "subsidiary"),
    (_O, "HSBC", _O, "HSBC Holdings", "suggest", "holding company of the same name"),
    (_O, "Morgan Stanley", _O, "J.P. Morgan", "distinct", "shared word"),
    (_O, "Goldman Sachs", _O, "Goldman Sachs Asset Management", "distinct", "division"),
    (_O, "Citigroup", _O, "Citibank", "distinct", "sibling"),
    (_O, "Amazon", _O, "Amazon Web Services", "distinct", "division"),
    (_O, "Toyota Motor", _O, "Toyota Industries", "distinct", "sibling"),
    (_O, "ING Group", _O, "ING Bank", "distinct", "group vs bank"),
    (_O, "Nike", _O, "Nikon", "distinct", "short look-alike"),
    (_O, "Visa", _O, "Vista", "distinct", "short look-alike"),
    (_O, "Intel", _O, "Intuit", "distinct", "short look-alike"),
    (_O, "Oracle", _O, "Orange", "distinct", "short look-alike"),
    (_O, "Banco Santander", _O, "Banco Sabadell", "distinct", "shared first word"),
    (_O, "Credit Suisse", _O, "Credit Agricole", "distinct", "shared first word"),
    (_O, "Capital One", _O, "Capital Group", "distinct", "shared first word"),
    (_O, "First Republic Bank", _O, "First Citizens Bank", "distinct", "two shared words"),
    (_O, "Kraft Foods", _O, "Kraft Heinz", "distinct", "successor company"),
    (_O, "Royal Bank of Canada", _O, "Royal Bank of Scotland", "distinct", "one word off"),
    (_O, "Toyota Motor Corp", _O, "Toyota Motor Credit Corp", "distinct", "finance arm"),
    (_O, "BlackRock", _O, "Blackstone", "distinct", "shared prefix"),
    (_O, "Tencent", _O, "Tencent Holdings", "suggest", "holding company of the same name"),
    (_O, "Toyota", _O, "TOYOTA MOTOR CORPORATION", "suggest", "short name"),
    (_O, "Twenty-First Century Fox", _O, "21st Century Fox", "suggest", "number spelled out"),
    (_O, "Alphabet Inc. Class A", _O, "Alphabet Inc. Class C", "distinct", "share classes"),
    (_O, "Series A Investors", _O, "Series B Investors", "distinct", "one letter off"),
    # Share classes and identity (Asset: identity = symbol)
    (
        "Asset",
        {"name": "Alphabet Inc.", "symbol": "GOOGL"},
        "Asset",
        {"name": "Alphabet Inc.", "symbol": "GOOG"},
        "distinct",
        "share classes, same name",
    ),
    (
        "Asset",
        {"name": "Berkshire Hathaway", "symbol": "BRK.A"},
        "Asset",
        {"name": "Berkshire Hathaway", "symbol": "BRK.B"},
        "distinct",
        "share classes",
    ),
    (
        "Asset",
        {"name": "Fox Corp Class A", "symbol": "FOXA"},
        "Asset",
        {"name": "Fox Corp Class B", "symbol": "FOX"},
        "distinct",
        "share classes",
    ),
    (
        "Asset",
        {"name": "Apple Inc.", "symbol": "AAPL"},
        "Asset",
        {"name": "Apple", "symbol": "AAPL"},
        "merge",
        "same symbol",
    ),
    (
        "Asset",
        {"name": "Alphabet Class A", "symbol": "GOOGL"},
        "Asset",
        {"name": "Alphabet Inc.", "symbol": "googl"},
        "merge",
        "same symbol, other case",
    ),
    (
        "Asset",
        {"name": "Facebook", "symbol": "META"},
        "Asset",
        {"name": "Meta Platforms", "symbol": "META"},
        "merge",
        "same symbol, other names",
    ),
    (
        "Asset",
        {"name": "Apple", "symbol": "AAPL"},
        "Asset",
        {"name": "Apple"},
        "merge",
        "one symbol missing: names decide",
    ),
    (
        "Asset",
        {"name": "Meta", "symbol": "META"},
        "Asset",
        {"name": "Meta Financial Group", "symbol": "CASH"},
        "distinct",
        "different symbols",
    ),
    (
        "Asset",
        {"name": "Shell plc", "symbol": "SHEL"},
        "Asset",
        {"name": "Shell", "symbol": "RDS.A"},
        "distinct",
        "different symbols win over names",
    ),
    # Same name, different types: never compared
    (_O, "Apple", "Product", "Apple", "distinct", "types differ"),
    (_P, "Jordan", "Place", "Jordan", "distinct", "types differ"),
    (_O, "Amazon", "Place", "Amazon", "distinct", "types differ"),
    (_P, "Washington", "Place", "Washington", "distinct", "types differ"),
    ("Product", "Mercury", "Concept", "Mercury", "distinct", "types differ"),
    (_O, "Tesla", _P, "Tesla", "distinct", "types differ"),
    # People
    (_P, "Tim Cook", _P, "Cook, Tim", "merge", "surname first"),
    (_P, "J.R.R. Tolkien", _P, "J. R. R. Tolkien", "merge", "dotted initials"),
    (_P, "JRR Tolkien", _P, "J.R.R. Tolkien", "merge", "initials run together"),
    (_P, "John Ronald Reuel Tolkien", _P, "J. R. R. Tolkien", "suggest", "initials"),
    (_P, "J. Smith", _P, "John Smith", "suggest", "initial"),
    (_P, "John Smith", _P, "Jane Smith", "distinct", "first names differ"),
    (_P, "Satya Nadella", _P, "Satya Nadela", "merge", "typo"),
    (_P, "Warren Buffett", _P, "Warren Buffet", "merge", "typo"),
    (_P, "Mark Zuckerberg", _P, "Mark Zuckerburg", "merge", "typo"),
    (_P, "José Martínez", _P, "Jose Martinez", "merge", "accents"),
    (_P, "Müller, Thomas", _P, "Thomas Müller", "merge", "surname first"),
    (_P, "Mary-Jane Watson", _P, "Mary Jane Watson", "merge", "hyphen"),
    (_P, "Sean O'Brien", _P, "Sean OBrien", "merge", "apostrophe"),
    (_P, "Sam Altman", _P, "Sam Altmann", "merge", "typo"),
    (_P, "Jensen Huang", _P, "Jenson Huang", "suggest", "typo, or another first name"),
    (_P, "Timothy D. Cook", _P, "Tim Cook", "suggest", "nickname and initial"),
    (_P, "Jamie Dimon", _P, "James Dimon", "suggest", "nickname"),
    (_P, "Bill Gates", _P, "William Gates", "suggest", "nickname"),
    (_P, "George Bush", _P, "George W. Bush", "distinct", "father or son"),
    (_P, "George H. W. Bush", _P, "George W. Bush", "distinct", "father and son"),
    (_P, "Bill Gates", _P, "Bill Gross", "distinct", "surnames differ"),
    (_P, "Michael Jordan", _P, "Michael B. Jordan", "distinct", "middle initial"),
    (_P, "Anna Smith", _P, "Anne Smith", "distinct", "first names differ"),
    (_P, "Tim Cook", _P, "Tom Cook", "distinct", "short first names"),
    (_P, "Ann Lee", _P, "Anne Lee", "distinct", "short first names"),
    (_P, "Ken Griffin", _P, "Ken Griffith", "distinct", "surnames differ"),
    (_P, "Elon Musk", _P, "Elon R. Musk", "suggest", "middle initial"),
    # Harder cases, labelled by the truth rather than by what the rules do
    (_O, "Amazon.com, Inc.", _O, "Amazon", "merge", "domain in the legal name"),
    (_O, "PepsiCo, Inc.", _O, "Pepsi Co", "merge", "legal form written into the name"),
    (_O, "Wal-Mart Stores, Inc.", _O, "Walmart", "suggest", "old name"),
    (_O, "Walmart Inc.", _O, "Wal-Mart", "merge", "hyphen"),
    (_O, "The Home Depot, Inc.", _O, "Home Depot", "merge", "the, suffix"),
    (_O, "Charles Schwab Corporation", _O, "Charles Schwab & Co., Inc.", "merge", "suffixes"),
    (_O, "LVMH Moët Hennessy Louis Vuitton SE", _O, "LVMH", "suggest", "acronym inside"),
    (_O, "Hewlett-Packard", _O, "Hewlett Packard Enterprise", "distinct", "split company"),
    (_O, "HP Inc.", _O, "Hewlett-Packard", "suggest", "acronym"),
    (_O, "Royal Dutch Shell", _O, "Shell", "suggest", "short name"),
    (_O, "UnitedHealth Group", _O, "United Health Group", "merge", "spacing"),
    (_O, "Bristol-Myers Squibb", _O, "Bristol Myers Squibb Company", "merge", "hyphen, suffix"),
    (_O, "Eli Lilly and Company", _O, "Eli Lilly & Co.", "merge", "and company"),
    (_O, "Abbott Laboratories", _O, "AbbVie", "distinct", "spin-off"),
    (_O, "Moody's", _O, "Moody's Corporation", "merge", "suffix"),
    (
        _O,
        "Mitsubishi UFJ Financial Group",
        _O,
        "Mitsubishi Corporation",
        "distinct",
        "keiretsu siblings",
    ),
    (_O, "Deutsche Börse", _O, "Deutsche Boerse", "merge", "umlaut transliterated"),
    (_O, "Nestle", _O, "Nestlé Purina", "distinct", "subsidiary"),
    (_O, "Alphabet Inc.", _O, "Google", "suggest", "parent, no alias"),
    (_O, "Facebook", _O, "Meta Platforms", "suggest", "renamed, no alias"),
    (_P, "Mohammed bin Salman", _P, "Mohammad bin Salman", "merge", "transliteration"),
    (_P, "Xi Jinping", _P, "Jinping Xi", "merge", "name order"),
    (_P, "Christine Lagarde", _P, "Christine Lagard", "merge", "typo"),
    (_P, "Janet Yellen", _P, "Janet L. Yellen", "suggest", "middle initial"),
    (_P, "Jerome Powell", _P, "Jay Powell", "suggest", "nickname"),
    (_P, "Alexander Hamilton", _P, "Alexandra Hamilton", "distinct", "gendered first name"),
    (_P, "Daniel Craig", _P, "Danielle Craig", "distinct", "gendered first name"),
    (_P, "Paul Allen", _P, "Paula Allen", "distinct", "gendered first name"),
    (_P, "Sara Lee", _P, "Sarah Lee", "distinct", "another first name"),
    (_P, "Louis Martin", _P, "Louise Martin", "distinct", "gendered first name"),
    (_P, "Steven Cohen", _P, "Stephen Cohen", "distinct", "another first name"),
    # Products, places, events, documents, concepts
    ("Event", "Apollo 11", "Event", "Apollo 13", "distinct", "numbers differ"),
    ("Event", "World War II", "Event", "World War 2", "suggest", "roman numeral"),
    ("Product", "iPhone 15", "Product", "iPhone 15 Pro", "distinct", "model variant"),
    ("Product", "iPhone SE", "Product", "iPhone", "distinct", "SE is a model, not a suffix"),
    ("Product", "Model S", "Product", "Model X", "distinct", "one letter off"),
    ("Product", "Galaxy S24", "Product", "Galaxy S23", "distinct", "numbers differ"),
    ("Product", "PlayStation 5", "Product", "Playstation 5", "merge", "case"),
    ("Product", "S&P 500", "Product", "S and P 500", "merge", "ampersand"),
    ("Product", "S&P 400", "Product", "S&P 500", "distinct", "numbers differ"),
    (
        "Product",
        "Vanguard 500 Index Fund",
        "Product",
        "Vanguard 500 Index Fund Admiral Shares",
        "distinct",
        "share class of a fund",
    ),
    ("Place", "New York City", "Place", "New York", "distinct", "city vs state"),
    ("Place", "München", "Place", "Munich", "suggest", "exonym"),
    ("Concept", "machine learning", "Concept", "Machine-Learning", "merge", "hyphen, case"),
    ("Concept", "photosynthesis", "Concept", "Photosynthesis.", "merge", "punctuation"),
    ("Document", "Annual Report 2023", "Document", "Annual Report 2024", "distinct", "years"),
    ("Document", "10-K 2023", "Document", "10-K 2022", "distinct", "years"),
]


def _node(node_id: str, label: str, spec: NodeSpec) -> Node:
    properties = {"name": spec} if isinstance(spec, str) else dict(spec)
    return Node(node_id, label, properties)


PAIRS: tuple[LabelledPair, ...] = tuple(
    LabelledPair(_node(f"p{n}a", type_a, a), _node(f"p{n}b", type_b, b), expect, note)
    for n, (type_a, a, type_b, b, expect, note) in enumerate(_ROWS)
)


@dataclass(frozen=True)
class EvaluationReport:
    precision: float
    recall: float
    suggestion_coverage: float  # share of `suggest` pairs the rules did suggest
    merged: int
    labelled_merge: int
    wrong: tuple[str, ...] = field(default=())  # one line per pair the rules got wrong
    pairs: int = 0

    def summary(self) -> str:
        return (
            f"{self.pairs} labelled pairs: precision {self.precision:.3f}, recall "
            f"{self.recall:.3f}, suggestions for {self.suggestion_coverage:.0%} of the "
            f"'suggest' pairs"
        )


def evaluate(
    pairs: Iterable[LabelledPair] = PAIRS,
    identity_by_type: Mapping[str, Sequence[str]] = IDENTITY_BY_TYPE,
    **options: Any,
) -> EvaluationReport:
    """Resolve each pair alone and score the outcome (``options`` go to ``resolve``)."""
    merged = correct = labelled_merge = found = suggest_total = suggested = 0
    wrong: list[str] = []
    pair_list = list(pairs)
    for pair in pair_list:
        result = resolve_all([pair.a, pair.b], identity_by_type, **options)
        did_merge = bool(result.merges)
        did_suggest = bool(result.suggestions)
        label = f"{pair.a.properties.get('name')!r} / {pair.b.properties.get('name')!r}"
        if pair.expect == "merge":
            labelled_merge += 1
            found += did_merge
            if not did_merge:
                wrong.append(f"missed merge: {label} ({pair.note})")
        if did_merge:
            merged += 1
            correct += pair.expect == "merge"
            if pair.expect != "merge":
                wrong.append(f"wrong merge: {label} ({pair.note})")
        if pair.expect == "suggest":
            suggest_total += 1
            suggested += did_suggest
    return EvaluationReport(
        precision=correct / merged if merged else 1.0,
        recall=found / labelled_merge if labelled_merge else 1.0,
        suggestion_coverage=suggested / suggest_total if suggest_total else 1.0,
        merged=merged,
        labelled_merge=labelled_merge,
        wrong=tuple(wrong),
        pairs=len(pair_list),
    )


# --------------------------------------------------------------------------------------------
# A synthetic graph for timing resolution at scale

_SYLLABLES = tuple(
    "ar ba co da el fi go ha in jo ka lu ma ne or pa qu ri sa te ul va wo xe yo za "  # noqa: SIM905
    "bri cla dro fen gar hol kin lor mon nor pel ros sten tor val wen".split()
)
_COMMON = ("Group", "Holdings", "Capital", "Bank", "Technologies", "Partners", "International")
_SUFFIXES = ("Inc.", "Corp", "Ltd", "PLC", "AG", "S.A.", "LLC", "")


def synthetic_nodes(count: int = 10_000, *, seed: int = 15, label: str = _O) -> list[Node]:
    """``count`` organisation nodes with invented names, about one in ten a variant of another
    (legal form, case, a typo, the words reordered), so resolution has work to do."""
    import random

    rng = random.Random(seed)

    def word() -> str:
        return "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 3))).capitalize()

    nodes: list[Node] = []
    while len(nodes) < count:
        n = len(nodes)
        if nodes and rng.random() < 0.1:
            base = str(rng.choice(nodes).properties["name"])
            variants = (
                f"{base} {rng.choice(_SUFFIXES)}".strip(),
                base.upper(),
                base[:-1] if len(base) > 8 else base + "s",
                " ".join(reversed(base.split())),
            )
            variant = rng.choice(variants)
            nodes.append(Node(f"n{n}", label, {"name": variant}))
            continue
        words = [word() for _ in range(rng.choice((1, 2, 2, 3)))]
        if rng.random() < 0.3:
            words.append(rng.choice(_COMMON))
        name = " ".join(words)
        suffix = rng.choice(_SUFFIXES)
        properties: dict[str, Any] = {"name": f"{name} {suffix}".strip()}
        if rng.random() < 0.1:
            properties["aliases"] = ["".join(w[0] for w in words).upper()]
        nodes.append(Node(f"n{n}", label, properties))
    return nodes
