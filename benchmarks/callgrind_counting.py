"""Instructions per operation, counted by callgrind between marks inside one process.

Every benchmark that counts instructions counts them here, one way.

Why not the difference of two processes. The benchmarks used to run the work N = 200 and
N = 2,200 times in two processes under valgrind and divide the difference of the totals by
2,000. That holds only if the two processes do the same work apart from the 2,000
operations, and nothing checked it: whatever one process does once and the other does not
lands in the difference whole. Compiling the bytecode of a module edited since the last
run is the usual culprit (the first of the two processes writes ``__pycache__``, the second
reads it: in a tree other people edit while one measures, any run may pay it), and so is a
load cache filled by one and read by the other. One such count printed 30,882 instructions
for a decision that costs about 104,000.

How it counts instead. The counted process calls ``mark()`` (a foreign call through ctypes
that does nothing) before and after each window of work, and valgrind runs with
``--dump-before=ffi_call``: each mark writes the counts since the previous one to a file of
its own (a part). Start-up, imports, compilation and warm-up fall before the first mark and
are never counted. ``count_windows`` counts two windows of the same number of operations
and then an empty one (what a mark and the loop's call cost, taken off the two); the two
windows must agree within ``TOLERANCE`` (2%) or ``count`` refuses to give a figure
(``CountRefused``): a difference means something ran in one window and not the other (a
cache filled, a module imported late, a collection of the whole heap), and a figure made of
it judges nothing. The number of parts is checked too: work that itself calls through
ctypes would split a window (psycopg's pure-Python implementation does; install
``psycopg[binary]``).

Why not the other ways. callgrind's client requests (``CALLGRIND_ZERO_STATS``,
``CALLGRIND_DUMP_STATS``) are instructions a C program inlines, which Python cannot issue;
``--toggle-collect=<function>`` collects only in the thread that entered the function, so
a write's executor thread would go uncounted; ``callgrind_control -z``/``-d`` from another
process act when valgrind next polls for commands, at no precise point of the work.

In the counted process::

    count_windows(lambda count: run(count), operations)

and in the measuring one::

    per_operation = count([sys.executable, script, "--inner", ...], operations, what="...")
"""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

# The foreign function every ctypes call goes through, whatever it calls.
MARK_FUNCTION = "ffi_call"
# Two windows of the same work counted in one process agree to a few hundredths of a per
# cent when nothing but the work runs in them (2026-12-05: 0.03% for a decision), and to
# about 1% for writes to SQLite (its WAL checkpoints, one every thousand pages, fall in one
# window or the other); 2% is above both and far below what a missed start-up cost or a
# late import makes (the miscount above was 70%).
TOLERANCE = 0.02
WINDOWS = 2  # windows of work; then one empty window, the marks' own cost
# Counted processes start alike: no load cache (a first run would compile and write it),
# one hash seed (dictionaries' layouts move with it).
SAME_START = {"CALLGATE_CACHE_DIR": "", "PYTHONHASHSEED": "0"}

_NOTHING = ctypes.pythonapi.Py_IsInitialized  # a foreign call with no effect: the mark


class CountRefused(SystemExit):
    """A count that cannot be trusted, with why; raised instead of printing a figure."""


def valgrind_missing() -> str | None:
    """Why instructions cannot be counted here, or None when valgrind is installed."""
    if shutil.which("valgrind") is None:
        return "valgrind is not installed (apt-get install valgrind)"
    return None


def mark() -> None:
    """Ends one counted part and starts the next (valgrind dumps at each ``ffi_call``)."""
    _NOTHING()


def count_windows(run: Callable[[int], object], operations: int) -> None:
    """In the counted process, after its warm-up: ``run(operations)`` in each of two
    windows, then ``run(0)`` in an empty one, each between marks."""
    mark()
    for _ in range(WINDOWS):
        run(operations)
        mark()
    run(0)
    mark()


def count(command: Sequence[str], operations: int, *, what: str,
          env: dict[str, str] | None = None, cwd: str | Path | None = None) -> float:
    """Instructions per operation of ``command`` (a process that calls ``count_windows``
    once with ``operations``), run under callgrind with ``SAME_START``.

    Raises ``CountRefused`` when the process fails, marks other than expected, or its two
    windows disagree by more than ``TOLERANCE``; ``what`` names the work in the message.
    """
    with tempfile.TemporaryDirectory(prefix="callgate-callgrind-") as directory:
        out = Path(directory) / "callgrind.out"
        done = subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
             f"--dump-before={MARK_FUNCTION}", *command],
            capture_output=True, text=True, cwd=cwd,
            env={**(os.environ if env is None else env), **SAME_START})
        if done.returncode != 0:
            raise CountRefused(f"{what} failed under valgrind:\n{done.stderr[-3000:]}")
        parts = read_parts(Path(directory))
    return agreeing(windows_of(parts, what=what), operations, what=what)


def read_parts(directory: Path) -> list[int]:
    """The instructions of each part callgrind wrote in ``directory``, in order."""
    numbered: list[tuple[int, int]] = []
    for path in directory.glob("callgrind.out*"):
        text = path.read_text(encoding="utf-8", errors="replace")
        part, summary = re.search(r"^part:\s*(\d+)", text, re.MULTILINE), re.search(
            r"^summary:\s*(\d+)", text, re.MULTILINE)
        if part is None or summary is None:
            raise CountRefused(f"callgrind wrote {path.name} without a part or a summary")
        numbered.append((int(part[1]), int(summary[1])))
    return [instructions for _, instructions in sorted(numbered)]


def windows_of(parts: Sequence[int], *, what: str) -> list[int]:
    """The windows of work among the parts of one counted process, each without the
    marks' own cost (the empty window). The parts are: before the first mark, the
    ``WINDOWS`` windows, the empty window, after the last mark."""
    expected = WINDOWS + 3
    if len(parts) != expected:
        raise CountRefused(
            f"{what}: callgrind wrote {len(parts)} parts where {expected} were expected; "
            f"the counted work calls {MARK_FUNCTION} itself (a ctypes call: psycopg's "
            "pure-Python implementation makes them, install psycopg[binary]) or the "
            "process did not call count_windows once")
    empty = parts[WINDOWS + 1]
    return [window - empty for window in parts[1:WINDOWS + 1]]


def agreeing(windows: Sequence[int], operations: int, *, what: str,
             tolerance: float = TOLERANCE) -> float:
    """Instructions per operation over ``windows`` (each ``operations`` operations), when
    the most and least of them differ by at most ``tolerance`` of the least."""
    if operations <= 0 or not windows:
        raise CountRefused(f"{what}: nothing was counted ({operations} operations, "
                           f"{len(windows)} windows)")
    least, most = min(windows), max(windows)
    if least <= 0 or (most - least) > tolerance * least:
        counts = ", ".join(f"{window / operations:,.0f}" for window in windows)
        raise CountRefused(
            f"{what}: two windows of {operations} operations in one process counted "
            f"{counts} instructions per operation, more than {tolerance:.0%} apart; "
            "something ran in one and not the other (a cache filled, a late import, a "
            "collection of the whole heap): run again on an unchanged tree, or warm up "
            "longer")
    return sum(windows) / len(windows) / operations
