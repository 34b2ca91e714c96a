"""The TCK must catch broken publishers, each on the rule it breaks, with a clear message."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import pytest

from reactive_streams.tck import (
    Outcome,
    PublisherVerification,
    Report,
    TestEnvironment,
    run_verification,
)
from tests.tck.broken import tck_broken_publishers as broken

if TYPE_CHECKING:
    from reactive_streams import Publisher

FAST = TestEnvironment(timeout=0.3, no_signals_timeout=0.05, case_timeout=5.0)


def verification_for(factory: Any, failed: Any = None, **knobs: Any) -> type[PublisherVerification]:
    """A PublisherVerification subclass around a publisher class."""
    attributes: dict[str, Any] = {
        "create_publisher": lambda self, elements: factory(elements),
        "create_failed_publisher": lambda self: None if failed is None else failed(),
        **knobs,
    }
    return type(f"Verify{factory.__name__}", (PublisherVerification,), attributes)


def run_one(verification: type[PublisherVerification], test: str) -> Report:
    report = run_verification(verification, env=FAST, select=lambda name: name == test)
    assert [result.case.name for result in report.results] == [test]
    return report


def test_the_correct_range_publisher_passes_every_required_test() -> None:
    report = run_verification(
        verification_for(broken.RangePublisher, broken.FailedPublisher), env=FAST
    )
    failures = [(r.case.name, r.message) for r in report.results if r.outcome is Outcome.FAILED]
    assert failures == []
    assert report.ok
    assert report.count(Outcome.PASSED) >= 36


CASES = [
    pytest.param(
        broken.IgnoresDemandPublisher,
        "test_required_spec101_subscription_request_must_result_in_the_correct_number_of_produced_elements",
        r"^Rule 1\.1: request\(1\) must produce exactly one element; got on_next\(1\)",
        id="ignores-demand",
    ),
    pytest.param(
        broken.EmitsAfterCancelPublisher,
        "test_required_spec306_after_subscription_is_cancelled_request_must_be_nops",
        r"^Rule 3\.6: after cancel\(\), request\(n\) must be a no-op; got on_next\(0\)",
        id="emits-after-cancel",
    ),
    pytest.param(
        broken.FinishesTheBatchAfterCancelPublisher,
        "test_required_spec312_cancel_from_within_on_next_must_stop_on_next_at_once",
        r"^Rule 3\.12: the subscriber cancelled from inside its first on_next, yet 2 more "
        r"on_next signal\(s\) followed",
        id="finishes-the-batch-after-cancel",
    ),
    pytest.param(
        broken.EmitsAfterCompletionPublisher,
        "test_required_spec107_must_not_emit_further_signals_once_on_complete_has_been_signalled",
        r"^Rule 1\.7: no signal may follow on_complete, even after request\(10\); "
        r"got on_complete\(\)",
        id="emits-after-completion",
    ),
    pytest.param(
        broken.RecursivePublisher,
        "test_required_spec303_must_not_allow_unbounded_recursion",
        r"^Rule 3\.3: on_next -> request -> on_next nested 2 deep on one thread; "
        r"bounded_depth_of_on_next_and_request_recursion = 1",
        id="recursion-without-trampoline",
    ),
    pytest.param(
        broken.RaisesOnRequestZeroPublisher,
        "test_required_spec309_request_zero_must_signal_value_error",
        r"^Rule 3\.9: request\(0\) must signal on_error\(ValueError\), but it raised ValueError",
        id="raises-from-request-zero",
    ),
    pytest.param(
        broken.IgnoresRequestZeroPublisher,
        "test_required_spec309_request_zero_must_signal_value_error",
        r"^Rule 3\.9: request\(0\) must signal on_error\(ValueError\); no signal arrived within",
        id="ignores-request-zero",
    ),
    pytest.param(
        broken.OverflowingDemandPublisher,
        "test_required_spec317_must_not_signal_on_error_when_pending_above_max_demand",
        r"^Rule 3\.17: demand above MAX_DEMAND must saturate, but the publisher signalled "
        r"on_error\(ValueError\('demand overflowed",
        id="overflows-demand",
    ),
    pytest.param(
        broken.KeepsSubscriberPublisher,
        "test_required_spec313_cancel_must_make_the_publisher_eventually_drop_all_references_to_the_subscriber",
        r"^Rule 3\.13: .* after cancel\(\) the publisher still references the subscriber",
        id="keeps-subscriber-after-cancel",
    ),
    pytest.param(
        broken.SignalsBeforeOnSubscribePublisher,
        "test_required_spec109_must_issue_on_subscribe_for_non_none_subscriber",
        r"^Rule 1\.9: the publisher signalled on_complete\(\) before on_subscribe",
        id="signals-before-on-subscribe",
    ),
    pytest.param(
        broken.AcceptsNoneSubscriberPublisher,
        "test_required_spec109_subscribe_throw_type_error_on_none_subscriber",
        r"^Rule 1\.9: subscribe\(None\) returned normally; it must raise TypeError$",
        id="accepts-subscribe-none",
    ),
    pytest.param(
        broken.EmitsFromTwoThreadsPublisher,
        "test_required_spec103_must_signal_serially_when_requests_come_from_several_threads",
        r"^Rule 1\.3: signals to one subscriber must not overlap, but on_next started on thread",
        id="emits-from-two-threads",
    ),
    pytest.param(
        broken.NeverCompletesPublisher,
        "test_required_spec102_may_signal_less_than_requested_and_terminate_subscription",
        r"^Rule 1\.2: after its 3 elements the publisher must signal on_complete; no signal "
        r"arrived within 0\.3 s$",
        id="never-completes",
    ),
    pytest.param(
        broken.NotReentrantPublisher,
        "test_required_spec302_must_allow_synchronous_request_calls_from_on_next_and_on_subscribe",
        # The cause comes first: the re-entrant request raised (Rule 3.16), and so the
        # elements Rule 3.2 asks for never came.
        r"^Rule 3\.16: request\(1\) raised RuntimeError: request\(\) is not re-entrant; .*"
        r"\(the first rule broken; then: Rule 3\.2: with request\(1\) x3 from on_subscribe "
        r"and request\(1\) from each on_next, 6 elements must arrive; got [0-5]",
        id="request-not-reentrant",
    ),
    pytest.param(
        broken.CancelTwiceRaisesPublisher,
        "test_required_spec307_after_subscription_is_cancelled_additional_cancelations_must_be_nops",
        r"^Rule 3\.15: cancel\(\) raised RuntimeError: already cancelled; it must return normally$",
        id="second-cancel-raises",
    ),
    pytest.param(
        broken.UnsafeCancelPublisher,
        "test_required_spec305_cancel_from_many_threads_at_once_must_be_thread_safe_and_idempotent",
        r"^Rule 3\.5: cancel\(\) from several threads at once raised RuntimeError: cancel\(\) "
        r"is not thread-safe$",
        id="cancel-not-thread-safe",
    ),
    pytest.param(
        broken.UncheckedRequestPublisher,
        "test_required_spec316_request_must_return_normally_even_with_bad_arguments",
        # It also takes request(1.5) as demand, which comes first: an element nobody
        # requested (Rule 1.1), then request("3") raises.
        r"^Rule 1\.1: the publisher signalled on_next #1 \(0\) but only 0 element\(s\) were "
        r"requested \(the first rule broken; then: Rule 3\.16: request\('3'\) raised "
        r"TypeError: .*; it must return normally",
        id="request-raises-on-bad-argument",
    ),
    pytest.param(
        broken.PropagatesSubscriberErrorPublisher,
        "test_required_spec213_subscriber_raising_from_on_next_must_be_treated_as_cancelled",
        r"^Rule 2\.13: the exception raised by on_next escaped from request\(5\)",
        id="subscriber-error-escapes-request",
    ),
]


@pytest.mark.parametrize(("publisher", "test", "message"), CASES)
def test_the_tck_fails_a_broken_publisher_on_the_rule_it_breaks(
    publisher: type[Publisher[int]], test: str, message: str
) -> None:
    report = run_one(verification_for(publisher), test)
    result = report[test]
    assert result.outcome is Outcome.FAILED, result.message
    assert re.search(message, result.message), result.message
    assert not report.ok


@pytest.mark.parametrize(
    "test",
    [
        "test_optional_spec104_must_signal_on_error_when_fails",
        "test_required_spec109_may_reject_calls_to_subscribe_if_publisher_is_unable_or_unwilling_to_serve_them_rejection_must_trigger_on_error_after_on_subscribe",
    ],
)
def test_a_failed_publisher_that_never_signals_on_error_fails(test: str) -> None:
    verification = verification_for(broken.RangePublisher, broken.NeverFailsPublisher)
    result = run_one(verification, test)[test]
    assert result.outcome is Outcome.FAILED
    assert re.match(
        r"^Rule 1\.(4|9): .*must signal on_error.*; no signal arrived within 0\.3 s$",
        result.message,
    ), result.message


def test_a_publisher_whose_subscribe_hangs_fails_after_the_case_timeout() -> None:
    class Hanging(broken.RangePublisher):
        def subscribe(self, subscriber: Any) -> None:
            import threading

            threading.Event().wait(30)

    env = TestEnvironment(timeout=0.2, no_signals_timeout=0.05, case_timeout=0.5)
    test = "test_required_create_publisher1_must_produce_a_stream_of_exactly1_element"
    report = run_verification(verification_for(Hanging), env=env, select=lambda name: name == test)
    result = report[test]
    assert result.outcome is Outcome.FAILED
    assert re.match(
        r"^the test did not finish within case_timeout = 0\.5 s \(hung at ", result.message
    )
    assert "in subscribe" in result.message


def test_an_exception_out_of_subscribe_fails_the_test_and_the_run_goes_on() -> None:
    class Raising(broken.RangePublisher):
        def subscribe(self, subscriber: Any) -> None:
            raise RuntimeError("boom")

    report = run_verification(
        verification_for(Raising),
        env=FAST,
        select=lambda name: "spec101" in name or "spec102" in name,
    )
    assert len(report.results) >= 2
    for result in report.results:
        if "random" in result.case.name:
            continue
        assert result.outcome is Outcome.FAILED
        assert result.message.startswith("Rule 1.9: subscribe() raised RuntimeError: boom")


def test_unbounded_recursion_is_reported_not_crashing() -> None:
    test = "test_required_spec303_must_not_allow_unbounded_recursion"
    verification = verification_for(
        broken.RecursivePublisher, bounded_depth_of_on_next_and_request_recursion=5000
    )
    result = run_one(verification, test)[test]
    assert result.outcome is Outcome.FAILED
    assert "Rule 3.3" in result.message
    assert "recursion" in result.message


def test_an_element_before_on_subscribe_is_named_rule_1_9_by_every_failing_test() -> None:
    """The report names the cause (Rule 1.9), not the symptoms after it."""
    verification = verification_for(broken.OnNextBeforeOnSubscribePublisher, broken.FailedPublisher)
    report = run_verification(verification, env=FAST)
    failed = [result for result in report.results if result.outcome is Outcome.FAILED]
    assert len(failed) >= 17
    for result in failed:
        assert result.message.startswith(
            "Rule 1.9: the publisher signalled on_next(0) before on_subscribe"
        ), (result.case.name, result.message)
    spec109 = report["test_required_spec109_must_issue_on_subscribe_for_non_none_subscriber"]
    assert spec109.outcome is Outcome.FAILED
