"""What ``verify``, ``reconcile.match`` and look-ups read of a tool's answer: one rule.

An executor returns whatever its destination answered, and the receipt keeps that whole
(a client given the receipt again gets the answer as it came). Most destinations answer
with data, which rules read as it is. An MCP tool answers with an envelope instead —
``{"content": [{"type": "text", "text": "{\\"id\\": \\"r_1\\"}"}], "structuredContent":
...}`` — and most MCP servers put their data in the text, as JSON. An executor that
returns such an envelope marks it ``ToolAnswer``; rules then read ``result`` (and
``found``) as ``answer_data`` says:

1. the structured content, when the tool gave one (``structuredContent``);
2. otherwise its text content (the text blocks joined) parsed as JSON, when it is JSON
   (an object that repeats a key stays text: no field depends on which copy would win);
3. otherwise that text;
4. ``None`` when the answer has neither.

So ``has(result.id)`` holds for a tool answering ``{"id": "r_1"}`` as JSON text, and for one
answering it as structured content alike.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from callgate_rules.canonical import unique_keys


class ToolAnswer(dict[str, Any]):
    """An MCP tool result in JSON (wire names), as an executor or finder returns it: kept
    whole in the receipt, read by rules as ``answer_data``."""


def answer_data(envelope: Mapping[str, Any]) -> Any:
    """The data of an MCP tool result (the module's rule)."""
    structured = envelope.get("structuredContent")
    if structured is not None:
        return structured
    blocks = envelope.get("content")
    texts = [block["text"] for block in blocks or ()
             if isinstance(block, Mapping) and block.get("type") == "text"
             and isinstance(block.get("text"), str)] if isinstance(blocks, list) else []
    if not texts:
        return None
    text = "".join(texts)
    try:
        return json.loads(text, object_pairs_hook=unique_keys)
    except (ValueError, RecursionError):  # RepeatedKey is a ValueError
        return text


def readable(result: Any) -> Any:
    """``result`` as rules read it: an MCP answer's data, anything else as it is."""
    return answer_data(result) if isinstance(result, ToolAnswer) else result
