"""``Gate(secret=...)``: bytes, or a str taken as its UTF-8 bytes (as ``CALLGATE_SECRET`` is
read); anything else refused in one line at construction, never a TypeError deep in hmac."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from callgate_rules.pipeline.gate import Gate


@given(st.text(min_size=1, max_size=64))
def test_a_str_secret_is_its_utf8_bytes_and_seals_as_they_do(gate: Any, secret: str) -> None:
    as_text = Gate(gate.config, secret=secret)
    as_bytes = Gate(gate.config, secret=secret.encode("utf-8", "surrogatepass"))
    assert as_text.secret == as_bytes.secret
    sealed = as_text.sealer.seal("refund sent", "call_1")
    assert as_bytes.sealer.is_gates_own(sealed, "call_1")


def test_a_str_secret_confirms_what_a_bytes_secret_issued(gate: Any) -> None:
    from callgate_rules import confirmation
    from callgate_rules.errors import ConfirmationError

    actor = {"id": "U-7", "tenant": "acme"}
    now = datetime(2026, 11, 29, 12, tzinfo=UTC)
    issued = Gate(gate.config, secret="one deployment's secret")
    checked = Gate(gate.config, secret=b"one deployment's secret")
    other = Gate(gate.config, secret="another secret")
    token = confirmation.issue(issued.secret, "op_1", actor, "h", now + timedelta(minutes=5))
    assert confirmation.verify(checked.secret, token, actor, "h", now).operation_id == "op_1"
    with pytest.raises(ConfirmationError, match="does not match"):
        confirmation.verify(other.secret, token, actor, "h", now)


@pytest.mark.parametrize("secret", [42, 4.2, ["s"], {"key": "s"}])
def test_any_other_secret_is_refused_in_one_line(gate: Any, secret: Any) -> None:
    with pytest.raises(TypeError) as raised:
        Gate(gate.config, secret=secret)
    message = str(raised.value)
    assert message.startswith("Gate(secret=...) takes bytes or a str (encoded as UTF-8), not "
                              f"{type(secret).__name__}")
    assert "\n" not in message
    assert raised.traceback[-1].name == "secret_bytes"  # raised where it is given, not in hmac
