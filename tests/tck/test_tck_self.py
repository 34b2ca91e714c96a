"""The TCK run through pytest on small correct implementations: every required test passes.

These classes are what implementers write: subclass a verification, implement the
factory, and pytest collects every inherited test (the bases themselves are not collected).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any, ClassVar

import pytest

from reactive_streams import MAX_DEMAND, Processor, Publisher, Subscriber
from reactive_streams.tck import (
    HelperPublisher,
    IdentityProcessorVerification,
    PublisherVerification,
    SubscriberBlackboxVerification,
    SubscriberWhiteboxVerification,
    TestEnvironment,
    WhiteboxSubscriberProbe,
    probed,
)
from tests.tck.tck_samples import (
    BatchSubscriber,
    FailedPublisher,
    MulticastProcessor,
    PassThroughProcessor,
)


class TestSynchronousHelperPublisher(PublisherVerification):
    def create_publisher(self, elements: int) -> Publisher[Any]:
        return HelperPublisher(elements)

    def create_failed_publisher(self) -> Publisher[Any] | None:
        return FailedPublisher()


class TestExecutorHelperPublisher(PublisherVerification):
    def create_publisher(self, elements: int) -> Publisher[Any]:
        executor = ThreadPoolExecutor(max_workers=2)
        self.add_cleanup(lambda: executor.shutdown(wait=False))
        return HelperPublisher(elements, executor=executor)


class TestInfiniteHelperPublisher(PublisherVerification):
    max_elements_from_publisher: ClassVar[int] = MAX_DEMAND

    def create_publisher(self, elements: int) -> Publisher[Any]:
        return HelperPublisher(MAX_DEMAND)


class TestBatchSubscriberBlackbox(SubscriberBlackboxVerification):
    def create_subscriber(self) -> Subscriber[Any]:
        return BatchSubscriber()


class TestBatchSubscriberWhitebox(SubscriberWhiteboxVerification):
    def create_subscriber(self, probe: WhiteboxSubscriberProbe) -> Subscriber[Any]:
        return probed(BatchSubscriber(), probe)


class TestPassThroughProcessor(IdentityProcessorVerification):
    max_supported_subscribers: ClassVar[int] = 1

    def create_identity_processor(self, buffer_size: int) -> Processor[Any, Any]:
        return PassThroughProcessor(buffer_size)


class TestMulticastProcessor(IdentityProcessorVerification):
    def create_identity_processor(self, buffer_size: int) -> Processor[Any, Any]:
        return MulticastProcessor(buffer_size)


def test_the_bases_are_not_collected_and_carry_rule_markers() -> None:
    assert not PublisherVerification.__name__.startswith("Test")
    method = PublisherVerification.test_required_spec309_request_zero_must_signal_value_error
    marks = [mark for mark in getattr(method, "pytestmark", []) if mark.name == "rule"]
    assert [mark.args for mark in marks] == [("3.9",)]


def test_environment_from_env_reads_variables_and_overrides_win() -> None:
    env = TestEnvironment.from_env(
        {"RS_TCK_TIMEOUT": "2.5", "RS_TCK_DEBUG": "yes", "RS_TCK_NO_SIGNALS_TIMEOUT": "0.2"},
        no_signals_timeout=0.3,
    )
    assert env.timeout == 2.5
    assert env.debug is True
    assert env.no_signals_timeout == 0.3
    with pytest.raises(ValueError, match=r"^RS_TCK_TIMEOUT='soon' is not a number of seconds$"):
        TestEnvironment.from_env({"RS_TCK_TIMEOUT": "soon"})
    with pytest.raises(ValueError, match=r"^TestEnvironment.timeout must be a positive number"):
        TestEnvironment(timeout=0)
