"""``Deadlines``: the requests' deadlines on one event loop, watched by one timer, each
ending its block in ``TimeoutError`` as ``asyncio.timeout`` would: at its own time, after
being moved later or earlier, whatever the others do; a cancellation that is not the
deadline's, and an error of the block's own, pass through unchanged."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from callgate_rules.server.problems import Deadline, Deadlines

TICK = 0.02  # seconds: the steps these tests take, far above a loop turn


async def bounded(deadlines: Deadlines, first: float, then: float | None,
                  work: float, moved_after: float = 0.0) -> tuple[str, float]:
    """How a block that works ``work`` seconds ends under a deadline ``first`` seconds
    away, moved (when ``then`` is given) to ``then`` seconds from ``moved_after``, and
    when (seconds from the start)."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    deadline = Deadline(deadlines, first)
    try:
        with deadline:
            if then is not None:
                await asyncio.sleep(moved_after)
                deadline.move(then)
            await asyncio.sleep(work)
    except TimeoutError:
        assert deadline.expired
        return "timed out", loop.time() - started
    assert not deadline.expired
    return "done", loop.time() - started


def run_alone(first: float, then: float | None, work: float,
              moved_after: float = 0.0) -> tuple[str, float]:
    async def alone() -> tuple[str, float]:
        return await bounded(Deadlines(asyncio.get_running_loop()), first, then, work,
                             moved_after)

    return asyncio.run(alone())


def test_a_deadline_ends_the_block_at_its_time() -> None:
    ended, after = run_alone(2 * TICK, None, 50 * TICK)
    assert ended == "timed out" and 2 * TICK <= after < 25 * TICK
    assert run_alone(10 * TICK, None, TICK)[0] == "done"


def test_a_deadline_moved_later_is_not_cut_at_its_first_time() -> None:
    # the timer armed for the first time goes off, and is armed again for the moved one
    ended, after = run_alone(2 * TICK, 6 * TICK, 4 * TICK, moved_after=TICK)
    assert ended == "done" and after >= 5 * TICK
    ended, after = run_alone(2 * TICK, 4 * TICK, 50 * TICK, moved_after=TICK)
    assert ended == "timed out" and 5 * TICK <= after < 25 * TICK


def test_a_deadline_moved_earlier_ends_the_block_sooner() -> None:
    ended, after = run_alone(200 * TICK, 2 * TICK, 50 * TICK)
    assert ended == "timed out" and after < 25 * TICK


def test_each_deadline_under_way_ends_at_its_own_time() -> None:
    async def together() -> list[tuple[str, float]]:
        deadlines = Deadlines(asyncio.get_running_loop())
        return list(await asyncio.gather(
            bounded(deadlines, 8 * TICK, None, 2 * TICK),     # ends in time
            bounded(deadlines, 3 * TICK, None, 50 * TICK),    # the earliest deadline
            bounded(deadlines, 10 * TICK, None, 50 * TICK),   # a later one, after a re-arm
            bounded(deadlines, 200 * TICK, 5 * TICK, 50 * TICK, moved_after=TICK)))

    (first, _), (second, at), (third, later), (fourth, moved) = asyncio.run(together())
    assert (first, second, third, fourth) == ("done", "timed out", "timed out", "timed out")
    assert 3 * TICK <= at < later and 10 * TICK <= later and 6 * TICK <= moved < 40 * TICK


def test_what_is_not_the_deadlines_passes_through() -> None:
    async def own_timeout() -> None:
        with Deadline(Deadlines(asyncio.get_running_loop()), 50 * TICK):
            raise TimeoutError("the block's own")

    with pytest.raises(TimeoutError, match="the block's own"):
        asyncio.run(own_timeout())

    async def cancelled_from_outside() -> bool:
        inner = asyncio.ensure_future(bounded(Deadlines(asyncio.get_running_loop()),
                                              50 * TICK, None, 100 * TICK))
        await asyncio.sleep(TICK)
        inner.cancel()
        try:
            await inner
        except asyncio.CancelledError:
            return True
        return False

    assert asyncio.run(cancelled_from_outside())


STEP = 0.04  # seconds: whole steps for the deadlines, the work half a step off them


@settings(max_examples=10, deadline=None)
@given(first=st.integers(1, 5), then=st.none() | st.integers(1, 5), work=st.integers(0, 5))
def test_it_ends_a_block_as_asyncio_timeout_does(first: int, then: int | None,
                                                 work: int) -> None:
    """The same block under ``asyncio.timeout`` (rescheduled as ``move`` moves) ends the
    same way, far from a tie."""
    seconds = (work + 0.5) * STEP

    async def with_timeout() -> str:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(first * STEP) as limit:
                if then is not None:
                    limit.reschedule(loop.time() + then * STEP)
                await asyncio.sleep(seconds)
        except TimeoutError:
            return "timed out"
        return "done"

    expected = asyncio.run(with_timeout())
    assert run_alone(first * STEP, None if then is None else then * STEP,
                     seconds)[0] == expected
