"""The follower core's own rules, apart from any transport."""

from __future__ import annotations

from runs.wire.tails import Listener


def quiet_waits(listener: Listener, count: int) -> list[float]:
    waits = []
    for _ in range(count):
        waits.append(listener.next_wait(1.0))
        listener.quiet_polls += 1  # as wait() counts a poll that heard nothing
    return waits


def test_a_quiet_run_is_polled_less_and_less_often_up_to_every_five_seconds():
    assert quiet_waits(Listener("r"), 7) == [1.0, 1.5, 2.25, 3.375, 5.0, 5.0, 5.0]


def test_a_part_or_a_notification_brings_the_poll_back_to_every_second():
    listener = Listener("r")
    quiet_waits(listener, 5)
    listener.heard()
    assert listener.next_wait(1.0) == 1.0


def test_with_live_push_working_the_poll_is_only_a_net_every_five_seconds():
    from runs.wire.tails import RunTail

    listener = Listener("r")
    listener.tail = RunTail("r", layer=None)
    listener.tail.channel = "a channel in the run's group"
    assert quiet_waits(listener, 3) == [5.0, 5.0, 5.0]
