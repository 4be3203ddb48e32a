"""Normalised names: the form in which two spellings of one real thing become comparable.

Pure functions, no store. A name is folded step by step:

1. Unicode NFKC (full-width ``ＡＰＰＬＥ`` → ``APPLE``, ligatures, compatibility forms), accents
   dropped from Latin letters (``Nestlé`` → ``Nestle``; other scripts keep their marks, where
   they change the letter), case-folded.
2. ``&`` becomes the word ``and``; apostrophes vanish (``McDonald's`` → ``mcdonalds``); every other
   punctuation mark separates words, so dotted initials become single letters (``I.B.M.`` →
   ``i b m``, ``S.A.`` → ``s a``). Comparing the *compact* form (spaces removed) then equates
   ``IBM``, ``I.B.M.`` and ``I. B. M.``.
3. A leading ``The`` and trailing legal forms are dropped, as long as a word remains.

Which trailing words are legal forms (and so say nothing about *which* company is meant) is a
judgement; the rules here:

* Always dropped, in any type, because they are never anything but a legal form at the end of a
  name: Inc, Incorporated, Corp, Corporation, Ltd, Limited, PLC, LLC, LLP, GmbH,
  Aktiengesellschaft, Oyj, Pty, SARL, SRL, Bhd, and the dotted forms S.A., N.V., B.V., S.p.A.,
  S.A.S. (single letters after step 2).
* Dropped only for organisation-like types (:func:`is_organisation_type`), because as plain
  words they name products and places: Co, Company, LP, AG, SA, NV, BV, SE, SpA, AB, ASA, AS,
  KK, KG, KGaA, Oy, SAS ("iPhone SE" is not "iPhone", "Model SA" is not "Model").
* Dropped from the name but kept as evidence: the legal systems of the forms
  (:attr:`NormalName.legal_systems`: Inc and Co are common law, AG and KGaA German, SA and SpA
  Romance, …). Two names equal but for forms of different systems ("Merck & Co." and "Merck
  KGaA") are suggested, never merged (:func:`legal_systems_differ`).
* Never dropped: Holdings, Group, International, Partners, Bank, Trust, Fund. These name a
  *different legal body* often enough ("Alphabet" vs "Alphabet Holdings", "Meta" vs "Meta
  Financial Group", an operating bank vs its holding company) that equating them would merge
  distinct things; name resolution offers such pairs as suggestions instead.

Acronyms: a name written as one upper-case word of 2–6 letters, or as dotted letters, is
*acronym-like*; a name of two or more words has *initials* (with and without small words such as
"of" and "and"). Resolution uses them to suggest ``IBM`` ~ ``International Business Machines``,
never to merge on them alone.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from functools import lru_cache

__all__ = [
    "NormalName",
    "fold_text",
    "is_organisation_type",
    "normalize_name",
    "strip_legal_forms",
]

# Legal forms after folding, as word sequences. Multi-letter dotted forms arrive split into
# single letters ("S.p.A." -> "s p a"), so both spellings are listed.
_ALWAYS_LEGAL: frozenset[tuple[str, ...]] = frozenset(
    {
        ("inc",),
        ("incorporated",),
        ("corp",),
        ("corporation",),
        ("ltd",),
        ("limited",),
        ("plc",),
        ("llc",),
        ("l", "l", "c"),
        ("llp",),
        ("l", "l", "p"),
        ("gmbh",),
        ("aktiengesellschaft",),
        ("oyj",),
        ("pty",),
        ("sarl",),
        ("s", "a", "r", "l"),
        ("srl",),
        ("s", "r", "l"),
        ("bhd",),
        ("s", "a"),
        ("n", "v"),
        ("b", "v"),
        ("s", "p", "a"),
        ("s", "a", "s"),
        ("p", "l", "c"),
    }
)
_ORGANISATION_LEGAL: frozenset[tuple[str, ...]] = frozenset(
    {
        ("co",),
        ("company",),
        ("lp",),
        ("l", "p"),
        ("ag",),
        ("sa",),
        ("nv",),
        ("bv",),
        ("se",),
        ("spa",),
        ("ab",),
        ("asa",),
        ("as",),
        ("kk",),
        ("kg",),
        ("kgaa",),
        ("oy",),
        ("sas",),
    }
)
_LONGEST_LEGAL = max(len(form) for form in _ALWAYS_LEGAL | _ORGANISATION_LEGAL)

# Where each legal form is used: two names equal but for legal forms of different systems
# ("Merck & Co." and "Merck KGaA") are two companies as often as one, so resolution suggests
# them instead of merging. An SE (a European company) sits beside any European form.
_LEGAL_SYSTEMS: dict[tuple[str, ...], str] = {
    **dict.fromkeys(
        [("inc",), ("incorporated",), ("corp",), ("corporation",), ("ltd",), ("limited",),
         ("plc",), ("p", "l", "c"), ("llc",), ("l", "l", "c"), ("llp",), ("l", "l", "p"),
         ("pty",), ("co",), ("company",), ("lp",), ("l", "p")],
        "common law",
    ),
    **dict.fromkeys(
        [("gmbh",), ("aktiengesellschaft",), ("ag",), ("kg",), ("kgaa",)], "German"
    ),
    **dict.fromkeys(
        [("sarl",), ("s", "a", "r", "l"), ("srl",), ("s", "r", "l"), ("s", "a"), ("sa",),
         ("s", "p", "a"), ("spa",), ("s", "a", "s"), ("sas",)],
        "Romance",
    ),
    **dict.fromkeys([("n", "v"), ("nv",), ("b", "v"), ("bv",)], "Dutch"),
    **dict.fromkeys([("oyj",), ("oy",), ("ab",), ("asa",), ("as",)], "Nordic"),
    ("kk",): "Japanese",
    ("bhd",): "Malaysian",
    ("se",): "European",
}  # fmt: skip

# Type labels whose nodes are organisations (compared case-insensitively, singular).
_ORGANISATION_LABELS = frozenset(
    {
        "organization",
        "organisation",
        "org",
        "company",
        "corporation",
        "business",
        "firm",
        "enterprise",
        "issuer",
        "institution",
        "bank",
        "insurer",
        "employer",
        "manufacturer",
        "publisher",
        "vendor",
        "supplier",
        "competitor",
        "subsidiary",
        "startup",
        "agency",
        "brand",
    }
)

# Small words left out of initials ("Bank of America" -> "ba" as well as "boa").
_SMALL_WORDS = frozenset({"of", "and", "the", "for", "de", "du", "la", "le", "der", "und", "et"})

_APOSTROPHES = re.compile(r"['’‘`´ʼ]")
_SEPARATORS = re.compile(r"[^\w]+|_+")
_DIGIT = re.compile(r"\d")


def is_organisation_type(label: str) -> bool:
    """Whether nodes of type ``label`` are organisations, whose short legal forms are dropped.

    Judged from the label alone ("Company", "Organization", "Bank", "Issuer", … and their plural
    or lower-case spellings), so that a product called "iPhone SE" keeps its "SE".
    """
    word = label.strip().casefold()
    singulars = {word, word.removesuffix("s"), word.removesuffix("es")}
    if word.endswith("ies"):
        singulars.add(word[:-3] + "y")
    return not singulars.isdisjoint(_ORGANISATION_LABELS)


@lru_cache(maxsize=65536)
def fold_text(text: str) -> str:
    """Steps 1 and 2 of the module docstring: NFKC, Latin accents off, case-folded, punctuation
    turned into single spaces. ``"  Nestlé  S.A. "`` → ``"nestle s a"``."""
    text = unicodedata.normalize("NFKC", text)
    text = _drop_latin_accents(text).casefold()
    text = text.replace("&", " and ")
    text = _APOSTROPHES.sub("", text)
    return " ".join(_SEPARATORS.sub(" ", text).split())


def _drop_latin_accents(text: str) -> str:
    if text.isascii():
        return text
    out: list[str] = []
    for char in unicodedata.normalize("NFD", text):
        # Only marks on Latin letters go: in other scripts (kana voicing marks, Indic vowel
        # signs) the mark makes a different letter.
        if unicodedata.combining(char) and out and ord(out[-1]) < 0x250:
            continue
        out.append(char)
    return unicodedata.normalize("NFC", "".join(out))


def strip_legal_forms(words: tuple[str, ...], *, organisation: bool) -> tuple[str, ...]:
    """Drop a leading "the" and trailing legal forms from folded ``words``, keeping ≥ 1 word.

    ``("goldman", "sachs", "and", "co")`` → ``("goldman", "sachs")`` for organisations (the
    "and" that joined a dropped form goes with it).
    """
    return _split_legal_forms(words, organisation=organisation)[0]


def _split_legal_forms(
    words: tuple[str, ...], *, organisation: bool
) -> tuple[tuple[str, ...], tuple[tuple[str, ...], ...]]:
    """:func:`strip_legal_forms`, and the forms it dropped (last first)."""
    dropped: list[tuple[str, ...]] = []
    if len(words) > 1 and words[0] == "the":
        words = words[1:]
    forms = _ALWAYS_LEGAL | _ORGANISATION_LEGAL if organisation else _ALWAYS_LEGAL
    changed = True
    while changed and len(words) > 1:
        changed = False
        for size in range(min(_LONGEST_LEGAL, len(words) - 1), 0, -1):
            if words[-size:] in forms:
                dropped.append(words[-size:])
                words = words[:-size]
                if len(words) > 1 and words[-1] == "and":
                    words = words[:-1]
                changed = True
                break
    return words, tuple(dropped)


@dataclass(frozen=True, slots=True)
class NormalName:
    """One name in its comparable forms.

    ``key`` is the folded name without "The" and legal forms; ``words`` its words in order;
    ``sorted_key`` the words sorted (word order ignored: "Cook, Tim" = "Tim Cook"); ``compact``
    the key without spaces ("Exxon Mobil" = "ExxonMobil", "I.B.M." = "IBM"); ``full_compact``
    the same with the short legal forms kept ("PepsiCo" = "Pepsi Co"); ``numbers`` the words
    holding a digit ("Apollo 11" ≠ "Apollo 13"); ``acronym_like`` whether it was written as an
    acronym; ``initials`` the first letters of a multi-word name, with and without small words.
    """

    raw: str
    key: str
    words: tuple[str, ...]
    full_compact: str
    sorted_key: str
    compact: str
    numbers: frozenset[str]
    acronym_like: bool
    initials: frozenset[str]
    # the legal systems of the forms dropped from it ("common law" for Inc, "German" for KGaA)
    legal_systems: frozenset[str] = frozenset()
    # The words as a set, made once: resolution compares it with thousands of other names.
    word_set: frozenset[str] = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "word_set", frozenset(self.words))


@lru_cache(maxsize=65536)
def normalize_name(text: str, *, organisation: bool = False) -> NormalName:
    """Fold ``text`` into a :class:`NormalName` (see the module docstring for the steps).

    ``organisation`` also drops the short legal forms (Co, AG, SA, SE, …); pass
    :func:`is_organisation_type` of the node's type. An empty or punctuation-only name gives a
    :class:`NormalName` with an empty ``key``, which resolution ignores.
    """
    folded = fold_text(text)
    all_words = tuple(folded.split())
    words, dropped = _split_legal_forms(all_words, organisation=organisation)
    key = " ".join(words)
    compact = "".join(words)
    initials: set[str] = set()
    if len(words) >= 2 and not all(len(word) == 1 for word in words):
        initials.add("".join(word[0] for word in words))
        content = [word for word in words if word not in _SMALL_WORDS]
        if len(content) >= 2:
            initials.add("".join(word[0] for word in content))
    return NormalName(
        raw=text,
        key=key,
        words=words,
        full_compact="".join(strip_legal_forms(all_words, organisation=False)),
        sorted_key=" ".join(sorted(words)),
        compact=compact,
        numbers=frozenset(word for word in words if _DIGIT.search(word)),
        acronym_like=_acronym_like(text, words),
        initials=frozenset(initials),
        legal_systems=frozenset(_LEGAL_SYSTEMS.get(form, "other") for form in dropped),
    )


def legal_systems_differ(a: NormalName, b: NormalName) -> bool:
    """Whether both names carried legal forms and no system is common to them ("Merck & Co."
    and "Merck KGaA": common law and German). A European SE fits any European form."""
    if not a.legal_systems or not b.legal_systems or a.legal_systems & b.legal_systems:
        return False
    european = {"European", "German", "Romance", "Dutch", "Nordic"}
    both = a.legal_systems | b.legal_systems
    return not ("European" in both and both <= european)


def _acronym_like(text: str, words: tuple[str, ...]) -> bool:
    """ "IBM", "I.B.M.", "H.S.B.C." — not "Ibm", "Meta" or "ibm" (a lower-case word may just be
    a short name)."""
    compact = "".join(words)
    if not 2 <= len(compact) <= 6 or not compact.isalpha():
        return False
    if len(words) > 1:
        return all(len(word) == 1 for word in words)
    letters = [char for char in unicodedata.normalize("NFKC", text) if char.isalpha()]
    return len(letters) >= 2 and all(char.isupper() for char in letters[: len(compact)])
