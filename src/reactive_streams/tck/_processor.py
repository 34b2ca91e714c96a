"""``IdentityProcessorVerification``: both halves of the TCK, applied to a processor.

A processor obeys the publisher rules and the subscriber rules (Rule 4.1). The
verification inherits every ``PublisherVerification`` test (the processor's output, fed
by the TCK's ``HelperPublisher`` on an executor) and every ``SubscriberWhiteboxVerification``
test (the processor's input, observed through a downstream subscriber that reports to the
probe), plus three tests of its own (Rules 1.4 with several subscribers, 4.2, 2.1).
"""

from __future__ import annotations

from abc import abstractmethod
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, ClassVar

from .._core import MAX_DEMAND, accept_subscription
from ..api import Subscriber, Subscription
from ._cases import Kind, tck_test
from ._environment import TckFailure
from ._helper import HelperPublisher
from ._publisher import PublisherVerification
from ._subscriber import (
    SubscriberPuppet,
    SubscriberWhiteboxVerification,
    TckTestError,
    WhiteboxSubscriberProbe,
)
from ._support import ManualPublisher, ManualSubscriber, subscribe

if TYPE_CHECKING:
    from ..api import Processor, Publisher

__all__ = ["IdentityProcessorVerification"]


class _DownstreamPuppet(SubscriberPuppet):
    def __init__(self, subscription: Subscription) -> None:
        self._subscription = subscription

    def trigger_request(self, n: int) -> None:
        self._subscription.request(n)

    def signal_cancel(self) -> None:
        self._subscription.cancel()


class _ProbeDownstream(Subscriber[Any]):
    """Subscribes to the processor's output and reports what comes out to the probe."""

    def __init__(self, probe: WhiteboxSubscriberProbe) -> None:
        self._probe = probe

    def on_subscribe(self, subscription: Subscription) -> None:
        accept_subscription(subscription, True)  # the probe itself checks Rule 2.5
        self._probe.register_on_subscribe(_DownstreamPuppet(subscription))

    def on_next(self, element: Any) -> None:
        if element is None:
            raise TypeError("Rule 2.13: on_next(None)")
        self._probe.register_on_next(element)

    def on_error(self, error: Exception) -> None:
        if error is None:
            raise TypeError("Rule 2.13: on_error(None)")
        self._probe.register_on_error(error)

    def on_complete(self) -> None:
        self._probe.register_on_complete()


