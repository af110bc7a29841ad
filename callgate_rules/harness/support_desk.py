"""The support desk's destination: one configuration of the simulated destination.

The seven reference tools answer as the support desk's systems do — a follow-up needs a live,
open ticket, an event resolves its contact, an e-mail gets a message ID, a contact search
never leaves the actor's tenant — so the reference contracts' ``verify`` and
``reconcile.match`` see realistic answers. Scenarios choose it with
``destination: support-desk``; every other tool answers generically (``destination.py``).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from callgate_rules.errors import Refused, StateConflict
from callgate_rules.harness.destination import Destination, Record, SimulatedTool
from callgate_rules.pipeline.execute import ExecutionRequest

# Where the destination keeps what the write tools create, next to the world's collections.
FOLLOW_UPS = "follow_ups"
EVENTS = "events"
EMAILS = "emails"
PAYMENTS = "payments"


def _live_ticket(destination: Destination, ticket_id: Any) -> Record:
    ticket = destination.find_record("tickets", ticket_id)
    if ticket is None or "deleted_at" in ticket:
        raise Refused(f"no ticket {ticket_id}")
    return ticket


def _create_follow_up(destination: Destination, request: ExecutionRequest,
                      arguments: Record) -> Record:
    ticket = _live_ticket(destination, arguments["ticketId"])
    # The gate checked this too, but the ticket may have closed since.
    if ticket.get("status") == "closed":
        raise StateConflict(f"ticket {ticket['id']} is closed")
    follow_up: Record = {
        "id": destination.next_id("F"),
        "ticketId": arguments["ticketId"],
        "assigneeId": arguments["assigneeId"],
        "dueAt": arguments["dueAt"],
    }
    if "note" in arguments:
        follow_up["note"] = arguments["note"]
    follow_up["operationId"] = request.operation_id
    destination.records(FOLLOW_UPS).append(copy.deepcopy(follow_up))
    return follow_up


def _create_event(destination: Destination, request: ExecutionRequest,
                  arguments: Record) -> Record:
    resolved = request.records.get("contact")
    # The gate resolves a contact named by its full name; the destination takes IDs.
    contact_id = resolved["id"] if isinstance(resolved, Mapping) else arguments["contact"]
    contact = destination.find_record("contacts", contact_id)
    if contact is None:
        raise Refused(f"no contact {contact_id}")
    event: Record = {
        "id": destination.next_id("E"),
        "contactId": contact["id"],
        "title": arguments["title"],
        "startsAt": arguments["startsAt"],
        "operationId": request.operation_id,
    }
    destination.records(EVENTS).append(copy.deepcopy(event))
    return event


def _send_payment(destination: Destination, request: ExecutionRequest,
                  arguments: Record) -> Record:
    payment: Record = {
        "id": destination.next_id("P"), "iban": arguments["recipientIban"],
        "amount": arguments["amount"], "currency": arguments["currency"],
        "operationId": request.operation_id,
    }
    destination.records(PAYMENTS).append(copy.deepcopy(payment))
    return payment


def _send_email(destination: Destination, request: ExecutionRequest,
                arguments: Record) -> Record:
    message_id = destination.next_id("M")
    destination.records(EMAILS).append({
        "id": message_id, **copy.deepcopy(arguments), "operationId": request.operation_id,
    })
    return {"messageId": message_id, "to": arguments["to"], "subject": arguments["subject"]}


def _get_ticket_status(destination: Destination, request: ExecutionRequest,
                       arguments: Record) -> Record:
    ticket = _live_ticket(destination, arguments["ticketId"])
    return {key: ticket.get(key) for key in ("id", "status", "team", "subject")}


def _search_contacts(destination: Destination, request: ExecutionRequest,
                     arguments: Record) -> list[Record]:
    query = str(arguments["name"]).casefold()
    # No tenant on the actor matches no contact: the search must never widen to all.
    tenant = request.actor.get("tenant")
    return [
        {key: contact.get(key) for key in ("id", "name", "company")}
        for contact in destination.records("contacts")
        if tenant is not None and contact.get("tenant") == tenant
        and query in str(contact.get("name", "")).casefold()
    ]


def _get_invoice(destination: Destination, request: ExecutionRequest,
                 arguments: Record) -> Record:
    number = arguments["invoiceNumber"]
    organization = arguments["organizationId"]
    for invoice in destination.records("invoices"):
        if invoice.get("number") == number and invoice.get("organization") == organization:
            return {key: invoice.get(key)
                    for key in ("number", "organization", "amount", "currency")}
    raise Refused(f"no invoice {number} for {organization}")


# ``echoed``: the fields each contract's ``verify`` compares with the arguments (corrupting
# them makes a wrong answer detectable; sendEmail's verify only asks for a message ID, so its
# corrupted answer is empty). ``edited``: the field a later edit changes, among those each
# contract's ``reconcile.match`` compares.
TOOLS: Mapping[str, SimulatedTool] = MappingProxyType({
    "createFollowUp": SimulatedTool("write", _create_follow_up, collection=FOLLOW_UPS,
                                    echoed=("ticketId", "assigneeId"), edited="dueAt"),
    "createEvent": SimulatedTool("write", _create_event, collection=EVENTS,
                                 echoed=("contactId",), edited="startsAt"),
    "sendEmail": SimulatedTool("write", _send_email, collection=EMAILS, echoed=(),
                               edited="to"),
    "sendPayment": SimulatedTool("write", _send_payment, collection=PAYMENTS,
                                 echoed=("iban",), edited="iban"),
    "getTicketStatus": SimulatedTool("read", _get_ticket_status, echoed=("id",)),
    "searchContacts": SimulatedTool("read", _search_contacts, echoed=("id",)),
    "getInvoice": SimulatedTool("read", _get_invoice, echoed=("number",)),
})
