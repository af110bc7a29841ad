"""benchmarks/callgrind_counting.py: instructions counted between marks in one process, and
refused when the two windows of one count disagree or the marks were not the expected ones.

The checks are pure logic and need no valgrind; the one test that runs valgrind is skipped
with its reason where valgrind is absent.
"""

from __future__ import annotations

import shutil
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def counting() -> Iterator[ModuleType]:
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        import callgrind_counting

        yield callgrind_counting
    finally:
        sys.path.remove(str(REPO / "benchmarks"))


def test_two_windows_that_agree_give_the_mean_per_operation(counting: ModuleType) -> None:
    agreeing = counting.agreeing
    assert agreeing([104_000_000, 104_900_000], 1000, what="denied") == 104_450


def test_two_windows_that_disagree_are_refused_with_both_figures(counting: ModuleType) -> None:
    # what the difference of two processes once hid: a start-up cost in one of them
    with pytest.raises(counting.CountRefused,
                       match=r"denied: .* 104,000, 30,882 instructions per operation"):
        counting.agreeing([104_000_000, 30_882_000], 1000,
                          what="denied")


def test_the_tolerance_is_a_share_of_the_smaller_window(counting: ModuleType) -> None:
    agreeing, refused = counting.agreeing, counting.CountRefused
    assert agreeing([100_000, 101_999], 1, what="x", tolerance=0.02) == 100_999.5
    with pytest.raises(refused):
        agreeing([100_000, 102_001], 1, what="x", tolerance=0.02)


@pytest.mark.parametrize(("windows", "operations"), [([], 10), ([5, 5], 0), ([0, 0], 10)])
def test_nothing_counted_is_refused(counting: ModuleType, windows: list[int],
                                    operations: int) -> None:
    with pytest.raises(counting.CountRefused):
        counting.agreeing(windows, operations, what="x")


def test_the_windows_are_the_parts_between_the_marks_less_an_empty_one(
        counting: ModuleType) -> None:
    # before the first mark, two windows, the empty window, after the last mark
    parts = [900_000_000, 10_004_000, 10_005_000, 4_000, 7_000_000]
    assert counting.windows_of(parts, what="x") == [10_000_000, 10_001_000]


@pytest.mark.parametrize("parts", [[1, 2, 3], [1, 2, 3, 4, 5, 6]],
                         ids=["a count_windows missing", "a ctypes call in the work"])
def test_more_or_fewer_parts_than_marks_are_refused(counting: ModuleType,
                                                   parts: list[int]) -> None:
    with pytest.raises(counting.CountRefused,
                       match="parts where 5 were expected"):
        counting.windows_of(parts, what="x")


def test_parts_are_read_in_their_order_not_the_files(counting: ModuleType,
                                                     tmp_path: Path) -> None:
    for name, part, summary in (("callgrind.out", 3, 30), ("callgrind.out.1", 1, 10),
                                ("callgrind.out.2", 2, 20)):
        (tmp_path / name).write_text(f"version: 1\npart: {part}\nsummary: {summary}\n")
    assert counting.read_parts(tmp_path) == [10, 20, 30]


def test_a_file_without_a_summary_is_refused(counting: ModuleType, tmp_path: Path) -> None:
    (tmp_path / "callgrind.out").write_text("version: 1\npart: 1\n")
    with pytest.raises(counting.CountRefused,
                       match="without a part or a summary"):
        counting.read_parts(tmp_path)


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("valgrind") is None,
                    reason="valgrind is not installed (apt-get install valgrind)")
def test_work_twice_as_long_counts_twice_the_instructions(counting: ModuleType,
                                                          tmp_path: Path) -> None:
    script = tmp_path / "work.py"
    script.write_text(textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(REPO / "benchmarks")!r})
        from callgrind_counting import count_windows
        size = int(sys.argv[1])

        def run(operations):
            for _ in range(operations):
                sum(range(size))  # linear in size

        run(50)
        count_windows(run, 500)
    """))
    count = counting.count
    once = count([sys.executable, str(script), "2000"], 500, what="once")
    twice = count([sys.executable, str(script), "4000"], 500, what="twice")
    assert once > 0
    assert 1.9 < twice / once < 2.1


_SERVER = """
import socket, sys
sys.path.insert(0, {benchmarks!r})
from callgrind_counting import mark_on_signal
size, port = int(sys.argv[1]), int(sys.argv[2])
mark_on_signal()
listener = socket.create_server(("127.0.0.1", port))
listener.settimeout(0.1)  # back in Python often, where the mark's handler runs
while True:
    try:
        connection, _ = listener.accept()
    except TimeoutError:
        continue
    connection.settimeout(None)
    with connection, connection.makefile("rwb") as stream:
        for line in stream:
            sum(range(size))  # linear in size
            stream.write(b"done\\n")
            stream.flush()
"""


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("valgrind") is None,
                    reason="valgrind is not installed (apt-get install valgrind)")
def test_a_served_operation_twice_as_long_counts_twice_the_instructions(
        counting: ModuleType, tmp_path: Path) -> None:
    """``count_served``: two server processes under callgrind, marked by signal around
    windows of requests this process sends; each counts its own work per request."""
    import socket
    import time

    script = tmp_path / "server.py"
    script.write_text(_SERVER.format(benchmarks=str(REPO / "benchmarks")))
    ports = {}
    for name in ("once", "twice"):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            ports[name] = probe.getsockname()[1]
    sizes = {"once": 2000, "twice": 4000}

    def ready() -> None:
        deadline = time.monotonic() + 120
        for port in ports.values():
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)

    def drive(requests: int) -> None:
        for port in ports.values():
            with socket.create_connection(("127.0.0.1", port)) as connection, \
                    connection.makefile("rwb") as stream:
                for _ in range(requests):
                    stream.write(b"work\n")
                    stream.flush()
                    assert stream.readline() == b"done\n"

    counted = counting.count_served(
        {name: [sys.executable, str(script), str(sizes[name]), str(ports[name])]
         for name in ports}, ready, drive, 300, what="served", warm_up=50)
    assert counted["once"] > 0
    assert 1.9 < counted["twice"] / counted["once"] < 2.1
