"""Name normalisation (kgot.memory.names): the forms entity resolution compares."""

from __future__ import annotations

import pytest

from kgot.memory.names import fold_text, is_organisation_type, normalize_name


def org(text: str):
    return normalize_name(text, organisation=True)


@pytest.mark.parametrize(
    "spellings",
    [
        ("Apple Inc.", "Apple, Inc.", "apple incorporated", "APPLE INC", "Apple"),
        ("Microsoft Corporation", "Microsoft Corp.", "microsoft"),
        ("The Coca-Cola Company", "Coca-Cola", "coca cola co"),
        ("Nestlé S.A.", "Nestle SA", "NESTLÉ"),
        ("Goldman Sachs & Co.", "Goldman Sachs", "goldman sachs and co"),
        ("Samsung Electronics Co., Ltd.", "Samsung Electronics"),
        ("Commonwealth Bank of Australia Pty Ltd", "Commonwealth Bank of Australia"),
        ("Ferrari S.p.A.", "Ferrari SpA", "Ferrari"),
        ("ＡＰＰＬＥ ＩＮＣ．", "Apple Inc."),
    ],
)
def test_spellings_of_one_company_share_a_key(spellings):
    keys = {org(text).key for text in spellings}
    assert len(keys) == 1, keys


def test_folding_nfkc_case_accents_punctuation():
    assert fold_text("  Ｔｏｙｏｔａ　Motor ") == "toyota motor"
    assert fold_text("Société Générale") == "societe generale"
    assert fold_text("L’Oréal") == "loreal"
    assert fold_text("McDonald's") == "mcdonalds"
    assert fold_text("AT&T") == "at and t"
    assert fold_text("Apple\u200bInc") == "apple inc"  # zero-width space separates words
    assert fold_text("Газпром") == "газпром"
    # Marks that make another letter outside Latin script stay (ガ is not カ).
    assert fold_text("ガス") == "ガス"


def test_dotted_initials_become_single_letters_and_compare_compact():
    ibm = normalize_name("I.B.M.")
    assert ibm.words == ("i", "b", "m")
    assert ibm.compact == normalize_name("IBM").compact == "ibm"
    assert normalize_name("J.R.R. Tolkien").key == normalize_name("J. R. R. Tolkien").key


def test_short_legal_forms_only_for_organisations():
    assert normalize_name("iPhone SE").key == "iphone se"
    assert org("Airbus SE").key == "airbus"
    assert normalize_name("Siemens AG").key == "siemens ag"
    assert org("Siemens AG").key == "siemens"
    # Unambiguous forms go in any type.
    assert normalize_name("Acme Corporation").key == "acme"
    # The compact form that keeps short forms equates "PepsiCo" and "Pepsi Co".
    assert org("PepsiCo, Inc.").full_compact == org("Pepsi Co").full_compact == "pepsico"


def test_meaningful_words_are_kept():
    assert org("Alphabet Holdings").key == "alphabet holdings"
    assert org("Meta Financial Group").key == "meta financial group"
    assert org("HSBC Holdings plc").key == "hsbc holdings"


def test_at_least_one_word_remains():
    assert org("The").key == "the"
    assert org("Inc.").key == "inc"
    assert org("The Company").key == "company"
    assert normalize_name("!!!").key == ""


def test_word_order_numbers_and_initials():
    assert normalize_name("Cook, Tim").sorted_key == normalize_name("Tim Cook").sorted_key
    assert normalize_name("Apollo 11").numbers == {"11"}
    assert org("Bank of America Corp").initials == {"boa", "ba"}
    assert normalize_name("Meta").initials == frozenset()


@pytest.mark.parametrize(
    ("text", "acronym"),
    [
        ("IBM", True),
        ("I.B.M.", True),
        ("ＩＢＭ", True),
        ("NASA", True),
        ("IBM Corp.", True),
        ("Ibm", False),
        ("ibm", False),
        ("Meta", False),
        ("International Business Machines", False),
        ("3M", False),
        ("ABCDEFGH", False),  # too long to be read as initials
    ],
)
def test_acronym_detection(text, acronym):
    assert normalize_name(text, organisation=True).acronym_like is acronym


def test_organisation_types():
    for label in ("Organization", "organisation", "Company", "Companies", "Bank", "Issuer"):
        assert is_organisation_type(label), label
    for label in ("Product", "Person", "Asset", "Place", "Thing"):
        assert not is_organisation_type(label), label
