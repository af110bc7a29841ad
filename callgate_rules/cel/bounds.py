"""callgate's own bounds on what a CEL function may make, shared by the function that
enforces one (``library``) and the cost estimate that counts on it (``cost``)."""

from __future__ import annotations

# The most elements lists.range makes, so that lists.range(9223372036854775807) is an
# error, not an attempt to fill the memory.
MOST_RANGE = 1_000_000
