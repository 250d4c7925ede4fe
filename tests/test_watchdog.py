"""The event loop's watchdog (switchboard/watchdog.py): a loop blocked past the threshold has
its stack logged once, with the blocking call in it, and its end said; a loop that only
works says nothing; 0 turns it off."""

from __future__ import annotations

import asyncio
import logging
import time

from switchboard import watchdog


def _block_the_loop_for(seconds: float) -> None:
    time.sleep(seconds)  # the blocking call the stack must show


def test_a_blocked_loop_has_its_stack_logged_once_and_its_end_said(caplog):
    async def main() -> watchdog.LoopWatchdog | None:
        dog = watchdog.watch(0.5)
        await asyncio.sleep(0.3)
        _block_the_loop_for(1.5)
        await asyncio.sleep(0.6)  # the watchdog sees the loop run again
        assert dog is not None
        dog.stop()
        return dog

    with caplog.at_level(logging.WARNING, logger="switchboard.watchdog"):
        dog = asyncio.run(main())
    blocked = [r.getMessage() for r in caplog.records if "blocked for" in r.getMessage()]
    assert len(blocked) == 1 and dog is not None and dog.stalls == 1, blocked
    assert "_block_the_loop_for" in blocked[0] and "time.sleep(seconds)" in blocked[0]
    assert "Traceback" not in blocked[0]  # the crash tests fail on tracebacks, not on this
    assert any("ran again after" in r.getMessage() for r in caplog.records)


def test_a_busy_loop_that_never_blocks_says_nothing(caplog):
    async def main() -> None:
        dog = watchdog.watch(0.5)
        for _ in range(200):
            await asyncio.sleep(0.005)
            _block_the_loop_for(0.002)
        assert dog is not None
        dog.stop()

    with caplog.at_level(logging.WARNING, logger="switchboard.watchdog"):
        asyncio.run(main())
    assert [r.getMessage() for r in caplog.records] == []


def test_zero_turns_it_off():
    async def main() -> None:
        assert watchdog.watch(0) is None

    asyncio.run(main())
