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
import gc
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
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


# -- a server, counted from outside ---------------------------------------------------------
# A server's work arrives from a client in another process, so the counted process cannot
# call ``count_windows`` itself: it marks when it receives ``MARK_SIGNAL``
# (``mark_on_signal``; Python runs the handler in the main thread, the event loop's, which
# is idle once the client has its answer), and the measuring process drives the windows.
MARK_SIGNAL = signal.SIGUSR1


def mark_on_signal(*, collected: bool = False) -> None:
    """In a server process to be counted by ``count_served``: each ``MARK_SIGNAL`` marks.
    ``collected``: after a full garbage collection, so that the collections of the whole
    heap a long run of calls makes now and then end every window alike (the empty one
    too, which takes them off) instead of falling in one of them; the figure then leaves
    out what they cost by the call."""
    def marked(number: int, frame: object) -> None:
        if collected:
            gc.collect()
        mark()

    signal.signal(MARK_SIGNAL, marked)


def count_served(commands: Mapping[str, Sequence[str]], ready: Callable[[], None],
                 drive: Callable[[int], None], operations: int, *, what: str,
                 warm_up: int = 200, env: dict[str, str] | None = None,
                 cwd: str | Path | None = None) -> dict[str, float]:
    """Instructions per operation of each server process of ``commands`` (by name), each
    run under callgrind with ``SAME_START`` and calling ``mark_on_signal`` first.

    ``ready()`` returns once they answer, ``drive(n)`` makes ``n`` operations from this
    process (and whatever it does around them, e.g. opening a connection, also for 0: the
    empty window takes it off). After ``warm_up`` operations, every process is marked
    around two windows of ``operations`` and an empty one, as ``count_windows`` does, then
    stopped (SIGTERM). Refused (``CountRefused``) as ``count`` refuses."""
    with tempfile.TemporaryDirectory(prefix="callgate-callgrind-") as directory:
        processes: dict[str, subprocess.Popen[bytes]] = {}
        outputs = {name: Path(directory) / name for name in commands}
        try:
            for name, command in commands.items():
                outputs[name].mkdir()
                log = (outputs[name] / "stderr").open("wb")  # never a full pipe
                processes[name] = subprocess.Popen(
                    ["valgrind", "--tool=callgrind",
                     f"--callgrind-out-file={outputs[name] / 'callgrind.out'}",
                     f"--dump-before={MARK_FUNCTION}", *command],
                    stdout=subprocess.DEVNULL, stderr=log, cwd=cwd,
                    env={**(os.environ if env is None else env), **SAME_START})
                log.close()
            ready()
            drive(warm_up)
            for work in [operations] * WINDOWS + [0]:
                _mark_all(processes, outputs)
                drive(work)
            _mark_all(processes, outputs)
        finally:
            failed = _stopped(processes, outputs)
        if failed:
            raise CountRefused(f"{what}: {failed}")
        return {name: agreeing(windows_of(read_parts(output), what=f"{what}, {name}"),
                               operations, what=f"{what}, {name}")
                for name, output in outputs.items()}


def _mark_all(processes: Mapping[str, subprocess.Popen[bytes]],
              outputs: Mapping[str, Path], seconds: float = 120) -> None:
    """Mark every process, and wait until each has written the part the mark ended."""
    before = {name: len(list(outputs[name].glob("callgrind.out*"))) for name in processes}
    for process in processes.values():
        os.kill(process.pid, MARK_SIGNAL)
    deadline = time.monotonic() + seconds
    for name, process in processes.items():
        while len(list(outputs[name].glob("callgrind.out*"))) <= before[name]:
            if process.poll() is not None or time.monotonic() > deadline:
                raise CountRefused(f"{name}: no part written after a mark")
            time.sleep(0.05)
    time.sleep(0.2)  # the part's file is written whole


def _stopped(processes: Mapping[str, subprocess.Popen[bytes]],
             outputs: Mapping[str, Path]) -> str:
    """Stop the processes (SIGTERM, then SIGKILL); why any failed, or ''."""
    failures = []
    for name, process in processes.items():
        if process.poll() is None:
            process.terminate()
        try:
            process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.returncode not in (0, -signal.SIGTERM):
            errors = (outputs[name] / "stderr").read_text(errors="replace")
            failures.append(f"{name} exited with {process.returncode}:\n{errors[-2000:]}")
    return "\n".join(failures)
