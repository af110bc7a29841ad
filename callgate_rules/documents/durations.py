"""Durations as every document kind and the CLI write them: seconds as a number, a
string of units largest first (``500ms``, ``5s``, ``2m``, ``1h30m``, ``1d``, ``1.5h``), or
ISO 8601 (``PT5S``, ``PT1H30M``, ``P1D``, ``P1W``).

ISO 8601 years and months are refused: their length depends on the date they start at, and
a document's duration has none.
"""

from __future__ import annotations

import re

_NUMBER = r"[0-9]+(?:\.[0-9]+)?"


def _ordered(units: tuple[str, ...]) -> str:
    """At least one of ``units``, each at most once, in their order (no lookahead: RE2)."""
    return "|".join(f"{_NUMBER}{unit}" + "".join(f"(?:{_NUMBER}{later})?"
                                                 for later in units[index + 1:])
                    for index, unit in enumerate(units))


# Units largest first, each at most once: 1d2h, 1h30m, 2m30s, 1s500ms.
UNITS_PATTERN = _ordered(("d", "h", "m", "s", "ms"))
_CLOCK = _ordered(("H", "M", "S"))
ISO_PATTERN = f"P(?:(?:{_ordered(('W', 'D'))})(?:T(?:{_CLOCK}))?|T(?:{_CLOCK}))"
# The JSON schemas' pattern for a duration string (common.json#/$defs/duration).
SCHEMA_PATTERN = f"^(?:{UNITS_PATTERN}|{ISO_PATTERN})$"

_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_UNITS = re.compile(r"(" + _NUMBER + r")(ms|d|h|m|s)")
_UNITS_WHOLE = re.compile(f"(?:{UNITS_PATTERN})")
_ISO_WHOLE = re.compile(ISO_PATTERN)
_ISO_DATE = re.compile(r"(" + _NUMBER + r")([WD])")
_ISO_TIME = re.compile(r"(" + _NUMBER + r")([HMS])")
EXAMPLES = "500ms, 5s, 2m, 1h30m, 1d or PT5S"


def parse_duration(value: float | int | str) -> float:
    """``5``, ``"500ms"``, ``"1h30m"``, ``"1d"``, ``"PT5S"``, ``"P1DT2H"`` → seconds."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a duration such as {EXAMPLES}")
    if isinstance(value, int | float):
        return float(value)
    text = value.strip()
    if _UNITS_WHOLE.fullmatch(text):
        return sum(float(number) * _SECONDS[unit] for number, unit in _UNITS.findall(text))
    if _ISO_WHOLE.fullmatch(text):
        date, _, time = text[1:].partition("T")
        return (sum(float(n) * _SECONDS[u.lower()] for n, u in _ISO_DATE.findall(date))
                + sum(float(n) * _SECONDS[u.lower()] for n, u in _ISO_TIME.findall(time)))
    if re.fullmatch(r"P(?:[0-9.]+[YM])+.*", text):
        raise ValueError(f"{value!r}: years and months have no fixed length; write days "
                         "(P30D) or weeks (P4W)")
    raise ValueError(f"{value!r} is not a duration such as {EXAMPLES} (units largest "
                     "first, each once)")
