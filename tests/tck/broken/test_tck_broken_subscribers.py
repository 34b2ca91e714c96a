"""The TCK must catch broken subscribers, each on the rule it breaks, with a clear message."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import pytest

from reactive_streams.tck import (
    IdentityProcessorVerification,
    Outcome,
    SubscriberBlackboxVerification,
    SubscriberWhiteboxVerification,
    TestEnvironment,
    WhiteboxSubscriberProbe,
    probed,
    run_verification,
)
from tests.tck.broken import tck_broken_subscribers as broken
from tests.tck.tck_samples import BatchSubscriber, PassThroughProcessor

if TYPE_CHECKING:
    from reactive_streams import Subscriber

FAST = TestEnvironment(timeout=0.3, no_signals_timeout=0.05, case_timeout=5.0)


def blackbox_for(factory: type[Subscriber[Any]]) -> type[SubscriberBlackboxVerification]:
    return type(
        f"Blackbox{factory.__name__}",
        (SubscriberBlackboxVerification,),
        {"create_subscriber": lambda self: factory()},
    )


def whitebox_for(factory: type[Subscriber[Any]]) -> type[SubscriberWhiteboxVerification]:
    def create_subscriber(self: Any, probe: WhiteboxSubscriberProbe) -> Subscriber[Any]:
        return probed(factory(), probe)

    return type(
        f"Whitebox{factory.__name__}",
        (SubscriberWhiteboxVerification,),
        {"create_subscriber": create_subscriber},
    )


@pytest.mark.parametrize("make", [blackbox_for, whitebox_for], ids=["blackbox", "whitebox"])
def test_the_correct_subscriber_passes_every_required_test(make: Any) -> None:
    report = run_verification(make(BatchSubscriber), env=FAST)
    failures = [(r.case.name, r.message) for r in report.results if r.outcome is Outcome.FAILED]
    assert failures == []
    assert report.count(Outcome.PASSED) >= 10


CASES = [
    pytest.param(
        broken.RequestsFromOnCompleteSubscriber,
        "spec203_{box}must_not_call_methods_on_subscription_or_publisher_in_on_complete",
        r"^Rule 2\.3: the subscriber called request\(1\) from inside on_complete\(\); it must "
        r"not call the subscription there$",
        id="requests-from-on-complete",
    ),
    pytest.param(
        broken.IgnoresSecondSubscriptionSubscriber,
        "spec205_{box}must_call_subscription_cancel_if_it_already_has_a_subscription_and_"
        "receives_another_on_subscribe_signal",
        r"^Rule 2\.5: a subscriber that already has a subscription must cancel a second one; "
        r"it did not happen within 0\.3 s$",
        id="ignores-second-subscription",
    ),
    pytest.param(
        broken.AcceptsOnNextNoneSubscriber,
        "spec213_{box}on_next_must_raise_type_error_when_parameters_are_none",
        r"^Rule 2\.13: on_next\(None\) returned normally; it must raise TypeError$",
        id="accepts-on-next-none",
    ),
    pytest.param(
        broken.RaisesOnEarlyCompletionSubscriber,
        "spec209_{box}must_be_prepared_to_receive_an_on_complete_signal_without_preceding_"
        "request_call",
        r"^Rule 2\.9: on_complete\(\) raised RuntimeError: completed before any element; "
        r"subscriber methods must return normally \(Rule 2\.13\)$",
        id="raises-on-early-completion",
    ),
    pytest.param(
        broken.RaisesOnEarlyErrorSubscriber,
        "spec210_{box}must_be_prepared_to_receive_an_on_error_signal_without_preceding_"
        "request_call",
        r"^Rule 2\.10: on_error\(TckTestError\(.*\)\) raised RuntimeError: failed before any "
        r"element; subscriber methods must return normally \(Rule 2\.13\)$",
        id="raises-on-early-error",
    ),
]


@pytest.mark.parametrize(("subscriber", "test", "message"), CASES)
@pytest.mark.parametrize("box", ["blackbox", "whitebox"])
def test_the_tck_fails_a_broken_subscriber_on_the_rule_it_breaks(
    subscriber: type[Subscriber[Any]], test: str, message: str, box: str
) -> None:
    make = blackbox_for if box == "blackbox" else whitebox_for
    name = "test_required_" + test.format(box="blackbox_" if box == "blackbox" else "")
    report = run_verification(make(subscriber), env=FAST, select=lambda n: n == name)
    assert len(report.results) == 1, [r.case.name for r in report.results]
    result = report[name]
    assert result.outcome is Outcome.FAILED, result.message
    assert re.search(message, result.message), result.message
    assert not report.ok


def test_blackbox_catches_a_subscriber_that_never_requests() -> None:
    name = "test_required_spec201_blackbox_must_signal_demand_via_subscription_request"
    report = run_verification(
        blackbox_for(broken.NeverRequestsSubscriber), env=FAST, select=lambda n: n == name
    )
    result = report[name]
    assert result.outcome is Outcome.FAILED
    assert re.match(
        r"^Rule 2\.1: the subscriber must signal demand with request\(n\); no request\(n\) "
        r"arrived within 0\.3 s$",
        result.message,
    ), result.message


def test_whitebox_catches_a_subscriber_that_raises_on_elements_after_cancel() -> None:
    def create_subscriber(self: Any, probe: WhiteboxSubscriberProbe) -> Subscriber[Any]:
        subscriber = broken.RaisesAfterCancelSubscriber()
        return probed(subscriber, probe, cancel=subscriber.cancel)

    verification = type(
        "WhiteboxRaisesAfterCancel",
        (SubscriberWhiteboxVerification,),
        {"create_subscriber": create_subscriber},
    )
    name = (
        "test_required_spec208_must_be_prepared_to_receive_on_next_signals_after_having_"
        "called_subscription_cancel"
    )
    result = run_verification(verification, env=FAST, select=lambda n: n == name)[name]
    assert result.outcome is Outcome.FAILED
    assert re.match(
        r"^Rule 2\.8: on_next\(0\) raised RuntimeError: element after cancel; subscriber "
        r"methods must return normally \(Rule 2\.13\)$",
        result.message,
    ), result.message


def test_the_processor_verification_catches_errors_that_wait_for_demand() -> None:
    class ErrorsWaitForDemand(PassThroughProcessor):
        errors_need_demand = True

    verification = type(
        "VerifyErrorsWaitForDemand",
        (IdentityProcessorVerification,),
        {
            "max_supported_subscribers": 1,
            "create_identity_processor": lambda self, size: ErrorsWaitForDemand(size),
        },
    )
    name = (
        "test_required_spec402_must_immediately_pass_on_on_error_events_received_from_its_"
        "upstream_to_its_downstream"
    )
    result = run_verification(verification, env=FAST, select=lambda n: n == name)[name]
    assert result.outcome is Outcome.FAILED
    assert re.match(
        r"^Rule 4\.2: an upstream on_error must reach downstream without a request; no signal "
        r"arrived within 0\.3 s$",
        result.message,
    ), result.message
