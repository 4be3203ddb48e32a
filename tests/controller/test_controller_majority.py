"""The final pick among solution samples."""

from __future__ import annotations

import pytest

from kgot.controller.solve import pick_majority


@pytest.mark.parametrize(
    ("samples", "expected"),
    [
        (["Paris", "paris.", " PARIS "], "Paris"),  # one answer spelled three ways
        (["Lyon", "Paris", "paris"], "Paris"),  # the group wins, in its first spelling
        (["Lyon", "Paris"], "Lyon"),  # a tie goes to the answer seen first
        # The winning group is shown in the spelling most samples used, not the first one.
        (["paris", "Paris", "Paris"], "Paris"),
        # A sign is part of a number: -5 and 5 are different answers.
        (["-5", "5", "5"], "5"),
        (["-5", "-5", "5"], "-5"),
        (["-3.5 °C", "3.5 °C", "-3.5 °C"], "-3.5 °C"),
        # ... while a hyphen between words is punctuation like any other.
        (["Jean-Paul Sartre", "Jean Paul Sartre", "Camus"], "Jean-Paul Sartre"),
        ([], None),
    ],
)
def test_majority_pick(samples: list[str], expected: str | None) -> None:
    assert pick_majority(samples) == expected
