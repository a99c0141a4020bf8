"""The failover rule: an enqueue is sent again only when that cannot make a second job."""

from pyqueue.client.failover import Failover
from pyqueue.errors import FailedPrecondition, Unavailable
from pyqueue.v1 import queue_pb2 as pb


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def unavailable(unsent: bool) -> Unavailable:
    exc = Unavailable("gone")
    exc.unsent = unsent
    return exc


def test_a_request_that_never_left_is_sent_again_with_growing_pauses_until_the_budget_ends() -> None:
    clock = Clock()
    failover = Failover(5.0, [pb.NewJob(type="t")], clock)
    delays = []
    while (delay := failover.next_delay(unavailable(unsent=True))) is not None:
        delays.append(delay)
        clock.now += delay
    assert delays[:3] == [0.05, 0.1, 0.2] and max(delays) == 1.0
    assert 4.0 < clock.now <= 5.0


def test_a_lost_answer_is_raised_unless_every_job_has_a_unique_key() -> None:
    plain = Failover(30.0, [pb.NewJob(type="t"), pb.NewJob(type="t", unique_key="k")])
    assert plain.next_delay(unavailable(unsent=False)) is None
    keyed = Failover(30.0, [pb.NewJob(type="t", unique_key="a"), pb.NewJob(type="t", unique_key="b")])
    assert keyed.next_delay(unavailable(unsent=False)) == 0.05


def test_other_refusals_are_never_sent_again() -> None:
    failover = Failover(30.0, [pb.NewJob(type="t", unique_key="a")])
    assert failover.next_delay(FailedPrecondition("moved")) is None