class IdentityProcessorVerification(PublisherVerification, SubscriberWhiteboxVerification):
    """Verifies a ``Processor`` that passes its input through unchanged (Rules 1-4).

    Implement ``create_identity_processor(buffer_size)``: a new processor that emits what
    it receives, buffering at most ``buffer_size`` elements.

    Knobs (class attributes), in addition to those of ``PublisherVerification``:
        max_supported_subscribers: how many downstream subscribers the processor serves at
            once; below 2 skips the multi-subscriber tests. Default ``MAX_DEMAND``.
        does_coordinated_emission: the processor emits an element only when every
            subscriber has demand for it (a broadcast); default ``False``.
        processor_buffer_size: passed to ``create_identity_processor``; default 16.
        helper_executor_workers: threads of the executor the upstream helper publisher
            runs on; default 2.
    """

    max_supported_subscribers: ClassVar[int] = MAX_DEMAND
    does_coordinated_emission: ClassVar[bool] = False
    processor_buffer_size: ClassVar[int] = 16
    helper_executor_workers: ClassVar[int] = 2

    @abstractmethod
    def create_identity_processor(self, buffer_size: int) -> Processor[Any, Any]:
        """A new identity processor buffering at most ``buffer_size`` elements."""

    # -- wiring ----------------------------------------------------------------------------

    def helper_executor(self) -> Executor:
        """The executor of the upstream helper publisher, one per test."""
        executor: Executor | None = self.__dict__.get("_tck_executor")
        if executor is None:
            pool = ThreadPoolExecutor(
                max_workers=self.helper_executor_workers, thread_name_prefix="tck-helper"
            )
            self.__dict__["_tck_executor"] = pool
            self.add_cleanup(lambda: pool.shutdown(wait=False, cancel_futures=True))
            self.add_cleanup(lambda: self.__dict__.pop("_tck_executor", None))
            executor = pool
        return executor

    def create_helper_publisher(self, elements: int) -> Publisher[Any]:
        """The upstream of the processor in the publisher tests: exactly ``elements`` elements."""
        return HelperPublisher(
            elements, executor=self.helper_executor(), create_element=self.create_element
        )

    def _processor(self) -> Processor[Any, Any]:
        try:
            processor = self.create_identity_processor(self.processor_buffer_size)
        except Exception as exc:
            raise TckFailure(
                f"create_identity_processor({self.processor_buffer_size}) raised "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        if processor is None:
            raise TckFailure("create_identity_processor() returned None")
        return processor

    def create_publisher(self, elements: int) -> Publisher[Any]:
        """The processor, subscribed to a helper publisher of ``elements`` elements."""
        processor = self._processor()
        self.create_helper_publisher(elements).subscribe(processor)
        return processor

    def create_subscriber(self, probe: WhiteboxSubscriberProbe) -> Subscriber[Any]:
        """The processor, with a downstream subscriber that reports to ``probe``."""
        processor = self._processor()
        processor.subscribe(_ProbeDownstream(probe))
        return processor

    # -- the processor's own tests ------------------------------------------------------------

    def _multi(self) -> None:
        if self.max_supported_subscribers < 2:
            self.skip(
                f"needs 2 subscribers, but max_supported_subscribers = "
                f"{self.max_supported_subscribers}"
            )

    def _wired(self) -> tuple[ManualPublisher, Processor[Any, Any]]:
        upstream = ManualPublisher(self.env, rule=self.current_rule)
        processor = self._processor()
        upstream.subscribe(processor)
        return upstream, processor

    def _downstream(self, processor: Processor[Any, Any]) -> ManualSubscriber:
        sub = ManualSubscriber(self.env)
        subscription = subscribe(self.env, processor, sub)
        self.add_cleanup(subscription.cancel)
        return sub

    def _send_from_upstream(self, upstream: ManualPublisher, index: int) -> Any:
        upstream.expect_demand("Rule 2.1: the processor must request from its upstream")
        element = self.create_element(index)
        upstream.send_next(element)
        return element

    @staticmethod
    def _same_error(received: BaseException, sent: BaseException, what: str) -> None:
        if received is not sent and received.__cause__ is not sent:
            raise TckFailure(f"{what}; got {received!r} instead of {sent!r}")

    @tck_test("1.4", Kind.REQUIRED)
    def test_required_spec104_must_call_on_error_on_all_its_subscribers_if_it_encounters_a_non_recoverable_error(  # noqa: E501
        self,
    ) -> None:
        """An upstream error reaches every downstream subscriber."""
        self._multi()
        upstream, processor = self._wired()
        first = self._downstream(processor)
        second = self._downstream(processor)
        first.request(1)
        if self.does_coordinated_emission:
            second.request(1)
        self._send_from_upstream(upstream, 0)
        first.next_element("Rule 1.4: the requested element must reach the first subscriber")
        if self.does_coordinated_emission:
            second.next_element("Rule 1.4: the requested element must reach the second subscriber")
        error = TckTestError("TCK: upstream failure for Rule 1.4")
        upstream.send_error(error)
        for sub, name in ((first, "first"), (second, "second")):
            received = sub.expect_error(
                Exception, f"Rule 1.4: the upstream error must reach the {name} subscriber"
            )
            self._same_error(received, error, f"Rule 1.4: the {name} subscriber got another error")

    @tck_test("4.2", Kind.REQUIRED)
    def test_required_spec402_must_immediately_pass_on_on_error_events_received_from_its_upstream_to_its_downstream(  # noqa: E501
        self,
    ) -> None:
        """An upstream error reaches a downstream subscriber that has no demand."""
        upstream, processor = self._wired()
        sub = self._downstream(processor)
        error = TckTestError("TCK: upstream failure for Rule 4.2")
        upstream.send_error(error)
        received = sub.expect_error(
            Exception, "Rule 4.2: an upstream on_error must reach downstream without a request"
        )
        self._same_error(received, error, "Rule 4.2: the downstream subscriber got another error")

    @tck_test("2.1", Kind.REQUIRED)
    def test_required_spec201_must_request_from_upstream_for_elements_that_have_been_requested_long_ago(  # noqa: E501
        self,
    ) -> None:
        """Demand of an early subscriber keeps flowing after a late one joins."""
        self._multi()
        upstream, processor = self._wired()
        first = self._downstream(processor)
        first.request(20)
        x = self._send_from_upstream(upstream, 0)
        if first.next_element("Rule 2.1: the requested element must arrive") != x:
            raise TckFailure("Rule 2.1: the processor changed the element")
        second = self._downstream(processor)
        if self.does_coordinated_emission:
            second.request(1)
        z = self._send_from_upstream(upstream, 1)
        if first.next_element("Rule 2.1: the early subscriber's demand must still be served") != z:
            raise TckFailure("Rule 2.1: the processor changed the element")
        if not self.does_coordinated_emission:
            second.expect_none("Rule 1.1: the late subscriber requested nothing yet")
            second.request(1)
        if second.next_element("Rule 2.1: the late subscriber must get what it requests") != z:
            raise TckFailure("Rule 2.1: the processor changed the element")
        upstream.send_completion()
        first.expect_completion("Rule 1.5: completion must reach the first subscriber")
        second.expect_completion("Rule 1.5: completion must reach the second subscriber")
