"""Two of issue 19's small things: the review queue's commands (a header, no store created by
reading, resolved by whoever took the item) and durations (``1d``, ``1h30m``, ``PT5S``) in
every document kind and in ``--older-than``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import re2
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from callgate_rules.cli import main
from callgate_rules.documents.compiler import compile_paths
from callgate_rules.documents.durations import SCHEMA_PATTERN, parse_duration
from callgate_rules.store import NewOperation, NewReviewItem, ReceiptState, SqliteStore

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("text", "seconds"), [
    ("500ms", 0.5), ("5s", 5), ("2m", 120), ("1h", 3600), ("1d", 86400), ("1h30m", 5400),
    ("1d12h", 129600), ("2m30s", 150), ("1s500ms", 1.5), ("1.5h", 5400), ("PT5S", 5),
    ("PT1H30M", 5400), ("P1D", 86400), ("P1DT2H", 93600), ("P2W", 1209600), ("PT0.5S", 0.5),
    (7, 7), (2.5, 2.5),
])
def test_durations_people_write(text: str | float, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)
    if isinstance(text, str):  # the documents' schema accepts what the parser does
        assert re2.fullmatch(SCHEMA_PATTERN, text)


@pytest.mark.parametrize(("text", "needle"), [
    ("", "not a duration"), ("P", "not a duration"), ("PT", "not a duration"),
    ("P1DT", "not a duration"), ("1m1h", "largest first"), ("1h1h", "each once"),
    ("1h 30m", "not a duration"), ("5x", "not a duration"), ("-5s", "not a duration"),
    ("P1M", "no fixed length"), ("P1Y2D", "no fixed length"), ("pt5s", "not a duration"),
    (True, "not a duration"),
])
def test_what_is_not_a_duration_says_what_is(text: object, needle: str) -> None:
    with pytest.raises(ValueError, match=needle) as raised:
        parse_duration(text)  # type: ignore[arg-type]
    assert "500ms" in str(raised.value) or "P30D" in str(raised.value)
    if isinstance(text, str) and text not in ("P1M", "P1Y2D"):
        assert not re2.fullmatch(SCHEMA_PATTERN, text)


@given(st.integers(0, 30), st.integers(0, 23), st.integers(0, 59), st.integers(0, 59))
def test_both_spellings_agree(days: int, hours: int, minutes: int, seconds: int) -> None:
    units = "".join(f"{n}{u}" for n, u in ((days, "d"), (hours, "h"), (minutes, "m"),
                                           (seconds, "s")) if n) or "0s"
    clock = "".join(f"{n}{u}" for n, u in ((hours, "H"), (minutes, "M"), (seconds, "S")) if n)
    iso = f"P{days}D" + (f"T{clock}" if clock else "")
    expected = ((days * 24 + hours) * 60 + minutes) * 60 + seconds
    assert parse_duration(units) == parse_duration(iso) == expected


def test_a_contract_takes_an_iso_timeout_and_a_routing_table_days(tmp_path: Path) -> None:
    contract = (REPO / "contracts" / "getTicketStatus.yaml").read_text()
    assert "timeout:" in contract
    (tmp_path / "contracts").mkdir()
    (tmp_path / "contracts" / "getTicketStatus.yaml").write_text(
        "\n".join("  timeout: PT2S" if line.startswith("  timeout:") else line
                  for line in contract.splitlines()) + "\n")
    routing = (REPO / "policies" / "routing.yaml").read_text()
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "access.yaml").write_text(
        (REPO / "policies" / "access.yaml").read_text())
    (tmp_path / "policies" / "routing.yaml").write_text(
        routing.replace("retention: 720h", "retention: 30d") if "retention: 720h" in routing
        else routing.replace("spec:\n", "spec:\n  receipts: {retention: 30d}\n", 1))
    compilation = compile_paths([tmp_path / "contracts", tmp_path / "policies"])
    assert compilation.config is not None, [str(f) for f in compilation.findings]
    assert compilation.config.contracts["getTicketStatus"].timeout_seconds == 2
    assert compilation.config.routing.retention_seconds == 30 * 86400


def test_a_duration_no_one_can_read_is_a_finding_with_its_line(tmp_path: Path) -> None:
    contract = (REPO / "contracts" / "getTicketStatus.yaml").read_text()
    (tmp_path / "getTicketStatus.yaml").write_text(
        "\n".join("  timeout: 1 day" if line.startswith("  timeout:") else line
                   for line in contract.splitlines()) + "\n")
    line = 1 + next(number for number, text in enumerate(contract.splitlines())
                    if text.startswith("  timeout:"))
    findings = [str(f) for f in compile_paths([tmp_path]).findings]
    assert any(f"getTicketStatus.yaml:{line}:" in f and "timeout" in f for f in findings), \
        findings


# the review queue ---------------------------------------------------------------------------


def seeded(path: Path) -> str:
    store = SqliteStore(path)
    now = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
    store.claim(NewOperation("op_1", "r1", "createFollowUp", "1.0.0", "h", {"ticketId": "T-1"},
                             {"id": "U-7"}), worker="w", lease=timedelta(seconds=60), now=now)
    store.finish("op_1", worker="w", state=ReceiptState.OUTCOME_UNKNOWN, now=now,
                 error_class="unknown_outcome")
    review_id = store.open_review(NewReviewItem(
        "createFollowUp", "reconcile_failed", "createFollowUp op_1: not found", "op_1"),
        now=now).review_id
    store.close()
    return review_id


def test_review_list_has_a_header_and_a_column_per_field(tmp_path: Path) -> None:
    review_id = seeded(tmp_path / "r.sqlite3")
    url = f"sqlite:///{tmp_path / 'r.sqlite3'}"
    runner = CliRunner()
    runner.invoke(main, ["review", "take", "--by", "lee", "--store", url])
    lines = runner.invoke(main, ["review", "list", "--store", url]).output.splitlines()
    assert lines[0].split() == ["REVIEW", "ID", "STATUS", "REASON", "CREATED", "(UTC)",
                                "TAKEN", "BY", "SUMMARY"]
    assert lines[1].split()[:6] == [review_id, "taken", "reconcile_failed", "2026-11-29",
                                    "12:00", "lee"]
    assert lines[0].index("STATUS") == lines[1].index("taken")  # the columns line up


@pytest.mark.parametrize("command", [["list"], ["take", "--by", "lee"],
                                     ["resolve", "rv_1", "--as", "failed", "--note", "x"]])
@pytest.mark.parametrize("form", ["sqlite:///{}", "{}"])
def test_reading_the_queue_never_creates_a_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 command: list[str], form: str) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CALLGATE_STORE", raising=False)
    arguments = ["review", *command] + (["--store", form.format("missing.sqlite3")]
                                        if form != "{}" else [])
    result = CliRunner().invoke(main, arguments)
    assert result.exit_code == 2, result.output
    name = "missing.sqlite3" if form != "{}" else "callgate.sqlite3"
    assert f"no receipt store at {name}" in result.output and "--store" in result.output
    assert "Traceback" not in result.output
    assert list(tmp_path.iterdir()) == []  # nothing was created


def test_resolve_records_who_took_the_item(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("USER", "someone-else")
    review_id = seeded(tmp_path / "r.sqlite3")
    url = f"sqlite:///{tmp_path / 'r.sqlite3'}"
    runner = CliRunner()
    assert "taken by dana" in runner.invoke(
        main, ["review", "take", "--by", "dana", "--store", url]).output
    resolved = runner.invoke(main, ["review", "resolve", review_id, "--as", "succeeded",
                                    "--note", "found in the CRM", "--store", url])
    assert resolved.exit_code == 0, resolved.output
    assert "resolved as succeeded by dana" in resolved.output
    store = SqliteStore(tmp_path / "r.sqlite3")
    assert store.list_reviews()[0].resolved_by == "dana"
    store.close()


def test_resolve_of_an_untaken_item_is_by_the_user_or_by(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    review_id = seeded(tmp_path / "r.sqlite3")
    url = f"sqlite:///{tmp_path / 'r.sqlite3'}"
    monkeypatch.delenv("USER", raising=False)
    runner = CliRunner()
    refused = runner.invoke(main, ["review", "resolve", review_id, "--as", "failed", "--note",
                                   "x", "--store", url])
    assert refused.exit_code == 2 and "--by NAME" in refused.output
    explicit = runner.invoke(main, ["review", "resolve", review_id, "--as", "failed", "--note",
                                    "x", "--by", "kim", "--store", url])
    assert explicit.exit_code == 0 and "by kim" in explicit.output


def test_purge_older_than_takes_every_spelling(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'r.sqlite3'}"
    runner = CliRunner()
    for spelling, hours in (("30d", 720), ("P30D", 720), ("1d12h", 36), ("PT36H", 36)):
        result = runner.invoke(main, ["receipts", "purge", "--store", url, "--older-than",
                                      spelling])
        assert result.exit_code == 0 and f"older than {hours}h" in result.output
    bad = runner.invoke(main, ["receipts", "purge", "--store", url, "--older-than", "30 days"])
    assert bad.exit_code == 2 and "--older-than" in bad.output and "1h30m" in bad.output
