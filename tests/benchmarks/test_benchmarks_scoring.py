"""The GAIA leaderboard scorer's rules, KGoT's close calls, and SimpleQA's grades and metrics."""

from __future__ import annotations

import pytest

from kgot.benchmarks.answer_scoring import (
    Grade,
    gaia_close_call,
    gaia_question_scorer,
    parse_grade,
    simpleqa_metrics,
    strip_final_answer,
)

# ---------------------------------------------------------------- GAIA: number branch


@pytest.mark.parametrize(
    ("answer", "truth", "expected"),
    [
        ("17", "17", True),
        ("17.0", "17", True),
        ("  42 ", "42", True),  # float() ignores surrounding whitespace
        ("4.2e1", "42", True),
        ("$1,234", "1234", True),  # $ , % are dropped from the answer
        ("12%", "12", True),
        ("1,000,000", "1000000", True),
        ("1_000", "1000", True),  # Python's float() accepts digit underscores
        ("42.0001", "42", False),  # exact equality, no tolerance
        ("17 thousand", "17", False),  # unparsable → +inf
        ("seventeen", "17", False),
        ("", "0", False),
        ("-3", "-3.0", True),
        ("3", "-3", False),
    ],
)
def test_number_branch(answer: str, truth: str, expected: bool) -> None:
    assert gaia_question_scorer(answer, truth) is expected


def test_number_branch_keeps_the_leaderboards_infinity_quirk() -> None:
    # An unparsable answer becomes +inf, which equals a ground truth of "inf".
    assert gaia_question_scorer("no idea", "inf") is True
    assert gaia_question_scorer("nan", "nan") is False  # NaN never equals itself


# ---------------------------------------------------------------- GAIA: list branch


@pytest.mark.parametrize(
    ("answer", "truth", "expected"),
    [
        ("a, b, c", "a,b,c", True),
        ("b, a, c", "a,b,c", False),  # order matters
        ("a, b", "a,b,c", False),  # lengths must match
        ("a; b; c", "a, b, c", True),  # either separator, on both sides
        ("Sea Gull, TERN", "seagull, tern", True),  # whitespace and case ignored
        ("1, $2, 3%", "1,2,3", True),  # numeric elements compare as numbers
        ("1, 2.5, 3", "1,2.50,3", True),
        ("St. Louis, Paris", "St Louis, Paris", False),  # punctuation kept inside lists
        ("apple, pear.", "apple, pear", False),
        ("1000", "1,000", False),  # a comma makes the truth a two-element list
        ("1,000", "1,000", True),
        ("x, , z", "x,,z", True),
    ],
)
def test_list_branch(answer: str, truth: str, expected: bool) -> None:
    assert gaia_question_scorer(answer, truth) is expected


# ---------------------------------------------------------------- GAIA: string branch


@pytest.mark.parametrize(
    ("answer", "truth", "expected"),
    [
        ("Sea-gull!", "seagull", True),  # ASCII punctuation and whitespace dropped
        ("sea gull", "Seagull", True),
        ("The Beatles", "Beatles", False),  # articles are not removed
        ("ÉCOLE", "école", True),  # Unicode case folding via lower()
        ("Paris\u00a0Texas", "ParisTexas", True),  # Unicode whitespace removed
        ("Paris…", "Paris", False),  # non-ASCII punctuation is kept
        ("naïve", "naive", False),  # accents matter
        ("right", "wrong", False),
    ],
)
def test_string_branch(answer: str, truth: str, expected: bool) -> None:
    assert gaia_question_scorer(answer, truth) is expected


def test_scorer_converts_non_strings_and_never_raises() -> None:
    class Broken:
        def __str__(self) -> str:
            raise RuntimeError("no text")

    assert gaia_question_scorer(17, "17") is True
    assert gaia_question_scorer(17.0, 17) is True
    assert gaia_question_scorer(None, "None") is True  # None is scored as "None"
    assert gaia_question_scorer(None, "3") is False
    assert gaia_question_scorer(["a", "b"], "['a', 'b']") is True  # str() of the list
    assert gaia_question_scorer(Broken(), "x") is False
    assert gaia_question_scorer("x", Broken()) is False
    assert gaia_question_scorer("\x00", "1") is False


# ---------------------------------------------------------------- close calls


def test_close_call_is_a_near_miss_of_a_text_answer() -> None:
    assert gaia_close_call("Sea gulls", "seagull") is True
    assert gaia_close_call("Beatles", "The Beatles") is False  # letters missing
    assert gaia_close_call("The Beatles", "Beatles") is True


@pytest.mark.parametrize(
    ("answer", "truth"),
    [
        # KGoT's in-order search restarts *at* the last match, so one answer letter can stand
        # for a doubled truth letter: these are close calls in KGoT's harness, and here.
        ("Hal", "Hall"),
        ("Gogle", "Google"),
        ("Mississipi", "Mississippi"),
        ("Misisipi", "Mississippi"),
    ],
)
def test_close_call_matches_kgots_repeated_letter_semantics(answer: str, truth: str) -> None:
    assert gaia_question_scorer(answer, truth) is False
    assert gaia_close_call(answer, truth) is True


