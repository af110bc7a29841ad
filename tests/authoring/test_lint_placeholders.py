"""``callgate lint``: message placeholders that read a field no call can have, at the
placeholder's own line and column (``lint/placeholders.py``).

Each test writes ``callgate init``'s project (a refund with a look-up whose record schema is
declared), changes one message, and lints it; the expected place is found by searching the
written text for the placeholder, so a test names what it points at.
"""

from __future__ import annotations

import shutil
from importlib import resources
from pathlib import Path

import pytest
from click.testing import CliRunner

from callgate_rules.authoring.lint import lint
from callgate_rules.cli import main
from callgate_rules.documents.compiler import Finding

TEMPLATE = Path(str(resources.files("callgate_rules.authoring").joinpath("templates",
                                                                       "project")))
REPO = Path(__file__).resolve().parents[2]


def project(tmp_path: Path, old: str, new: str, file: str = "contracts/issueRefund.yaml"
            ) -> Path:
    for folder in ("contracts", "policies"):
        shutil.copytree(TEMPLATE / folder, tmp_path / folder)
    path = tmp_path / file
    text = path.read_text()
    assert text.count(old) == 1, old
    path.write_text(text.replace(old, new).replace("OWNER", "o@example.com"))
    return path


def place_of(path: Path, needle: str) -> tuple[int, int]:
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if needle in line:
            return number, line.index(needle) + 1
    raise AssertionError(needle)


def field_findings(tmp_path: Path) -> list[Finding]:
    found = lint([tmp_path / "contracts", tmp_path / "policies"])
    return [f for f in found if f.code == "unknown-placeholder-field"]


def test_a_misspelt_argument_in_a_rule_message_is_an_error_at_its_place(tmp_path: Path) -> None:
    path = project(tmp_path, "message: Order {args.orderId} has", "message: Order {args.ordrId} has")
    [finding] = field_findings(tmp_path)
    line, column = place_of(path, "{args.ordrId}")
    assert (finding.location.path, finding.location.line, finding.location.column) == (
        str(path), line, column)
    assert finding.severity == "error"
    assert finding.message == (
        "issueRefund rule not-refunded-yet message: placeholder {args.ordrId} can never be "
        "filled: args declares no field 'ordrId'; declared: amount, orderId, reason; it would "
        "reach the model as written")
    done = CliRunner().invoke(main, ["lint", str(tmp_path / "contracts"),
                                     str(tmp_path / "policies")])
    assert done.exit_code == 1
    assert f"{path}:{line}:{column}: error unknown-placeholder-field" in done.stdout


def test_a_placeholder_inside_a_folded_message_is_placed_on_its_own_line(tmp_path: Path) -> None:
    path = project(tmp_path, "do not guess another one.", "do not guess {args.orderid}.")
    [finding] = field_findings(tmp_path)
    assert (finding.location.line, finding.location.column) == place_of(path, "{args.orderid}")
    assert finding.message.startswith("issueRefund lookup order message: placeholder "
                                      "{args.orderid} can never be filled")


def test_a_field_of_a_lookups_declared_record(tmp_path: Path) -> None:
    path = project(tmp_path, "message: Order {args.orderId} has already",
                   "message: Order {args.orderId} ({order.statsu}) has already")
    [finding] = field_findings(tmp_path)
    assert (finding.location.line, finding.location.column) == place_of(path, "{order.statsu}")
    assert "order declares no field 'statsu'; declared: customer, id, shop, status, total" \
        in finding.message


def test_a_field_read_inside_a_number(tmp_path: Path) -> None:
    project(tmp_path, "The refund of {args.amount} is", "The refund of {args.amount.value} is")
    [finding] = field_findings(tmp_path)
    assert "args.amount is number, not an object with fields" in finding.message


def test_an_access_policy_message_is_read_against_the_tools_it_names(tmp_path: Path) -> None:
    access = tmp_path / "policies" / "access.yaml"
    project(tmp_path, "name: agents-refund", "name: agents-refund\n      message: No refund of "
            "{args.amout} for you.", file="policies/access.yaml")
    [finding] = field_findings(tmp_path)
    assert finding.location.path == str(access)
    assert (finding.location.line, finding.location.column) == place_of(access, "{args.amout}")
    assert "args declares no field 'amout'" in finding.message


@pytest.mark.parametrize("placeholder", ["{args.orderId}", "{actor.id}", "{tool}",
                                         "{order.total}", "{nothing.at.all}"])
def test_what_may_be_filled_is_left_alone(tmp_path: Path, placeholder: str) -> None:
    """Declared fields, other variables, and roots no schema describes (which variables
    exist is the unknown-placeholder warning's business) are not this check's findings."""
    project(tmp_path, "message: Order {args.orderId} has",
            f"message: Order {placeholder} has")
    assert field_findings(tmp_path) == []


def test_an_open_object_may_hold_any_field(tmp_path: Path) -> None:
    """The arguments are closed by the gate (a field they do not declare is refused as
    unexpected_argument), but an object inside them may be open."""
    project(tmp_path, "      reason:\n", "      meta: {type: object}\n      reason:\n")
    path = tmp_path / "contracts" / "issueRefund.yaml"
    path.write_text(path.read_text().replace("Order {args.orderId} has",
                                             "Order {args.meta.anything} {args.nope} has"))
    [finding] = field_findings(tmp_path)
    assert "{args.nope}" in finding.message


@pytest.mark.parametrize("folder", ["", "examples/banking", "examples/quickstart"])
def test_the_shipped_documents_have_none(folder: str) -> None:
    root = REPO / folder
    found = lint([root / "contracts", root / "policies"])
    assert [f for f in found if f.code == "unknown-placeholder-field"] == []
