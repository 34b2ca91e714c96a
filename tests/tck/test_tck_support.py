"""The TCK's helpers on their own: manual subscriber and publisher, failures from threads."""

from __future__ import annotations

import re
import threading

import pytest

from reactive_streams import StreamStatistics
from reactive_streams.tck import (
    HelperPublisher,
    ManualPublisher,
    ManualSubscriber,
    TckFailure,
    TestEnvironment,
)
from reactive_streams.tck._support import subscribe
from tests.tck.tck_samples import BatchSubscriber

ENV = TestEnvironment(timeout=0.2, no_signals_timeout=0.02)


def test_manual_subscriber_expectations_and_statistics() -> None:
    env = ENV.fresh()
    sub = ManualSubscriber(env)
    subscribe(env, HelperPublisher(3), sub)
    assert sub.request_next_element() == 0
    sub.request(5)
    assert sub.next_elements(2) == [1, 2]
    sub.expect_completion()
    with pytest.raises(TckFailure, match=r"^nothing more; no signal arrived within 0\.2 s$"):
        sub.next_element("nothing more")
    assert sub.statistics() == StreamStatistics(
        requested=6, delivered=3, buffered=0, cancelled=True, terminated=True
    )
    assert env.async_errors == ()


def test_failures_on_other_threads_are_collected_not_raised() -> None:
    env = ENV.fresh()
    sub = ManualSubscriber(env)
    subscribe(env, HelperPublisher(5), sub)
    thread = threading.Thread(target=sub.on_next, args=(99,))  # an element nobody requested
    thread.start()
    thread.join(1.0)
    [failure] = env.async_errors
    assert re.match(
        r"^Rule 1\.1: the publisher signalled on_next #1 \(99\) but only 0 ", str(failure)
    )
    with pytest.raises(TckFailure, match=r"^Rule 1\.1: "):
        env.verify_no_async_errors_no_delay()


def test_an_expected_error_is_taken_back() -> None:
    env = ENV.fresh()
    sub = ManualSubscriber(env)
    subscribe(env, HelperPublisher(5), sub)
    sub.request(0)
    error = sub.expect_error(ValueError, "Rule 3.9: request(0) must signal on_error")
    assert "3.9" in str(error)
    assert env.async_errors == ()


def test_manual_publisher_records_requests_and_cancel() -> None:
    env = ENV.fresh()
    publisher = ManualPublisher(env, rule="2.1")
    subscriber = BatchSubscriber(batch=2)
    publisher.subscribe(subscriber)
    publisher.expect_exact_request(2, "the subscriber requests its batch")
    publisher.send_next("a")
    publisher.send_next("b")
    publisher.expect_exact_request(2, "and the next batch")
    publisher.expect_no_request("nothing more")
    publisher.send_completion()
    assert subscriber.received == ["a", "b"]
    assert publisher.statistics() == StreamStatistics(
        requested=4, delivered=2, buffered=0, cancelled=True, terminated=True
    )


def test_manual_publisher_never_sends_without_demand() -> None:
    env = ENV.fresh()
    publisher = ManualPublisher(env)
    publisher.subscribe(ManualSubscriber(env))  # it requests nothing
    with pytest.raises(TckFailure, match=r"^the TCK tried to send an element without demand"):
        publisher.send_next("a")
