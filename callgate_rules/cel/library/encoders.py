"""cel-go's encoders extension (``ext.Encoders``): ``base64.encode`` and ``base64.decode``
(standard alphabet; decoding also accepts text without its ``=`` padding, as cel-go's
does), per ext/encoders.go and ``encoders_ext.textproto``.
"""

from __future__ import annotations

import base64
import re
from typing import Any

from callgate_rules.cel.errors import CelEvaluationError
from callgate_rules.cel.library.arguments import typed
from callgate_rules.cel.library.signatures import Function, global_

LIBRARY = "encoders"


def encode(data: Any) -> str:
    (value,) = typed("base64.encode", (data,), ("bytes",))
    return base64.b64encode(bytes(value)).decode("ascii")


# Go's StdEncoding (padded) or, failing that, RawStdEncoding (unpadded), as cel-go tries.
_PADDED = re.compile(r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?")
_UNPADDED = re.compile(r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2,3})?")


def decode(text: Any) -> bytes:
    (value,) = typed("base64.decode", (text,), ("string",))
    if _PADDED.fullmatch(value):
        return base64.b64decode(value)
    if _UNPADDED.fullmatch(value):
        return base64.b64decode(value + "=" * (-len(value) % 4))
    raise CelEvaluationError(f"base64.decode: illegal base64 data: {value[:40]!r}")


FUNCTIONS: tuple[Function, ...] = (
    Function("base64.encode", LIBRARY, (global_("base64_encode_bytes", "bytes", "string"),),
             encode, "bytes as standard base64 text"),
    Function("base64.decode", LIBRARY, (global_("base64_decode_string", "string", "bytes"),),
             decode, "standard base64 text (padding optional) as bytes"),
)