def test_close_call_counts_correct_answers_like_kgot() -> None:
    # KGoT's check returns True for a correct answer, numbers included.
    assert gaia_close_call("seagull", "seagull") is True
    assert gaia_close_call("17.0", "17") is True
    assert gaia_close_call("tern, seagull", "seagull, tern") is False  # wrong order, not close
    assert gaia_close_call("seagull, tern", "seagull, tern") is True


def test_close_call_is_never_a_wrong_number_or_a_length_outlier() -> None:
    assert gaia_close_call("18", "17") is False  # numbers are right or wrong
    assert gaia_close_call("117", "17") is False
    assert gaia_close_call("a" * 20 + "seagull", "seagull") is False  # over twice as long
    assert gaia_close_call("sg", "seagull") is False  # under half as long
    assert gaia_close_call("llaH", "Hall") is False  # letters out of order


# ---------------------------------------------------------------- FINAL ANSWER


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("FINAL ANSWER: 42", "42"),
        ("  final answer:Paris  ", "Paris"),
        ("I think so.\nFinal Answer: Paris, France", "Paris, France"),
        ("FINAL ANSWER: draft\nFINAL ANSWER: 7", "7"),  # the last marker wins
        ("  plain answer ", "plain answer"),
        ("", ""),
    ],
)
def test_strip_final_answer(text: str, expected: str) -> None:
    assert strip_final_answer(text) == expected


# ---------------------------------------------------------------- SimpleQA grades


@pytest.mark.parametrize(
    ("reply", "grade"),
    [
        ("A", Grade.CORRECT),
        ("B", Grade.INCORRECT),
        ("C", Grade.NOT_ATTEMPTED),
        ("CORRECT", Grade.CORRECT),  # a word, not the letter C
        ("INCORRECT", Grade.INCORRECT),  # does not contain the word CORRECT
        ("NOT_ATTEMPTED", Grade.NOT_ATTEMPTED),
        ("NOT ATTEMPTED", Grade.NOT_ATTEMPTED),
        ("**B**", Grade.INCORRECT),
        ("Grade: A", Grade.CORRECT),
        ("A: CORRECT", Grade.CORRECT),
        (" c\nC.", Grade.NOT_ATTEMPTED),
        ("A (CORRECT)", Grade.CORRECT),
        ("`C`", Grade.NOT_ATTEMPTED),
        ("## Verdict: B", Grade.INCORRECT),
        ("Final grade - not_attempted", Grade.NOT_ATTEMPTED),
        ("correct", Grade.CORRECT),  # a whole reply of one word is unambiguous
        # Ordinary grader prose the old last-capital-token rule misread:
        ("B. A prediction naming another city contradicts the gold target.", Grade.INCORRECT),
        ("B\n\nA note: the prediction names Lyon, not Paris.", Grade.INCORRECT),
        (
            "**A**\n\nExplanation: it names the gold target. I would not choose B or C.",
            Grade.CORRECT,
        ),
        ("C\n(The model declined; INCORRECT would be wrong.)", Grade.NOT_ATTEMPTED),
        ("Grade: B\nB", Grade.INCORRECT),  # two verdicts that agree
    ],
)
def test_parse_grade(reply: str, grade: Grade) -> None:
    assert parse_grade(reply) is grade


@pytest.mark.parametrize(
    "reply",
    [
        "",
        "The answer looks correct to me",
        "ABC",
        "Maybe",
        "D",
        "The answer is NOT CORRECT.",  # a grade word inside a sentence is not a verdict
        "A prediction naming another city",  # the article, not the letter
        "The prediction contradicts the gold target, so: B",  # not an explicit verdict
        "A: INCORRECT",  # conflicting grades are never guessed
        "A\nB",
        "Grade: A\nC",
    ],
)
def test_parse_grade_without_a_grade(reply: str) -> None:
    assert parse_grade(reply) is None


def test_simpleqa_metrics() -> None:
    grades = ["CORRECT"] * 6 + [Grade.INCORRECT] * 2 + ["NOT_ATTEMPTED"] * 2
    metrics = simpleqa_metrics(grades)
    assert metrics["count"] == 10
    assert metrics["correct"] == pytest.approx(0.6)
    assert metrics["incorrect"] == pytest.approx(0.2)
    assert metrics["not_attempted"] == pytest.approx(0.2)
    assert metrics["given_attempted"] == pytest.approx(0.8)
    assert metrics["accuracy_given_attempted"] == pytest.approx(0.75)
    assert metrics["f1"] == pytest.approx(2 * 0.6 * 0.75 / (0.6 + 0.75))


def test_simpleqa_metrics_are_zero_when_undefined() -> None:
    assert simpleqa_metrics([]) == {
        "count": 0,
        "correct": 0.0,
        "incorrect": 0.0,
        "not_attempted": 0.0,
        "given_attempted": 0.0,
        "accuracy_given_attempted": 0.0,
        "f1": 0.0,
    }
    only_declined = simpleqa_metrics(["NOT_ATTEMPTED"] * 3)
    assert only_declined["accuracy_given_attempted"] == 0.0
    assert only_declined["f1"] == 0.0
    assert only_declined["not_attempted"] == 1.0


def test_simpleqa_metrics_reject_unknown_grades() -> None:
    with pytest.raises(ValueError, match="MAYBE"):
        simpleqa_metrics(["CORRECT", "MAYBE"])
