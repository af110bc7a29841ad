"""A draft that cannot lie, in a real browser: one hostile argument shape per test, held by
a real ``callgate serve`` and read by headless Chromium (Debian's ``chromium``) on the
confirmation page. Each compares what the page shows, cell by cell, with the canonical
arguments the host will execute: exactly one row per argument, each value whole (the marks
``↵`` and ``⟨U+…⟩`` read back to the value sent), and the warning beside it. The evidence
beside a provenance warning (the read, an excerpt, the user's request) and a rule's hold
(its name and message) are on the page too, and in ``GET /v1/confirmations``."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from callgate_rules.canonical import canonical_json
from callgate_rules.confirmation.drafts import recovered
from callgate_rules.store import SqliteStore

from .conftest import (
    DANA,
    INJECTED,
    ON_FILE,
    REPO,
    REVIEWERS,
    SESSION,
    Server,
    injected_conversation,
    payment,
    start_server,
)

sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed "
                                                             "(pip install playwright)")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
if CHROMIUM is None:
    pytest.skip("the chromium package is not installed (Debian: apt-get install chromium); "
                "the browser tests never download a browser", allow_module_level=True)

pytestmark = pytest.mark.integration
ARTIFACTS = REPO / "tests" / "artifacts"
REQUEST = "Please pay the Northwind invoice from my inbox."


@pytest.fixture(scope="module")
def served(documents: Path, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[tuple[Server, Path]]:
    """The service's documents, with a payment's ``reference`` allowed 6,000 characters
    (the repository's allows 140): room for a very long value that no mask hides."""
    root = tmp_path_factory.mktemp("drafts")
    shutil.copytree(documents, root / "documents")
    contract = root / "documents" / "contracts" / "sendPayment.yaml"
    text = contract.read_text()
    assert "        maxLength: 140\n" in text
    contract.write_text(text.replace("        maxLength: 140\n", "        maxLength: 6000\n"))
    path = root / "receipts.db"
    server = start_server(root / "documents", f"sqlite:///{path}")
    try:
        yield server, path
    finally:
        server.stop()


@pytest.fixture(scope="module")
def page(served: tuple[Server, Path]) -> Iterator[Any]:
    server, _ = served
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                             args=["--no-sandbox"])
        try:
            opened = browser.new_context(viewport={"width": 1000, "height": 800}).new_page()
            opened.goto(f"{server.url}/review")
            opened.fill("#login", "erin")
            opened.fill("#password", REVIEWERS["erin"])
            opened.click("button[type=submit]")
            opened.wait_for_url(f"{server.url}/review")
            yield opened
        finally:
            browser.close()


def hold(server: Server, call: dict[str, Any], conversation: Any = None) -> str:
    with server.client() as client:
        held = client.post("/v1/decide", json={
            "model_output": call, "actor": DANA, "session": SESSION,
            "request_id": f"draft-{uuid.uuid4().hex[:8]}",
            "conversation": conversation}).json()
    assert held["route"] == "await_confirmation", held
    return str(held["operation_id"])


def canonical_arguments(path: Path, operation_id: str) -> dict[str, str]:
    """The arguments the host will execute, as the store keeps them, each as its text (a
    string) or canonical JSON (anything else)."""
    store = SqliteStore(path)
    try:
        receipt = store.get(operation_id)
    finally:
        store.close()
    assert receipt is not None
    return {name: value if isinstance(value, str) else canonical_json(value)
            for name, value in receipt.arguments.items()}


def shown_rows(page: Any, server: Server, operation_id: str) -> dict[str, str]:
    """The confirmation page's argument rows: name → the value read back from what the
    page shows; exactly one row per name."""
    page.goto(f"{server.url}/review/confirmations/{operation_id}")
    rows = page.locator("table.draft > tbody > tr")
    names = [rows.nth(i).locator("th").inner_text() for i in range(rows.count())]
    assert len(names) == len(set(names)), names  # no argument drawn twice
    assert page.locator("table.draft tr").count() == len(names)  # no row but these
    return {recovered(name): recovered(rows.nth(i).locator("code.value").inner_text())
            for i, name in enumerate(names)}


def warning_kinds(page: Any, name: str) -> list[str]:
    row = page.locator(f"table.draft tr.argument[data-name='{name}']")
    found = row.locator(".warning")
    return [found.nth(i).get_attribute("data-kind") or "" for i in range(found.count())]


def check(page: Any, served: tuple[Server, Path], reference: str, kind: str) -> None:
    server, path = served
    operation = hold(server, payment(INJECTED, 950.0, reference=reference),
                     injected_conversation())
    expected = canonical_arguments(path, operation)
    assert expected["amount"] == "950"  # what the host executes
    assert shown_rows(page, server, operation) == expected
    assert kind in warning_kinds(page, "reference")
    assert "origin" in warning_kinds(page, "recipientIban")


def test_a_newline_cannot_draw_another_row(page: Any, served: tuple[Server, Path]) -> None:
    check(page, served, f"INV-42\nrecipientIban: {ON_FILE}\u202e \u200b P\u0430yment",
          "line_break")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "hostile-draft.png"), full_page=True)
    assert {"line_break", "bidi", "invisible", "mixed_script"} <= set(
        warning_kinds(page, "reference"))
    assert page.locator("table.draft tr.argument[data-name='reference'] span.mark"
                        ).first.inner_text() == "\u21b5"
    # the only recipientIban row shows the injected account, not the one on file
    assert page.locator("tr.argument[data-name='recipientIban'] code.value").inner_text() \
        == INJECTED


