"""What the review page may show of a receipt or a review item: every field the contract's
``spec.mask`` names masked, wherever it would appear.

The page never renders a stored receipt or review item as it is: each view takes its copy
from here. A masked argument is masked at its path in the arguments, at the same path in
the destination's answer, and as a value inside any text the page shows — the draft, the
receipt's detail, the destination's answer, the item's summary, payload and note — the way
the decision log masks (``pipeline.record.Masking``). A receipt of a tool the documents no
longer have keeps its stored texts, with no arguments to mask by.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from callgate_rules.documents.model import GateConfig
from callgate_rules.pipeline.record import Masking, mask
from callgate_rules.store.base import Receipt, ReviewItem


def _masking(config: GateConfig, receipt: Receipt) -> tuple[Masking, Any] | None:
    contract = config.contracts.get(receipt.tool)
    if contract is None or not contract.mask:
        return None
    return Masking(contract, receipt.arguments, as_shown=True), contract


def shown_receipt(config: GateConfig, receipt: Receipt) -> Receipt:
    """The receipt as the page may show it."""
    found = _masking(config, receipt)
    if found is None:
        return receipt
    masking, contract = found
    result = receipt.result
    if isinstance(result, Mapping):
        result = mask(result, contract.mask)
    return replace(receipt, arguments=masking.arguments, result=masking(result),
                   detail=_masked_text(masking, receipt.detail))


def _masked_text(masking: Masking, text: str | None) -> str | None:
    """A stored text masked; a JSON one (a structured draft) masked value by value, so a
    secret is found however JSON escaped it."""
    if not text:
        return text
    try:
        parsed = json.loads(text)
    except ValueError:
        return str(masking(text))
    if not isinstance(parsed, dict | list):
        return str(masking(text))
    return json.dumps(masking(parsed), ensure_ascii=False, separators=(",", ":"))


def shown_item(config: GateConfig, item: ReviewItem, receipt: Receipt | None) -> ReviewItem:
    """The review item as the page may show it: masked by its receipt's arguments, and by
    the arguments its payload carries (a confirmation item of the MCP gateway names its
    operation only in the payload, with the arguments as the model sent them)."""
    contract = config.contracts.get(item.tool if receipt is None else receipt.tool)
    if contract is None or not contract.mask:
        return item
    payload = dict(item.payload)
    carried = payload.get("arguments")
    maskings = [Masking(contract, arguments, as_shown=True) for arguments in (
        None if receipt is None else receipt.arguments,
        carried if isinstance(carried, Mapping) else None) if arguments]
    if isinstance(carried, Mapping):
        payload["arguments"] = mask(carried, contract.mask)
    summary, note = item.summary, item.note
    for masking in maskings:
        summary, note = str(masking(summary)), _masked_text(masking, note)
        payload = masking(payload)
    return replace(item, summary=summary, payload=payload, note=note)
