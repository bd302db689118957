"""The watch on real hosts' answers: a host that misses answers in a row is lost."""

from __future__ import annotations

import threading
import time

from shoal.cluster import liveness


class Answers:
    """Hosts that answer until told not to; counts the questions."""

    def __init__(self) -> None:
        self.silent: set[str] = set()
        self.asked: dict[str, int] = {}
        self.lock = threading.Lock()

    def __call__(self, address: str) -> str | None:
        with self.lock:
            self.asked[address] = self.asked.get(address, 0) + 1
        return "ssh did not answer within 10 s" if address in self.silent else None


def _until(condition, limit_s: float = 30.0) -> None:
    end = time.monotonic() + limit_s
    while not condition():
        assert time.monotonic() < end, "the watch never got there"
        time.sleep(0.01)


def test_a_host_that_misses_answers_in_a_row_is_lost_and_the_others_are_not():
    answers = Answers()
    with liveness.Watch(["h1", "h2"], ask=answers, interval_s=0.02, misses=3) as watch:
        _until(lambda: min(answers.asked.values(), default=0) >= 3)
        assert watch.lost() is None
        answers.silent.add("h2")
        _until(lambda: watch.lost() is not None)
    assert watch.lost() == "h2: ssh did not answer within 10 s, 3 times in a row 0.02 s apart"
    # Asked no more once one is lost, nor after the block.
    asked = dict(answers.asked)
    time.sleep(0.1)
    assert answers.asked == asked


def test_one_missed_answer_is_forgiven_by_the_next():
    answers = Answers()
    flaky = {"left": 1}

    def once_silent(address: str) -> str | None:
        if flaky["left"]:
            flaky["left"] -= 1
            return "ssh failed (Connection reset)"
        return answers(address)

    with liveness.Watch(["h1"], ask=once_silent, interval_s=0.02, misses=2) as watch:
        _until(lambda: answers.asked.get("h1", 0) >= 5)
        assert watch.lost() is None


def test_nothing_is_asked_where_there_is_nothing_to_watch():
    answers = Answers()
    with liveness.Watch([], ask=answers, interval_s=0.01) as watch:
        time.sleep(0.05)
    assert watch.lost() is None and answers.asked == {}
    with liveness.NoWatch() as none:
        assert none.lost() is None
