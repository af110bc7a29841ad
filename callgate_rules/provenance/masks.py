"""Byte masks over a conversation's index text, for a short value that occurs too often to
check one occurrence at a time (a value inside thousands of longer words).

A mask holds one byte per character of the index text, 0 or 1, made in C (``bytes.translate``
over the text's code points, strided slices), and is combined with others as one big integer
(bitwise AND, shifts by whole bytes). For a value of m characters: where it occurs is the AND
of the masks of its characters, each shifted by its place; where an occurrence is on its own
is that, ANDed with "may start here" (no letter or digit right before, or a space between)
and "may end here", shifted by m. The first 1 at or after a position is one ``bytes.find``.
Cost: a few passes over the text per distinct character of the value and per character of
it, all in C — O(n · m) byte operations, for values of at most ``SHORT`` characters.
"""

from __future__ import annotations

from collections.abc import Sequence

SHORT = 64  # longer values occur at most once per 32 characters outside runs: checked singly
_PLANES = 3  # bytes of a code point that can be non-zero (U+10FFFF fits in three)


def _table(byte: int) -> bytes:
    """A ``bytes.translate`` table that maps ``byte`` to 1 and every other byte to 0."""
    return bytes(byte) + b"\x01" + bytes(255 - byte)


_ALNUM = bytes(int(chr(byte).isalnum()) for byte in range(128)) + bytes(128)


class IndexMasks:
    """The masks of one index text: built once, then one call per value."""

    def __init__(self, text: str, space_masks: Sequence[bytes], separator_width: int) -> None:
        self.length = length = len(text)
        encoded = text.encode("utf-32-le", "surrogatepass")
        self._ascii = text.isascii()
        self._planes = [encoded[plane::4] for plane in range(1 if self._ascii else _PLANES)]
        self._ones = int.from_bytes(b"\x01" * length, "little")
        self._characters: dict[str, int] = {}
        alnum = (self._planes[0].translate(_ALNUM) if self._ascii
            else bytes(map(str.isalnum, text)))
        spaces = int.from_bytes(bytes(separator_width).join(space_masks), "little")
        not_alnum = int.from_bytes(alnum, "little") ^ self._ones
        # may start at x: x == 0, no letter or digit at x - 1, or a space right before x
        self._may_start = ((not_alnum << 8 | 1) & self._ones) | spaces
        # may end before e: e == length, no letter or digit at e, or a space right before e
        self._may_end = not_alnum | spaces | 1 << 8 * length

    def on_its_own(self, value: str, starts_word: bool, ends_word: bool) -> bytes:
        """1 at every offset where ``value`` occurs not inside a longer word."""
        found = self._ones
        for place, character in enumerate(value):
            found &= self._character(character) >> 8 * place
        if starts_word:
            found &= self._may_start
        if ends_word:
            found &= self._may_end >> 8 * len(value)
        return found.to_bytes(self.length, "little")

    def _character(self, character: str) -> int:
        """1 where the text holds ``character``: each byte of its code point compared in
        its own plane of the text (every fourth byte of UTF-32), the planes ANDed."""
        mask = self._characters.get(character)
        if mask is None:
            code = ord(character).to_bytes(4, "little")
            if self._ascii and code[0] > 127 or any(code[len(self._planes):_PLANES]):
                mask = 0
            else:
                mask = self._ones
                for plane, byte in zip(self._planes, code, strict=False):
                    mask &= int.from_bytes(plane.translate(_table(byte)), "little")
            self._characters[character] = mask
        return mask
