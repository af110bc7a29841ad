"""YAML mistakes in plain words, at file:line:column, with a hint (issue #30, item 7).

Each case is a mistake a process owner makes while editing a policy — a tab, a key
indented off its column, a list item among keys, a colon in a value, a missing colon, a
quote never closed — and what ``callgate lint`` says about it now, in place of PyYAML's
own wording ("a tab cannot start any token", "expected <block end>, but found
'<block mapping start>'"). And an unquoted ``no`` where a text is expected, which YAML 1.1
reads as ``false``: found where the schema expected a string, said with the hint to quote it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from callgate_rules import Gate, Route
from callgate_rules.cli import main
from callgate_rules.documents.source import parse_yaml_text
from callgate_rules.errors import InputError

REPO = Path(__file__).resolve().parents[2]
CONTRACT = (REPO / "contracts" / "getTicketStatus.yaml").read_text()


@pytest.mark.parametrize(("text", "place", "words"), [
    pytest.param("a:\n  b: 1\n\tc: 2\n", "3:1",
                 "line 3 is indented with a tab; YAML indents with spaces: replace the tab "
                 "with spaces", id="tab"),
    pytest.param("a: {b: 1}\t\tc: 2\n", "1:10",
                 "line 1 has a tab where YAML expects a value", id="tab-inside"),
    pytest.param("a:\n  b: 1\n c: 2\n", "3:2",
                 "line 3 is not in line with the keys before it (the mapping that starts at "
                 "line 1): the keys of one mapping start in the same column", id="indentation"),
    pytest.param("a:\n  b: 1\n  - c\n", "3:3",
                 "line 3 starts a list item ('- ') among the keys of the mapping that starts "
                 "at line 2", id="item-among-keys"),
    pytest.param("title: Note: call back\n", "1:12",
                 "line 1 has a ':' followed by a space inside a value", id="colon-in-value"),
    pytest.param("a:\n  - x\n  y\n  z: 1\n", "3:3",
                 "line 3 holds a key without a ':'", id="missing-colon"),
    pytest.param('a: "open\nb: 1\n', "1:4",
                 "the quoted value that opens at line 1 is never closed: add the closing quote",
                 id="unclosed-quote"),
    pytest.param("a: *nowhere\n", "1:4", "*nowhere refers to no anchor", id="alias"),
])
def test_a_yaml_mistake_is_said_in_plain_words(text: str, place: str, words: str) -> None:
    with pytest.raises(InputError) as raised:
        parse_yaml_text(text, "policy.yaml")
    message = str(raised.value)
    assert message.startswith(f"policy.yaml:{place}: error YAML {words}"), message
    for machinery in ("<block end>", "<block mapping start>", "cannot start any token"):
        assert machinery not in message


def test_lint_reports_a_tab_at_its_place(tmp_path: Path) -> None:
    broken = CONTRACT.replace("\n  effect:", "\n\teffect:", 1)
    number = broken.splitlines().index("\teffect: read") + 1 \
        if "\teffect: read" in broken.splitlines() else None
    assert number is not None
    (tmp_path / "contract.yaml").write_text(broken)
    result = CliRunner().invoke(main, ["lint", str(tmp_path)])
    assert result.exit_code == 1
    assert (f"contract.yaml:{number}:1: error yaml line {number} is indented with a tab; "
            "YAML indents with spaces") in result.stdout


def test_an_unquoted_no_where_a_text_is_expected_says_to_quote_it(tmp_path: Path) -> None:
    broken = CONTRACT.replace("owner: ", "owner: no #", 1)
    (tmp_path / "contract.yaml").write_text(broken)
    result = CliRunner().invoke(main, ["lint", str(tmp_path)])
    assert result.exit_code == 1
    number = next(index for index, line in enumerate(broken.splitlines(), 1)
                  if "owner: no" in line)
    assert (f":{number}:" in result.stdout and "metadata.owner: False is not of type "
            "'string'. YAML reads an unquoted no as the boolean false: to mean the text, "
            "write it in quotes (\"no\")") in result.stdout


def test_a_quoted_false_gets_no_quoting_hint(tmp_path: Path) -> None:
    broken = CONTRACT.replace("owner: ", "owner: false #", 1)
    (tmp_path / "contract.yaml").write_text(broken)
    result = CliRunner().invoke(main, ["lint", str(tmp_path)])
    assert "YAML reads an unquoted false as the boolean false" in result.stdout
    quoted = CONTRACT.replace("owner: ", "owner: 'no' #", 1)
    (tmp_path / "contract.yaml").write_text(quoted)
    assert "unquoted" not in CliRunner().invoke(main, ["lint", str(tmp_path)]).stdout


POLICY = """\
apiVersion: callgate/v1
kind: AccessPolicy
metadata: {name: access, version: "1", owner: t@example.com, description: everyone}
spec:
  actor: {type: object, required: [id, user], properties: {id: {type: string}, user: {type: string}}}
  rules: [{name: anyone, effect: allow, tools: ["*"], when: "true"}]
"""


def test_an_actor_file_with_user_no_is_refused_with_the_hint(tmp_path: Path) -> None:
    (tmp_path / "contracts").mkdir()
    (tmp_path / "policies").mkdir()
    (tmp_path / "contracts" / "getTicketStatus.yaml").write_text(CONTRACT)
    (tmp_path / "policies" / "access.yaml").write_text(POLICY)
    (tmp_path / "policies" / "routing.yaml").write_text(
        (REPO / "policies" / "routing.yaml").read_text())
    actor = parse_yaml_text("id: U-1\nuser: no\n", "actor.yaml")[0].data
    assert actor == {"id": "U-1", "user": False}  # what YAML 1.1 reads
    gate = Gate.from_paths(tmp_path / "contracts", tmp_path / "policies")
    decision = gate.check({"name": "getTicketStatus", "arguments": {"ticketId": "T-1001"}},
                          actor=actor, now=datetime(2026, 12, 1, tzinfo=UTC))
    assert decision.route == Route.REFUSE
    assert "user: False is not of type 'string'. YAML reads an unquoted no (or off) as the " \
           "boolean false" in decision.log["detail"]
