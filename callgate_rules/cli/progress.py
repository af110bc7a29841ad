"""A progress bar for long work (``lint`` over many files, ``test``, ``simulate``, ``eval``,
``replay``): on stderr, only when stderr is a terminal and the output is not JSON, so that
a pipe, a CI log or ``--format json`` never holds one."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TextIO

import click

# Fewer items than this finish before a bar would be worth drawing.
MINIMUM = 2


def shows_progress(output_format: str = "text", stream: TextIO | None = None) -> bool:
    """Is a progress bar wanted: text output, and stderr a terminal?"""
    stream = stream if stream is not None else sys.stderr
    return output_format != "json" and bool(getattr(stream, "isatty", lambda: False)())


@contextmanager
def progress(length: int, label: str, output_format: str = "text",
             stream: TextIO | None = None) -> Iterator[Callable[[int], None] | None]:
    """``with progress(n, "replaying") as advanced:`` — ``advanced(k)`` moves the bar by
    ``k``; it is None when no bar is shown (not a terminal, JSON, or too little work)."""
    stream = stream if stream is not None else sys.stderr
    if length < MINIMUM or not shows_progress(output_format, stream):
        yield None
        return
    with click.progressbar(length=length, label=label, file=stream,
                           show_eta=True, show_pos=True) as bar:
        yield bar.update