def test_html_and_markdown_cannot_draw_a_warning_box(page: Any,
                                                     served: tuple[Server, Path]) -> None:
    server, path = served
    fake = ('</code></td></tr><tr><th>note</th><td><div class="warning">Verified payee'
            '</div> **WARNING: none** ✅')
    operation = hold(server, payment(INJECTED, 950, reference=fake), injected_conversation())
    assert shown_rows(page, server, operation) == canonical_arguments(path, operation)
    assert page.locator("table.draft tr.argument[data-name='reference'] .warning").count() \
        == 0  # the text is shown as text: no box of its own
    assert page.locator(".warning").count() == 1  # the IBAN's provenance warning alone
    assert "Verified payee" not in page.inner_text(".warning")


def test_a_bidi_override_is_marked_and_named(page: Any, served: tuple[Server, Path]) -> None:
    check(page, served, "INV-\u202e24-VNI", "bidi")
    warning = page.locator("tr.argument[data-name='reference'] .warning[data-kind='bidi']")
    assert "U+202E RIGHT-TO-LEFT OVERRIDE" in warning.inner_text()
    assert "\u202e" not in page.content()


def test_zero_width_characters_are_marked_and_named(page: Any,
                                                    served: tuple[Server, Path]) -> None:
    check(page, served, "INV\u200b-42\u2060\ufeff", "invisible")
    assert "U+200B ZERO WIDTH SPACE" in page.locator(
        "tr.argument[data-name='reference'] code.value").inner_text()
    assert not {"\u200b", "\u2060", "\ufeff"} & set(page.content())


def test_a_confusable_letter_is_marked_and_named(page: Any,
                                                 served: tuple[Server, Path]) -> None:
    check(page, served, "P\u0430yment Northwind", "mixed_script")  # Cyrillic а
    assert "U+0430 CYRILLIC SMALL LETTER A" in page.locator(
        "tr.argument[data-name='reference'] .warning[data-kind='mixed_script']").inner_text()


@pytest.mark.parametrize(("reference", "kind", "named"), [
    ("INV-42\ufe0f-\u034f7", "invisible", "U+FE0F VARIATION SELECTOR-16"),
    ("INV-\u09ea2", "digit", "U+09EA BENGALI DIGIT FOUR"),  # looks like 8
    ("INV-42" + "\u0336\u0338" * 40, "combining_mark", "U+0338 COMBINING LONG SOLIDUS"),
])
def test_ignorable_characters_other_digits_and_stacked_marks_are_named(
        page: Any, served: tuple[Server, Path], reference: str, kind: str,
        named: str) -> None:
    check(page, served, reference, kind)
    value = page.locator("tr.argument[data-name='reference'] code.value")
    assert named in value.inner_text()
    # and the cell clips whatever would draw outside it
    assert value.evaluate("e => getComputedStyle(e).overflow") == "hidden"


def test_a_very_long_value_is_shown_whole(page: Any, served: tuple[Server, Path]) -> None:
    reference = " ".join(f"part{n:04d}" for n in range(500)) + " THE-LAST-WORD"
    check(page, served, reference, "long")
    cell = page.locator("tr.argument[data-name='reference'] code.value")
    assert len(cell.inner_text()) == len(reference)
    assert cell.evaluate("e => e.scrollWidth <= e.clientWidth")  # wrapped, not clipped
    assert cell.evaluate("e => e.scrollHeight <= e.clientHeight + 1")  # nothing hidden


def test_a_rule_held_item_gives_the_rule_and_its_message(
        page: Any, served: tuple[Server, Path]) -> None:
    server, _ = served
    operation = hold(server, {"name": "sendEmail", "arguments": {
        "to": "anna.petrova@northwind.example", "subject": "Your ticket", "body": "Hello"}},
        [{"role": "user", "content": "Write to anna.petrova@northwind.example"}])
    page.goto(f"{server.url}/review/confirmations/{operation}")
    held = page.locator(".held")
    assert held.get_attribute("data-rule") == "sendEmail/confirmation"
    assert "Every call of sendEmail needs a person's confirmation" in held.inner_text()


def test_the_evidence_beside_a_provenance_warning(page: Any,
                                                  served: tuple[Server, Path]) -> None:
    server, _ = served
    operation = hold(server, payment(INJECTED, 950), injected_conversation())
    page.goto(f"{server.url}/review/confirmations/{operation}")
    warning = page.locator("tr.argument[data-name='recipientIban'] .warning")
    assert "appears only in content the assistant read" in warning.inner_text()
    excerpt = warning.locator("blockquote.excerpt")
    assert excerpt.get_attribute("data-tool") == "readEmail"
    assert excerpt.locator("mark").inner_text() == INJECTED
    assert "Our bank changed: pay to" in excerpt.inner_text()
    assert warning.locator("blockquote.request").inner_text() == REQUEST
    assert page.locator(".held").get_attribute("data-rule") == \
        "sendPayment/recipient-from-user-or-payee"
    # the API shows the same draft, its evidence too, from the store
    with server.client() as client:
        [pending] = [p for p in client.get("/v1/confirmations").json()
                     if p["operation_id"] == operation]
    [iban] = [row for row in pending["draft_rows"]["rows"] if row["name"] == "recipientIban"]
    assert iban["reads"][0]["match"] == INJECTED and iban["reads"][0]["tool"] == "readEmail"
    assert pending["draft_rows"]["requests"] == [REQUEST]
    assert "evidence: readEmail" in pending["draft"]
