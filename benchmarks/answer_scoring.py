"""How benchmark answers are judged: GAIA's exact-match rules and SimpleQA's grades.

GAIA (:func:`gaia_question_scorer`) follows the public leaderboard's scorer rule for rule, so a
number reported here means what the leaderboard means:

* **number** — when the ground truth parses with Python's ``float()``, the answer has ``$``,
  ``%`` and ``,`` removed and is parsed the same way; an unparsable answer becomes +infinity
  (a quirk kept on purpose: it matches a ground truth of ``inf``). Equality is exact.
* **list** — otherwise, when the ground truth contains ``,`` or ``;``, both sides are split on
  either separator; the lists must have the same length and match position by position (order
  matters). Numeric elements compare as numbers (as above); the others compare with whitespace
  removed and case folded, *keeping* punctuation.
* **string** — otherwise both sides lose all whitespace, all ASCII punctuation, and case.

Close calls (:func:`gaia_close_call`) are KGoT's indicator, with KGoT's exact semantics (a
correct answer is a close call too); they are reported beside strict accuracy and never
counted as correct.

SimpleQA grades come from a grader model, asked for structured output; :func:`parse_grade`
reads a plain-text reply strictly (an ambiguous reply is unparsed, never guessed) and
:func:`simpleqa_metrics` turns grades into the figures the SimpleQA paper reports.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterable
from enum import StrEnum

__all__ = [
    "Grade",
    "gaia_close_call",
    "gaia_question_scorer",
    "parse_grade",
    "simpleqa_metrics",
    "strip_final_answer",
]

_NUMBER_DECORATIONS = ("$", "%", ",")
_LIST_SEPARATOR = re.compile(r"[,;]")
_ANY_WHITESPACE = re.compile(r"\s")  # Unicode-aware, like the leaderboard's pattern
_DROP_ASCII_PUNCTUATION = str.maketrans("", "", string.punctuation)
_FINAL_ANSWER_MARKER = re.compile(r"final\s+answer\s*:", re.IGNORECASE)


def _as_text(value: object) -> str:
    """``str(value)``, with ``None`` as ``"None"``; never raises."""
    if value is None:
        return "None"
    if isinstance(value, str):
        return value
    try:
        return str(value)
    except Exception:  # a broken __str__ must not crash scoring
        return object.__repr__(value)


def _parses_as_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _answer_as_number(text: str) -> float:
    for decoration in _NUMBER_DECORATIONS:
        text = text.replace(decoration, "")
    try:
        return float(text)
    except ValueError:
        return float("inf")


def _squash(text: str, *, drop_punctuation: bool) -> str:
    squashed = _ANY_WHITESPACE.sub("", text).lower()
    return squashed.translate(_DROP_ASCII_PUNCTUATION) if drop_punctuation else squashed


def _element_matches(answer_element: str, truth_element: str) -> bool:
    if _parses_as_float(truth_element):
        return _answer_as_number(answer_element) == float(truth_element)
    # Punctuation stays: inside a list it can be the whole difference between elements.
    return _squash(answer_element, drop_punctuation=False) == _squash(
        truth_element, drop_punctuation=False
    )


def gaia_question_scorer(model_answer: object, ground_truth: object) -> bool:
    """Whether ``model_answer`` is right by the GAIA leaderboard's rules (see module docs).

    Args:
        model_answer: the model's answer; non-strings are scored as ``str(value)`` and ``None``
            as ``"None"``.
        ground_truth: the dataset's ``Final answer`` (converted the same way).

    Returns:
        ``True`` for a match. Never raises.
    """
    answer = _as_text(model_answer)
    truth = _as_text(ground_truth)
    if _parses_as_float(truth):
        return _answer_as_number(answer) == float(truth)
    if "," in truth or ";" in truth:
        truth_elements = _LIST_SEPARATOR.split(truth)
        answer_elements = _LIST_SEPARATOR.split(answer)
        if len(truth_elements) != len(answer_elements):
            return False
        return all(
            _element_matches(a, t) for a, t in zip(answer_elements, truth_elements, strict=True)
        )
    return _squash(answer, drop_punctuation=True) == _squash(truth, drop_punctuation=True)


def gaia_close_call(model_answer: object, ground_truth: object) -> bool:
    """KGoT's "close call", computed exactly as KGoT's GAIA harness does.

    True when the answer is correct (KGoT's count includes correct answers), or when the
    ground truth is not a number, the answer is between half and twice as long as the ground
    truth, and every character of the lower-cased ground truth is found in the lower-cased
    answer in order. KGoT's in-order search does not move past a matched character, so one
    character of the answer can match a repeated one of the truth: ``Hal`` is a close call of
    ``Hall``, and ``Gogle`` of ``Google``.

    Reported apart from accuracy so figures stay comparable with KGoT's; it never makes an
    answer correct. Never raises.
    """
    answer = _as_text(model_answer)
    truth = _as_text(ground_truth)
    if gaia_question_scorer(answer, truth):
        return True
    if _parses_as_float(truth):
        return False
    if not len(truth) * 0.5 <= len(answer) <= len(truth) * 2:
        return False
    return _letters_in_order(answer.lower(), truth.lower())


def _letters_in_order(answer: str, truth: str) -> bool:
    """KGoT's letter check: each truth character is searched from the position of the previous
    match (inclusive), so a matched answer character can match again."""
    position = 0
    for character in truth:
        found = answer.find(character, position)
        if found < 0:
            return False
        position = found
    return True


def strip_final_answer(text: str) -> str:
    """The answer proper: whatever follows the last ``FINAL ANSWER:`` marker, trimmed.

    GAIA-style prompts ask the model to end with ``FINAL ANSWER: …``; the leaderboard scores
    only what follows. Text without a marker is returned trimmed and otherwise untouched.
    """
    markers = list(_FINAL_ANSWER_MARKER.finditer(text))
    if markers:
        text = text[markers[-1].end() :]
    return text.strip()


class Grade(StrEnum):
    """SimpleQA's three grades."""

    CORRECT = "CORRECT"
    INCORRECT = "INCORRECT"
    NOT_ATTEMPTED = "NOT_ATTEMPTED"


_GRADE_BY_TOKEN = {
    "A": Grade.CORRECT,
    "B": Grade.INCORRECT,
    "C": Grade.NOT_ATTEMPTED,
    "CORRECT": Grade.CORRECT,
    "INCORRECT": Grade.INCORRECT,
    "NOT ATTEMPTED": Grade.NOT_ATTEMPTED,
}
# One grade as a whole token: a letter or a grade word; "CORRECT" is never the letter C.
_TOKEN = r"(?:NOT[_ ]ATTEMPTED|INCORRECT|CORRECT|[ABC])"
# A line that is nothing but a grade, possibly a letter with its word ("A (CORRECT)",
# "A: CORRECT"), possibly labelled ("Grade: B", "Final verdict - C").
_VERDICT_LINE = re.compile(
    rf"(?:(?:final\s+)?(?:grade|verdict|answer)\s*(?:[:=\-–—]\s*|\s+))?"
    rf"\(?(?P<first>{_TOKEN})\)?"
    rf"(?:\s*[:=\-–—]?\s*\(?(?P<second>{_TOKEN})\)?)?",
    re.IGNORECASE,
)
# A reply that opens with a capital grade letter and punctuation before its explanation
# ("B. The prediction names another city"). Without the punctuation, "A prediction …" is the
# article, not a grade.
_LEADING_LETTER = re.compile(r"\(?(?P<first>[ABC])\)?[.:)\-–—]\s+\S")
# Emphasis and quoting around a verdict: "**A**", "`B`", "> C", "## Grade: A", "C."
_MARKUP = re.compile(r"[*`]")
_EDGE_MARKUP = " \t\"'#>.!"


class _Conflict:
    """A line naming two different grades."""


_CONFLICT = _Conflict()


def _line_grade(line: str, *, first: bool) -> Grade | _Conflict | None:
    """The grade a line states: a :class:`Grade`, ``None`` for none, or a conflict."""
    text = _MARKUP.sub("", line).strip(_EDGE_MARKUP)
    match = _VERDICT_LINE.fullmatch(text)
    if match is None and first:
        match = _LEADING_LETTER.match(text)
    if match is None:
        return None
    tokens = [token for token in match.groupdict().values() if token]
    grades = {_GRADE_BY_TOKEN[token.upper().replace("_", " ")] for token in tokens}
    return grades.pop() if len(grades) == 1 else _CONFLICT


def parse_grade(reply: str) -> Grade | None:
    """Read the grade out of a grader's plain-text reply, strictly.

    Accepted, with Markdown emphasis and quotes stripped:

    * a reply that is one grade: a letter (``A``/``B``/``C``) or a grade word (``CORRECT``,
      ``INCORRECT``, ``NOT_ATTEMPTED``), alone or with its matching word (``A (CORRECT)``);
    * explicit verdicts inside longer text: a line that is only a grade, or a labelled one
      (``Grade: B``), and a first line opening with a capital letter and punctuation
      (``B. The prediction …``).

    Grades are whole tokens: ``CORRECT`` is never read as the letter C, ``INCORRECT`` never as
    ``CORRECT``, and a grade word inside a sentence ("is NOT CORRECT", "the article A") is not
    a verdict. When the verdicts disagree (``A: INCORRECT``, ``A`` then ``B``) the reply is
    unparsed rather than guessed.

    Returns:
        The grade, or ``None`` when the reply states none or contradicts itself.
    """
    found: set[Grade] = set()
    lines = [line for line in reply.splitlines() if line.strip()]
    for number, line in enumerate(lines):
        grade = _line_grade(line, first=number == 0)
        if isinstance(grade, _Conflict):
            return None
        if grade is not None:
            found.add(grade)
    return found.pop() if len(found) == 1 else None


def simpleqa_metrics(grades: Iterable[str]) -> dict[str, float | int]:
    """SimpleQA's aggregate figures.

    Args:
        grades: one grade per question (:class:`Grade` or its string value).

    Returns:
        ``count``; ``correct``, ``incorrect``, ``not_attempted`` as fractions of all questions;
        ``given_attempted`` (correct + incorrect); ``accuracy_given_attempted`` (correct /
        given_attempted); and ``f1``, the harmonic mean of ``correct`` and
        ``accuracy_given_attempted``. Every ratio is 0 when undefined.

    Raises:
        ValueError: a grade that is not one of the three.
    """
    counts = Counter(Grade(grade) for grade in grades)
    total = sum(counts.values())

    def share(grade: Grade) -> float:
        return counts[grade] / total if total else 0.0

    correct = share(Grade.CORRECT)
    given_attempted = correct + share(Grade.INCORRECT)
    accuracy_given_attempted = correct / given_attempted if given_attempted else 0.0
    denominator = correct + accuracy_given_attempted
    f1 = 2 * correct * accuracy_given_attempted / denominator if denominator else 0.0
    return {
        "count": total,
        "correct": correct,
        "incorrect": share(Grade.INCORRECT),
        "not_attempted": share(Grade.NOT_ATTEMPTED),
        "given_attempted": given_attempted,
        "accuracy_given_attempted": accuracy_given_attempted,
        "f1": f1,
    }
