"""The baselines kgot's resolution is measured against: recordlinkage's ECM classifier, and
Splink when it is installed.

**ECM.** The set-up is the one recordlinkage's documentation uses for FEBRL deduplication without
labels, widened so that one typo cannot hide a pair: candidate pairs are the union of four
blockings (same surname, same given name, same postcode, same date of birth); names, street
and suburb are compared with Jaro–Winkler at 0.85 (the docs' threshold), the other fields
exactly; the ECM (expectation-conditional maximisation) classifier then learns the
Fellegi–Sunter weights from the data itself, without any labels.

**Splink** (DuckDB backend, no network) runs with the settings of its own FEBRL3 tutorial:
predictions from five blockings (id, given name, surname, date of birth, postcode); name
comparisons for the names, a date-of-birth comparison, Damerau–Levenshtein within 2 on the id,
exact street number and postcode with term frequencies; the match probability's prior from
deterministic rules, u from random pairs, m by EM blocked on date of birth then on postcode;
pairs at a match probability of 0.5 or more are matches.
"""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Mapping

from kgot.benchmarks.pair_metrics import Pair, pair_of
from kgot.benchmarks.resolution_populations import FEBRL_FIELDS, Record, require_recordlinkage

__all__ = ["BLOCKING_KEYS", "ecm_pairs", "splink_installed", "splink_pairs"]

BLOCKING_KEYS = ("surname", "given_name", "postcode", "date_of_birth")
_FUZZY = ("given_name", "surname", "address_1", "suburb")
_EXACT = ("street_number", "postcode", "state", "date_of_birth", "soc_sec_id")
JARO_WINKLER_THRESHOLD = 0.85


def ecm_pairs(records: Mapping[str, Record]) -> set[Pair]:
    """The record pairs the ECM classifier calls matches (pairwise, as it answers).

    Raises:
        ConfigError: recordlinkage is not installed.
    """
    require_recordlinkage()
    import pandas
    import recordlinkage

    frame = pandas.DataFrame.from_dict(dict(records), orient="index", columns=list(FEBRL_FIELDS))
    indexer = recordlinkage.Index()
    for key in BLOCKING_KEYS:
        indexer.block(key)  # several blockings on one index: their union
    candidates = indexer.index(frame)
    compare = recordlinkage.Compare()
    for field in _FUZZY:
        compare.string(
            field, field, method="jarowinkler", threshold=JARO_WINKLER_THRESHOLD, label=field
        )
    for field in _EXACT:
        compare.exact(field, field, label=field)
    features = compare.compute(candidates, frame)
    matches = recordlinkage.ECMClassifier(binarize=None).fit_predict(features)
    return {pair_of(str(first), str(second)) for first, second in matches}


def splink_installed() -> bool:
    return importlib.util.find_spec("splink") is not None


SPLINK_THRESHOLD = 0.5  # match probability


def splink_pairs(records: Mapping[str, Record]) -> set[Pair]:
    """The record pairs Splink calls matches, trained on ``records`` without labels.

    Raises:
        ImportError: Splink is not installed (see :func:`splink_installed`).
    """
    import pandas
    import splink.comparison_library as comparisons
    from splink import DuckDBAPI, Linker, SettingsCreator, block_on

    frame = pandas.DataFrame.from_dict(dict(records), orient="index", columns=list(FEBRL_FIELDS))
    frame = frame.rename_axis("rec_id").reset_index()
    frame = frame.astype(object).where(frame.notna(), None)  # SQL NULL, not the text "nan"
    settings = SettingsCreator(
        unique_id_column_name="rec_id",
        link_type="dedupe_only",
        blocking_rules_to_generate_predictions=[
            block_on(key)
            for key in ("soc_sec_id", "given_name", "surname", "date_of_birth", "postcode")
        ],
        comparisons=[
            comparisons.NameComparison("given_name"),
            comparisons.NameComparison("surname"),
            comparisons.DateOfBirthComparison(
                "date_of_birth", input_is_string=True, datetime_format="%Y%m%d"
            ),
            comparisons.DamerauLevenshteinAtThresholds("soc_sec_id", [2]),
            comparisons.ExactMatch("street_number").configure(term_frequency_adjustments=True),
            comparisons.ExactMatch("postcode").configure(term_frequency_adjustments=True),
        ],
    )
    # its training notes (untrained levels, sample sizes) are for a person tuning it
    linker = Linker(DuckDBAPI().register(frame), settings, log_level=logging.ERROR)
    linker.training.estimate_probability_two_random_records_match(
        [
            block_on("soc_sec_id"),
            block_on("given_name", "surname", "date_of_birth"),
            "l.given_name = r.surname and l.surname = r.given_name "
            "and l.date_of_birth = r.date_of_birth",
        ],
        recall=0.9,
    )
    linker.training.estimate_u_using_random_sampling(max_pairs=1e6, seed=2)
    for blocking in ("date_of_birth", "postcode"):
        linker.training.estimate_parameters_using_expectation_maximisation(block_on(blocking))
    predictions = linker.inference.predict(threshold_match_probability=SPLINK_THRESHOLD)
    found = predictions.as_pandas_dataframe()
    return {
        pair_of(str(first), str(second))
        for first, second in zip(found["rec_id_l"], found["rec_id_r"], strict=True)
    }
