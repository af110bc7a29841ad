"""Values inside text and their ordinary spellings (provenance/text_values)."""

from __future__ import annotations

import time
from datetime import date

from hypothesis import given, settings
from hypothesis import strategies as st

from callgate_rules.provenance.text_values import canonical_of_value, parts_of


def kinds(text: str) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for part in parts_of(text):
        found.setdefault(part.kind, set()).update(part.canonical)
    return found


def test_every_kind_of_part_is_found_in_one_text() -> None:
    found = kinds("Pay DE89 3704 0044 0532 0130 00 on January 11th 2025 the sum 1.000,00, "
                  "see https://Example.com/x/. and write to Bob@Example.org, John Smith")
    assert found["iban"] == {"iban:DE89370400440532013000"}
    assert found["date"] == {"date:2025-01-11"}
    assert "number:1000" in found["number"]
    assert found["url"] == {"url:example.com/x"}
    assert found["email"] == {"email:bob@example.org"}
    assert "name:john smith" in found["name"]


def test_dates_match_across_spellings() -> None:
    for written in ("2025-01-11", "January 11th 2025", "11 January 2025", "Jan 11, 2025",
                    "11.01.2025", "11 de enero de 2025", "11. Januar 2025", "le 11 janvier 2025"):
        assert "date:2025-01-11" in kinds(written)["date"], written
    assert kinds("01/11/2025")["date"] == {"date:2025-01-11", "date:2025-11-01"}
    assert "date" not in kinds("2025-13-45")  # not a date


def test_amounts_and_identifiers_match_across_spellings() -> None:
    assert canonical_of_value(1000) == canonical_of_value(1000.0) == ("number:1000",)
    assert "number:1000" in kinds("1.000,00")["number"]
    assert "number:1000" in kinds("1,000.00")["number"]
    assert canonical_of_value("DE89 3704 0044 0532 0130 00") == \
        canonical_of_value("de89370400440532013000")
    assert canonical_of_value("2022-01-01") == canonical_of_value("January 1st, 2022")


def test_common_and_short_words_are_never_parts_in_any_language() -> None:
    for text in ("file", "the file", "Datei", "fichier", "archivo", "файл", "yes ok to"):
        assert not [p for p in parts_of(text) if p.kind in ("word", "name")], text


def test_hostile_long_text_is_read_in_bounded_time() -> None:
    hostile = ("de89 " * 40_000) + ("1," * 40_000) + ("a@" * 40_000) + "https://" * 10_000
    started = time.perf_counter()
    parts_of(hostile)
    assert time.perf_counter() - started < 5.0


@settings(max_examples=60, deadline=None)
@given(st.dates(min_value=date(1000, 1, 1), max_value=date(9999, 12, 28)))
def test_a_date_written_in_words_reads_as_its_iso_form(day: date) -> None:
    month = day.strftime("%B")
    suffix = {1: "st", 2: "nd", 3: "rd"}.get(day.day % 10 if day.day not in (11, 12, 13) else 0,
                                             "th")
    written = f"due {month} {day.day}{suffix}, {day.year} thanks"
    assert f"date:{day.isoformat()}" in kinds(written)["date"]
    assert canonical_of_value(day.isoformat()) == (f"date:{day.isoformat()}",)


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=100, max_value=10**9), st.sampled_from([".", ","]))
def test_a_grouped_amount_reads_as_the_plain_number(amount: int, point: str) -> None:
    grouped = f"{amount:,}".replace(",", "." if point == "," else ",") + f"{point}00"
    assert f"number:{amount}" in kinds(f"pay {grouped} today")["number"]


def test_a_common_word_in_any_language_is_no_evidence_of_where_a_value_came_from() -> None:
    from callgate_rules.provenance import Thresholds, sources_of
    from callgate_rules.provenance.reading import read_conversation

    conversation = read_conversation([{"role": "user", "content": "open the file, die Datei"}])
    for word in ("file", "Datei", "FICHIER", "archivo", "файл"):
        assert sources_of(word, conversation, [], Thresholds()) == ["indistinct"], word
    assert sources_of("quarterly-report.pdf", conversation, [], Thresholds()) == []
