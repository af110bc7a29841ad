"""cel-go's encoders extension (``ext.Encoders``): ``base64.encode`` and ``base64.decode``
(standard alphabet; decoding also accepts text without its ``=`` padding, as cel-go's
does), per ext/encoders.go and ``encoders_ext.textproto``.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from callgate_rules.cel.errors import CelEvaluationError
from callgate_rules.cel.library.arguments import typed
from callgate_rules.cel.library.signatures import Function, global_

LIBRARY = "encoders"


def encode(data: Any) -> str:
    (value,) = typed("base64.encode", (data,), ("bytes",))
    return base64.b64encode(bytes(value)).decode("ascii")


def decode(text: Any) -> bytes:
    (value,) = typed("base64.decode", (text,), ("string",))
    if not value.isascii():
        raise CelEvaluationError("base64.decode: illegal base64 data: non-ASCII character")
    padded = value + "=" * (-len(value) % 4) if "=" not in value else value
    try:
        return base64.b64decode(padded, validate=True)
    except (binascii.Error, ValueError) as error:
        raise CelEvaluationError(f"base64.decode: illegal base64 data: {error}") from None


FUNCTIONS: tuple[Function, ...] = (
    Function("base64.encode", LIBRARY, (global_("base64_encode_bytes", "bytes", "string"),),
             encode, "bytes as standard base64 text"),
    Function("base64.decode", LIBRARY, (global_("base64_decode_string", "string", "bytes"),),
             decode, "standard base64 text (padding optional) as bytes"),
)
