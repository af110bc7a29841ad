"""A decision's line in the decision log, and the link from an executed write's receipt to
that line (``Gate.recorded``).

The line is written once the decision has ended, so for a write, after its receipt is final.
The receipt of a write this decision executed (``receipt_links.executed_write``: its route
``return_result``, no error, an operation ID) then keeps the line's hash
(``Receipt.log_line``): one statement, for executed writes only and only with a decision
log. A later decision about the same operation (the receipt returned again) never replaces
it. A store that cannot keep it, or a host's own store written before ``link_log_line``
was part of the protocol, is counted (``log_line_not_linked``), never raised: the
write ran and its line is written; the line names the receipt's ``operation_id`` all the
same.
"""

from __future__ import annotations

from collections.abc import Callable

from callgate_rules.decision_log import DecisionLog
from callgate_rules.errors import StoreError
from callgate_rules.pipeline.decision import Decision
from callgate_rules.receipt_links import executed_write
from callgate_rules.store.base import ReceiptStore


def logged(log: DecisionLog, decision: Decision, bundle: str | None,
           store: Callable[[], ReceiptStore], count: Callable[[str], None]) -> None:
    """Write ``decision``'s line (with the ``bundle`` that made it, if any) and link an
    executed write's receipt to it."""
    line = log.write(decision.log if bundle is None else {**decision.log, "bundle": bundle})
    operation_id = decision.operation_id
    if operation_id is None or not executed_write(decision.route, decision.error_class,
                                                  operation_id):
        return
    link = getattr(store(), "link_log_line", None)  # a host's own store may predate it
    if link is None:
        count("log_line_not_linked")
        return
    try:
        link(operation_id, line)
    except StoreError:
        count("log_line_not_linked")
