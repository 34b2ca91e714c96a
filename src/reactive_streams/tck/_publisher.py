"""``PublisherVerification``: the publisher half of the TCK (Rules 1.x and 3.x).

Every test of the reference JVM TCK's ``PublisherVerification`` is here with its
classification and the rule token in its name, plus tests the reference leaves out:
serial signalling under concurrent requests and no element while ``on_subscribe`` still
runs (Rule 1.3), concurrent cancel (Rule 3.5), the subscribers a publisher gives its own
sources (Rule 2.3: no ``request``/``cancel`` from inside their ``on_complete``/``on_error``),
``request(MAX_DEMAND)`` from inside ``on_subscribe`` over an endless synchronous source
(Rule 3.3: it returns, and the publisher reads a bounded number of elements ahead),
``request``/``cancel`` that must never raise (Rules 3.15, 3.16), a raising subscriber
(Rule 2.13), a subscriber subscribed twice (Rule 1.10), non-``int`` demand (Rule 3.9) and
property-based random demand/cancel schedules (Rules 1.1, 1.7, 3.3).
"""

from __future__ import annotations

import gc
import random
import threading
import time
import weakref
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar

from .._core import MAX_DEMAND, set_undeliverable_hook
from ._base import VerificationBase
from ._cases import Kind, TckCase, tck_test
from ._environment import TckFailure
from ._sources import EndlessSource, TerminatingProbe
from ._support import END_OF_STREAM, ManualSubscriber, subscribe

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..api import Publisher, Subscription
    from ._environment import TestEnvironment

__all__ = ["PublisherVerification"]

_CONCURRENT_THREADS = 4
_CONCURRENT_ELEMENTS = 64
_CANCEL_AT = 5
"""The element at which the endless-source tests cancel."""


class _DeliberateFailure(Exception):
    """Raised by the TCK's own subscriber to test Rule 2.13; never a real problem."""


class PublisherVerification(VerificationBase, ABC):
    """Verifies a ``Publisher`` against Rules 1.1-1.11 and 3.1-3.17.

    Subclass it in a test module and implement ``create_publisher``; pytest runs every
    inherited test::

        class TestRangePublisher(PublisherVerification):
            def create_publisher(self, elements: int) -> Publisher[int]:
                return RangePublisher(0, elements)

    Knobs (class attributes):
        max_elements_from_publisher: the most elements ``create_publisher`` can produce;
            tests needing more are skipped. ``MAX_DEMAND`` declares a publisher that never
            completes: every test that needs ``on_complete`` is skipped. Default
            ``MAX_DEMAND - 1``.
        bounded_depth_of_on_next_and_request_recursion: how deep ``on_next -> request ->
            on_next`` may nest on one thread (Rule 3.3); default 1 (a trampoline).
        skip_stochastic_tests: skip the ``stochastic`` tests; default ``False``.
        stochastic_iterations: how often the Rule 1.3 stochastic test repeats; default 100.
        property_examples: how many random schedules the property test tries; default 25.
        max_read_ahead: the most elements the publisher may take from an endless
            synchronous source beyond those it delivered (the bound of its buffers), in
            the ``request``-from-``on_subscribe`` tests; default 1024.

    Hooks for the tests of a publisher's own sources (``None``, the default, skips them):
    ``create_publisher_from(source)`` and ``create_publisher_with_source(source)``.
    """

    max_elements_from_publisher: ClassVar[int] = MAX_DEMAND - 1
    bounded_depth_of_on_next_and_request_recursion: ClassVar[int] = 1
    skip_stochastic_tests: ClassVar[bool] = False
    stochastic_iterations: ClassVar[int] = 100
    property_examples: ClassVar[int] = 25
    max_read_ahead: ClassVar[int] = 1024

    # -- what implementers provide --------------------------------------------------------

    @abstractmethod
    def create_publisher(self, elements: int) -> Publisher[Any]:
        """A publisher that emits exactly ``elements`` elements then completes.

        ``elements == MAX_DEMAND`` asks for an infinite stream. Element values are free
        (never ``None``). Called once or more per test, possibly for several subscribers.
        """

    def create_failed_publisher(self) -> Publisher[Any] | None:
        """A publisher that signals ``on_subscribe`` then ``on_error`` to every subscriber.

        Return ``None`` (the default) to skip the failed-publisher tests (Rules 1.4, 1.9).
        """
        return None

    def create_publisher_from(self, source: Publisher[Any]) -> Publisher[Any] | None:
        """The publisher under test, reading its elements from ``source`` (its upstream).

        ``source`` is an ``EndlessSource``: endless, synchronous (it emits inside
        ``request``, on the caller's thread) and for one subscriber. The publisher must
        go on emitting what it makes of it. Return ``None`` (the default) to skip the
        endless-source tests (Rule 3.3).
        """
        return None

    def create_publisher_with_source(self, source: Publisher[Any]) -> Publisher[Any] | None:
        """The publisher under test, subscribing to ``source`` as one of its inputs.

        For a publisher with other sources (a trigger, a lane, an inner, a fallback) put
        ``source`` in one of those places: the Rule 2.3 tests signal ``on_subscribe`` and
        at once ``on_complete`` or ``on_error`` to the subscriber the publisher gives it.
        The default is ``create_publisher_from(source)``; ``None`` skips the tests.
        """
        return self.create_publisher_from(source)

    # -- helpers ------------------------------------------------------------------------

    def case_skip_reason(self, case: TckCase) -> str | None:
        """Skip stochastic tests when ``skip_stochastic_tests`` is set."""
        if case.kind is Kind.STOCHASTIC and self.skip_stochastic_tests:
            return "skipped by the knob skip_stochastic_tests = True"
        return None

    def _active(self, elements: int, *, completion: bool) -> Publisher[Any]:
        """``create_publisher(elements)``, skipping when the knobs say it cannot serve."""
        maximum = self.max_elements_from_publisher
        if elements > maximum:
            self.skip(
                f"needs a publisher of {elements} elements, but max_elements_from_publisher"
                f" = {maximum}"
            )
        if completion and maximum == MAX_DEMAND:
            self.skip(
                "needs on_complete, but max_elements_from_publisher = MAX_DEMAND declares a "
                "publisher that never completes"
            )
        return self._made(
            f"create_publisher({elements})", lambda: self.create_publisher(elements), skip=None
        )

    def _made(
        self, call: str, factory: Callable[[], Publisher[Any] | None], *, skip: str | None
    ) -> Publisher[Any]:
        """``factory()``: a raise fails the test; ``None`` skips it with ``skip`` (or fails)."""
        try:
            publisher = factory()
        except Exception as exc:
            raise TckFailure(f"{call} raised {type(exc).__name__}: {exc}") from exc
        if publisher is None:
            if skip is None:
                raise TckFailure(f"{call} returned None")
            self.skip(skip)
        return publisher

    def _failed(self) -> Publisher[Any]:
        return self._made(
            "create_failed_publisher()",
            self.create_failed_publisher,
            skip="create_failed_publisher() returned None: override it to run the "
            "failed-publisher tests",
        )

    def _subscribe(
        self,
        publisher: Publisher[Any],
        subscriber: ManualSubscriber | None = None,
        *,
        rule: str = "1.9",
        cleanup: bool = True,
    ) -> ManualSubscriber:
        """Subscribe a ``ManualSubscriber`` (a new one by default) and wait for on_subscribe."""
        sub = ManualSubscriber(self.env) if subscriber is None else subscriber
        subscription = subscribe(self.env, publisher, sub, rule)
        if cleanup:
            self.add_cleanup(subscription.cancel)
        return sub

    @staticmethod
    def _request_raw(subscription: Subscription, n: object, rule: str, expected: str) -> None:
        try:
            subscription.request(n)  # type: ignore[arg-type]
        except Exception as exc:
            raise TckFailure(
                f"Rule {rule}: request({n!r}) must {expected}, but it raised "
                f"{type(exc).__name__}: {exc} to the caller (Rule 3.16)"
            ) from exc

    # -- setup and configuration --------------------------------------------------------

    @tck_test("setup", Kind.REQUIRED)
    def test_required_create_publisher1_must_produce_a_stream_of_exactly1_element(self) -> None:
        """create_publisher(1) emits one element, then completes."""
        sub = self._subscribe(self._active(1, completion=True))
        sub.request_next_element("create_publisher(1): request(1) must produce an element")
        sub.request_end_of_stream(
            "create_publisher(1) must produce exactly 1 element: after it, request(1) must "
            "produce on_complete"
        )

    @tck_test("setup", Kind.REQUIRED)
    def test_required_create_publisher3_must_produce_a_stream_of_exactly3_elements(self) -> None:
        """create_publisher(3) emits three elements, then completes."""
        sub = self._subscribe(self._active(3, completion=True))
        for index in range(3):
            sub.request_next_element(
                f"create_publisher(3): request(1) #{index + 1} must produce an element"
            )
        sub.request_end_of_stream(
            "create_publisher(3) must produce exactly 3 elements: after them, request(1) "
            "must produce on_complete"
        )

    @tck_test("config", Kind.REQUIRED)
    def test_required_validate_max_elements_from_publisher(self) -> None:
        """The knob max_elements_from_publisher is a non-negative int."""
        value = self.max_elements_from_publisher
        if not isinstance(value, int) or value < 0:
            raise TckFailure(f"max_elements_from_publisher must be an int >= 0, got {value!r}")

    @tck_test("config", Kind.REQUIRED)
    def test_required_validate_bounded_depth_of_on_next_and_request_recursion(self) -> None:
        """The knob bounded_depth_of_on_next_and_request_recursion is at least 1."""
        value = self.bounded_depth_of_on_next_and_request_recursion
        if not isinstance(value, int) or value < 1:
            raise TckFailure(
                f"bounded_depth_of_on_next_and_request_recursion must be an int >= 1, got {value!r}"
            )

    # -- Rule 1.x -----------------------------------------------------------------------

    @tck_test("1.1", Kind.REQUIRED)
    def test_required_spec101_subscription_request_must_result_in_the_correct_number_of_produced_elements(  # noqa: E501
        self,
    ) -> None:
        """Exactly the requested number of elements arrives, never more."""
        sub = self._subscribe(self._active(5, completion=False))
        sub.expect_none("Rule 1.1: no element may arrive before any request")
        sub.request_next_element("Rule 1.1: request(1) must produce an element")
        sub.expect_none("Rule 1.1: request(1) must produce exactly one element")
        sub.request(1)
        sub.request(2)
        sub.next_elements(3, "Rule 1.1: request(1) then request(2) must produce 3 elements")
        sub.expect_none("Rule 1.1: no element may arrive beyond the 4 requested")
        sub.cancel()

    @tck_test("1.2", Kind.REQUIRED)
    def test_required_spec102_may_signal_less_than_requested_and_terminate_subscription(
        self,
    ) -> None:
        """A 3-element stream asked for 10 gives 3 elements and on_complete."""
        sub = self._subscribe(self._active(3, completion=True))
        sub.request(10)
        sub.next_elements(
            3, "Rule 1.2: request(10) on a 3-element publisher must produce 3 elements"
        )
        sub.expect_completion(
            "Rule 1.2: after its 3 elements the publisher must signal on_complete"
        )

    @tck_test("1.3", Kind.STOCHASTIC)
    def test_stochastic_spec103_must_signal_on_methods_sequentially(self) -> None:
        """Signals never overlap while the subscriber requests from on_next (repeated)."""
        self._active(10, completion=True)
        for iteration in range(self.stochastic_iterations):
            sub = _RequestOnNextSubscriber(self.env, on_subscribe=1, per_element=1)
            self._subscribe(self._active(10, completion=True), sub)
            finished = sub.wait_for(lambda s=sub: s._terminal is not None, 10 * self.env.timeout)  # type: ignore[misc]
            self.env.verify_no_async_errors_no_delay()
            if not finished:
                raise TckFailure(
                    f"Rule 1.3: iteration {iteration}: a 10-element publisher requested one "
                    f"element at a time did not complete within {10 * self.env.timeout:g} s "
                    f"({sub.delivered} elements delivered)"
                )

    @tck_test("1.3", Kind.REQUIRED)
    def test_required_spec103_must_signal_serially_when_requests_come_from_several_threads(
        self,
    ) -> None:
        """Beyond the JVM TCK: requests from several threads never make signals overlap.

        The requests are serialised by the subscriber (Rule 2.7) but come from different
        threads at once; the publisher must still signal serially (Rule 1.3).
        """
        total = _CONCURRENT_THREADS * _CONCURRENT_ELEMENTS
        sub = _SlowSubscriber(self.env)
        self._subscribe(self._active(total, completion=False), sub)
        request_lock = threading.Lock()  # Rule 2.7: the subscriber's calls are serial
        barrier = threading.Barrier(_CONCURRENT_THREADS, timeout=self.env.timeout)
        problems: list[str] = []

        def requester() -> None:
            try:
                barrier.wait()
                for _ in range(_CONCURRENT_ELEMENTS):
                    with request_lock:
                        sub.request(1)
            except Exception as exc:
                problems.append(f"{type(exc).__name__}: {exc}")

        threads = [
            threading.Thread(target=requester, name=f"tck-requester-{index}", daemon=True)
            for index in range(_CONCURRENT_THREADS)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10 * self.env.timeout)
        if problems:
            raise TckFailure(f"Rule 1.3: a concurrent request failed: {problems[0]}")
        self.env.verify_no_async_errors_no_delay()
        if not sub.wait_for(lambda: sub._delivered >= total, 10 * self.env.timeout):
            self.env.verify_no_async_errors_no_delay()
            raise TckFailure(
                f"Rule 1.3: {total} requests of 1 from {_CONCURRENT_THREADS} threads must "
                f"produce {total} elements; got {sub.delivered}"
            )
        sub.cancel()

    @tck_test("1.3", Kind.REQUIRED)
    def test_required_spec103_must_not_signal_on_next_before_on_subscribe_returns(
        self,
    ) -> None:
        """Beyond the JVM TCK: no element arrives on another thread while on_subscribe runs.

        The subscriber requests 3 from ``on_subscribe`` and then stays in it for
        ``no_signals_timeout`` seconds, waiting for an element. An ``on_next`` on the
        same thread, from inside that ``request``, is allowed (Rule 3.3 bounds it); one
        that starts on another thread before ``on_subscribe`` returned overlaps it
        (Rule 1.3). The subscriber waits for the element it asked for, so a publisher that
        delivers concurrently is caught every time, not by chance as in the stochastic
        test.
        """
        sub = _LingeringSubscriber(self.env, request=3, linger=self.env.no_signals_timeout)
        self._subscribe(self._active(3, completion=False), sub)
        self.env.verify_no_async_errors_no_delay()
        sub.next_elements(3, "the 3 elements requested from on_subscribe")
        self.env.verify_no_async_errors_no_delay()
        if sub.overlap is not None:
            raise TckFailure(sub.overlap)

    @tck_test("1.4", Kind.OPTIONAL, failure_is_skip=False)
    def test_optional_spec104_must_signal_on_error_when_fails(self) -> None:
        """A failed publisher signals on_subscribe then on_error, and does not raise."""
        publisher = self._failed()
        sub = self._subscribe(publisher, rule="1.4")
        sub.expect_error(Exception, "Rule 1.4: a failed publisher must signal on_error")
        sub.expect_none("Rule 1.7: nothing may follow on_error")

    @tck_test("1.5", Kind.REQUIRED)
    def test_required_spec105_must_signal_on_complete_when_finite_stream_terminates(
        self,
    ) -> None:
        """A finite stream ends with on_complete, and then nothing."""
        sub = self._subscribe(self._active(3, completion=True))
        for index in range(3):
            sub.request_next_element(f"Rule 1.5: request(1) #{index + 1} must produce an element")
        sub.request_end_of_stream("Rule 1.5: a finite stream must signal on_complete at its end")
        sub.expect_none("Rule 1.7: nothing may follow on_complete")

    @tck_test("1.5", Kind.OPTIONAL)
    def test_optional_spec105_empty_stream_must_terminate_by_signalling_on_complete(
        self,
    ) -> None:
        """An empty stream completes."""
        sub = self._subscribe(self._active(0, completion=True))
        sub.request(1)
        sub.expect_completion("Rule 1.5: an empty stream must signal on_complete")
        sub.expect_none("Rule 1.7: nothing may follow on_complete")

    @tck_test("1.6", Kind.UNTESTED, reason="not testable without more control over the publisher")
    def test_untested_spec106_must_consider_subscription_cancelled_after_on_error_or_on_complete_has_been_called(  # noqa: E501
        self,
    ) -> None:
        """Rule 1.6 is not verified."""

    @tck_test("1.7", Kind.REQUIRED)
    def test_required_spec107_must_not_emit_further_signals_once_on_complete_has_been_signalled(
        self,
    ) -> None:
        """After on_complete, more requests produce nothing."""
        sub = self._subscribe(self._active(1, completion=True))
        sub.request(10)
        sub.next_element("Rule 1.7: request(10) on a 1-element publisher must produce 1 element")
        sub.expect_completion("Rule 1.7: after its only element the publisher must complete")
        sub.request(10)
        sub.expect_none("Rule 1.7: no signal may follow on_complete, even after request(10)")

    @tck_test("1.7", Kind.UNTESTED, reason="needs a publisher that fails on demand; see spec104")
    def test_untested_spec107_must_not_emit_further_signals_once_on_error_has_been_signalled(
        self,
    ) -> None:
        """Rule 1.7 after on_error is not verified."""

    @tck_test(
        "1.8", Kind.UNTESTED, reason="cannot be decided: a cancel may race with a terminal signal"
    )
    def test_untested_spec108_possibly_cancelled_subscription_should_not_receive_on_error_or_on_complete_signals(  # noqa: E501
        self,
    ) -> None:
        """Rule 1.8 is not verified."""

    @tck_test("1.9", Kind.UNTESTED, reason="no generic way to make subscribe fail non-fatally")
    def test_untested_spec109_subscribe_should_not_throw_non_fatal_exception(self) -> None:
        """Rule 1.9 (no raising from subscribe) is not verified in general."""

    @tck_test("1.9", Kind.REQUIRED)
    def test_required_spec109_subscribe_throw_type_error_on_none_subscriber(self) -> None:
        """subscribe(None) raises TypeError to the caller."""
        publisher = self._active(0, completion=False)
        try:
            publisher.subscribe(None)  # type: ignore[arg-type]
        except TypeError:
            return
        except Exception as exc:
            raise TckFailure(
                f"Rule 1.9: subscribe(None) must raise TypeError, but it raised "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        raise TckFailure("Rule 1.9: subscribe(None) returned normally; it must raise TypeError")

    @tck_test("1.9", Kind.REQUIRED)
    def test_required_spec109_must_issue_on_subscribe_for_non_none_subscriber(self) -> None:
        """on_subscribe comes first, exactly once, before the stream's first element too.

        Every ``ManualSubscriber`` flops a signal that arrives before ``on_subscribe`` as a
        Rule 1.9 violation; this test makes sure one element is asked for, so that a
        publisher that sends its first ``on_next`` early fails here, on this rule.
        """
        sub = self._subscribe(self._active(0, completion=False))
        self.env.verify_no_async_errors()
        sub.drain()
        if self.max_elements_from_publisher >= 1:
            sub = self._subscribe(self._active(1, completion=False))
            sub.request(1)
            sub.next_element("Rule 1.9: after on_subscribe and request(1), one element")
            self.env.verify_no_async_errors()

    @tck_test("1.9", Kind.REQUIRED)
    def test_required_spec109_may_reject_calls_to_subscribe_if_publisher_is_unable_or_unwilling_to_serve_them_rejection_must_trigger_on_error_after_on_subscribe(  # noqa: E501
        self,
    ) -> None:
        """A rejecting (failed) publisher signals on_subscribe, then on_error."""
        publisher = self._failed()
        sub = self._subscribe(publisher)
        sub.expect_error(
            Exception,
            "Rule 1.9: a publisher that rejects a subscriber must signal on_error after "
            "on_subscribe",
        )
        sub.expect_none("Rule 1.7: nothing may follow on_error")

    @tck_test(
        "1.10", Kind.UNTESTED, reason="the rule binds the caller; see the optional spec110 test"
    )
    def test_untested_spec110_reject_a_subscription_request_if_the_same_subscriber_subscribes_twice(
        self,
    ) -> None:
        """Rule 1.10 is not verified as in the reference TCK."""

    @tck_test("1.10", Kind.OPTIONAL)
    def test_optional_spec110_same_subscriber_subscribed_twice_must_not_receive_on_subscribe_twice(
        self,
    ) -> None:
        """Beyond the JVM TCK: subscribing the same subscriber again must not break it.

        The second ``subscribe`` must return normally and must not call ``on_subscribe``
        again (Rule 2.12); the first subscription keeps working.
        """
        publisher = self._active(3, completion=False)
        sub = ManualSubscriber(self.env)
        sub.duplicate_subscribe_rule = "1.10"
        self._subscribe(publisher, sub, rule="1.10")
        try:
            publisher.subscribe(sub)
        except Exception as exc:
            raise TckFailure(
                f"Rule 1.10: subscribing the same subscriber twice raised "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        self.env.verify_no_async_errors()
        sub.request_next_element(
            "Rule 1.10: after a second subscribe of the same subscriber, the first "
            "subscription must still deliver"
        )

    @tck_test("1.11", Kind.OPTIONAL)
    def test_optional_spec111_may_support_multi_subscribe(self) -> None:
        """Two subscribers can subscribe."""
        publisher = self._active(1, completion=False)
        self._subscribe(publisher)
        self._subscribe(publisher)
        self.env.verify_no_async_errors()

    @tck_test("1.11", Kind.OPTIONAL)
    def test_optional_spec111_registered_subscribers_must_receive_on_next_or_on_complete_signals(
        self,
    ) -> None:
        """Each of two subscribers gets an element or the end of the stream."""
        publisher = self._active(1, completion=False)
        first = self._subscribe(publisher)
        second = self._subscribe(publisher)
        first.request(1)
        second.request(1)
        first.next_element_or_end_of_stream("Rule 1.11: the first subscriber got nothing")
        second.next_element_or_end_of_stream("Rule 1.11: the second subscriber got nothing")
        self.env.verify_no_async_errors()

    @tck_test("1.11", Kind.OPTIONAL)
    def test_optional_spec111_multicast_must_produce_the_same_elements_in_the_same_sequence_to_all_of_its_subscribers_when_requesting_one_by_one(  # noqa: E501
        self,
    ) -> None:
        """Three subscribers requesting in interleaved amounts see the same sequence."""
        publisher = self._active(5, completion=True)
        one, two, three = (self._subscribe(publisher) for _ in range(3))
        what = "Rule 1.11: each subscriber must receive its requested elements"
        one.request(1)
        x = [one.next_element(what)]
        two.request(2)
        y = two.next_elements(2, what)
        one.request(1)
        x.append(one.next_element(what))
        three.request(3)
        z = three.next_elements(3, what)
        three.request(1)
        z.append(three.next_element(what))
        three.request(1)
        z.append(three.next_element(what))
        three.request(MAX_DEMAND)
        three.expect_completion("Rule 1.11: after 5 elements the stream must complete")
        two.request(3)
        y.extend(two.next_elements(3, what))
        two.request(MAX_DEMAND)
        two.expect_completion("Rule 1.11: after 5 elements the stream must complete")
        one.request(3)
        x.extend(one.next_elements(3, what))
        one.request(1)
        one.expect_completion("Rule 1.11: after 5 elements the stream must complete")
        _same_sequences(x, y, z)

    @tck_test("1.11", Kind.OPTIONAL)
    def test_optional_spec111_multicast_must_produce_the_same_elements_in_the_same_sequence_to_all_of_its_subscribers_when_requesting_many_upfront(  # noqa: E501
        self,
    ) -> None:
        """Three subscribers requesting 4 each from a 3-element stream see the same sequence."""
        publisher = self._active(3, completion=False)
        subs = [self._subscribe(publisher) for _ in range(3)]
        for sub in subs:
            sub.request(4)
        sequences = [
            sub.next_elements(3, "Rule 1.11: request(4) must produce 3 elements") for sub in subs
        ]
        _same_sequences(*sequences)

    @tck_test("1.11", Kind.OPTIONAL)
    def test_optional_spec111_multicast_must_produce_the_same_elements_in_the_same_sequence_to_all_of_its_subscribers_when_requesting_many_upfront_and_complete_as_expected(  # noqa: E501
        self,
    ) -> None:
        """As above, and every subscriber sees on_complete."""
        publisher = self._active(3, completion=True)
        subs = [self._subscribe(publisher) for _ in range(3)]
        for sub in subs:
            sub.request(4)
        sequences = [
            sub.next_elements(3, "Rule 1.11: request(4) must produce 3 elements") for sub in subs
        ]
        for sub in subs:
            sub.expect_completion("Rule 1.11: every subscriber must see on_complete")
        _same_sequences(*sequences)

    # -- Rule 2.13, seen from the publisher ------------------------------------------------

    @tck_test("2.13", Kind.REQUIRED)
    def test_required_spec213_subscriber_raising_from_on_next_must_be_treated_as_cancelled(
        self,
    ) -> None:
        """Beyond the JVM TCK: once on_next raised, the publisher stops signalling."""
        sub = _RaisingSubscriber(self.env)
        self._quiet_deliberate_failures()
        subscription = self._subscribe(self._active(10, completion=False), sub).subscription
        assert subscription is not None
        with sub._cond:
            sub._requested += 5
        try:
            subscription.request(5)
        except _DeliberateFailure as exc:
            raise TckFailure(
                "Rule 2.13: the exception raised by on_next escaped from request(5) "
                "(Rule 3.16); the publisher must catch it, treat the subscription as "
                "cancelled and report it"
            ) from exc
        except Exception as exc:
            raise TckFailure(f"Rule 3.16: request(5) raised {type(exc).__name__}: {exc}") from exc
        sub.next_element("Rule 2.13: request(5) must produce an element")
        sub.expect_none(
            "Rule 2.13: after on_next raised, the subscription must be treated as cancelled "
            "and receive no further signal"
        )
        self._request_raw(subscription, 1, "2.13", "be a no-op after on_next raised")
        sub.expect_none(
            "Rule 2.13: after on_next raised, the subscription is cancelled and request(1) "
            "must be a no-op"
        )

    def _quiet_deliberate_failures(self) -> None:
        """Keep the TCK's own deliberate Rule 2.13 failure out of the error log.

        Publishers built on this package report a raising subscriber through the
        undeliverable hook; during this test, reports caused by the TCK's deliberate
        exception are dropped and everything else still reaches the previous hook.
        """
        previous = set_undeliverable_hook(None)

        def hook(error: BaseException) -> None:
            cause: BaseException | None = error
            while cause is not None:
                if isinstance(cause, _DeliberateFailure):
                    return
                cause = cause.__cause__
            previous(error)

        set_undeliverable_hook(hook)
        self.add_cleanup(lambda: set_undeliverable_hook(previous))

    # -- Rule 3.x -----------------------------------------------------------------------

    @tck_test("3.2", Kind.REQUIRED)
    def test_required_spec302_must_allow_synchronous_request_calls_from_on_next_and_on_subscribe(
        self,
    ) -> None:
        """Request may be called from on_subscribe (three times) and from every on_next."""
        sub = _RequestOnNextSubscriber(self.env, on_subscribe=3, per_element=1, limit=6)
        self._subscribe(self._active(6, completion=False), sub)
        if not sub.wait_for(lambda: sub._delivered >= 6 or sub._terminal is not None):
            raise TckFailure(
                f"Rule 3.2: with request(1) x3 from on_subscribe and request(1) from each "
                f"on_next, 6 elements must arrive; got {sub.delivered}"
            )
        self.env.verify_no_async_errors()

    @tck_test("3.3", Kind.REQUIRED)
    def test_required_spec303_must_not_allow_unbounded_recursion(self) -> None:
        """on_next -> request -> on_next nests at most bounded_depth... deep on one thread."""
        bound = self.bounded_depth_of_on_next_and_request_recursion
        sub = _RecursionSubscriber(self.env, bound)
        self._subscribe(self._active(bound + 1, completion=False), sub)
        try:
            sub.request(1)
        except RecursionError as exc:
            raise TckFailure(
                "Rule 3.3: on_next -> request -> on_next recursion overflowed the stack; "
                "use a trampoline"
            ) from exc
        sub.wait_for(
            lambda: sub._delivered >= bound + 1 or sub.stopped or sub._terminal is not None
        )
        self.env.verify_no_async_errors()

    @tck_test("3.4", Kind.UNTESTED, reason="'heavy computation' has no portable definition")
    def test_untested_spec304_request_should_not_perform_heavy_computations(self) -> None:
        """Rule 3.4 is not verified."""

    @tck_test(
        "3.5",
        Kind.UNTESTED,
        reason="'heavy computation' has no portable definition; see the spec305 concurrency test",
    )
    def test_untested_spec305_cancel_must_not_synchronously_perform_heavy_computation(
        self,
    ) -> None:
        """Rule 3.5 (responsiveness) is not verified."""

    @tck_test("3.5", Kind.REQUIRED)
    def test_required_spec305_cancel_from_many_threads_at_once_must_be_thread_safe_and_idempotent(
        self,
    ) -> None:
        """Beyond the JVM TCK: cancel() from 8 threads at once returns normally, once in effect."""
        sub = self._subscribe(self._active(20, completion=False))
        subscription = sub.subscription
        assert subscription is not None
        sub.request(2)
        sub.next_elements(2, "Rule 3.5: request(2) must produce 2 elements")
        threads_count = 8
        barrier = threading.Barrier(threads_count, timeout=self.env.timeout)
        problems: list[str] = []

        def canceller() -> None:
            try:
                barrier.wait()
                subscription.cancel()
            except threading.BrokenBarrierError:
                problems.append("the threads did not start together")
            except Exception as exc:
                problems.append(f"{type(exc).__name__}: {exc}")

        threads = [threading.Thread(target=canceller, daemon=True) for _ in range(threads_count)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10 * self.env.timeout)
        if any(thread.is_alive() for thread in threads):
            raise TckFailure("Rule 3.5: concurrent cancel() calls did not return (deadlock?)")
        if problems:
            raise TckFailure(
                f"Rule 3.5: cancel() from several threads at once raised {problems[0]}"
            )
        sub.request(1)
        sub.expect_none(
            "Rule 3.5: after concurrent cancel() calls the subscription must be cancelled"
        )

    @tck_test("3.6", Kind.REQUIRED)
    def test_required_spec306_after_subscription_is_cancelled_request_must_be_nops(self) -> None:
        """Request after cancel does nothing."""
        sub = self._subscribe(self._active(3, completion=False))
        sub.cancel()
        sub.request(1)
        sub.request(1)
        sub.request(1)
        sub.expect_none("Rule 3.6: after cancel(), request(n) must be a no-op")
        self.env.verify_no_async_errors_no_delay()

    @tck_test("3.7", Kind.REQUIRED)
    def test_required_spec307_after_subscription_is_cancelled_additional_cancelations_must_be_nops(
        self,
    ) -> None:
        """Cancel after cancel does nothing."""
        sub = self._subscribe(self._active(1, completion=False))
        sub.cancel()
        sub.cancel()
        sub.cancel()
        sub.expect_none("Rule 3.7: after cancel(), cancel() must be a no-op")
        self.env.verify_no_async_errors_no_delay()

    def _expect_demand_error(self, n: object, kind: type[Exception]) -> BaseException:
        sub = self._subscribe(self._active(10, completion=False))
        subscription = sub.subscription
        assert subscription is not None
        expected = f"signal on_error({kind.__name__})"
        self._request_raw(subscription, n, "3.9", expected)
        return sub.expect_error(kind, f"Rule 3.9: request({n!r}) must {expected}")

    @tck_test("3.9", Kind.REQUIRED)
    def test_required_spec309_request_zero_must_signal_value_error(self) -> None:
        """request(0) signals on_error(ValueError)."""
        self._expect_demand_error(0, ValueError)

    @tck_test("3.9", Kind.REQUIRED)
    def test_required_spec309_request_negative_number_must_signal_value_error(self) -> None:
        """request(-n) signals on_error(ValueError)."""
        self._expect_demand_error(-random.randint(1, 2**31), ValueError)

    @tck_test("3.9", Kind.OPTIONAL)
    def test_optional_spec309_request_negative_number_may_signal_value_error_with_specific_message(
        self,
    ) -> None:
        """The ValueError's message cites Rule 3.9 or says the request was non-positive."""
        error = self._expect_demand_error(-random.randint(1, 2**31), ValueError)
        message = str(error)
        if not any(
            token in message
            for token in (
                "3.9",
                "non-positive subscription request",
                "negative subscription request",
            )
        ):
            raise TckFailure(
                f"Rule 3.9: the error message should cite Rule 3.9 or say 'non-positive "
                f"subscription request'; got {message!r}"
            )

    @tck_test("3.9", Kind.REQUIRED)
    def test_required_spec309_request_non_int_must_signal_type_error(self) -> None:
        """Beyond the JVM TCK: a non-int request (1.5, "1", None, True) signals TypeError."""
        for bad in (1.5, "1", None, True):
            self._expect_demand_error(bad, TypeError)

    @tck_test("3.12", Kind.REQUIRED)
    def test_required_spec312_cancel_must_make_the_publisher_to_eventually_stop_signaling(
        self,
    ) -> None:
        """After cancel the publisher stops, having sent at most what was requested."""
        sub = self._subscribe(self._active(20, completion=False))
        sub.request(10)
        sub.request(5)
        total_demand = 15
        sub.next_element("Rule 3.12: request(10) + request(5) must produce elements")
        sub.cancel()
        signalled = 1
        while True:
            late = [signal for signal, _ in sub.drain() if signal == "on_next"]
            signalled += len(late)
            if signalled > total_demand:
                raise TckFailure(
                    f"Rule 3.12: the publisher signalled {signalled} elements after cancel, "
                    f"more than the {total_demand} requested"
                )
            if not sub.wait_for(lambda: bool(sub._inbox), self.env.no_signals_timeout):
                break
        self.env.verify_no_async_errors_no_delay()

    @tck_test("3.12", Kind.REQUIRED)
    def test_required_spec312_cancel_from_within_on_next_must_stop_on_next_at_once(
        self,
    ) -> None:
        """Beyond the JVM TCK: a cancel from inside ``on_next`` is the last ``on_next``.

        Rule 3.12 lets a cancel take effect "eventually", because it may come from any
        thread. A cancel from inside ``on_next`` comes from the thread that signals, which
        can check for it before the next ``on_next`` (as Reactor's operators do): a
        publisher that sends the rest of a batch after it delivers elements nobody wants.
        """
        sub = _CancelInOnNextSubscriber(self.env)
        self._subscribe(self._active(3, completion=False), sub)
        sub.request(3)
        sub.next_element("Rule 3.12: request(3) must produce an element")
        sub.wait_for(lambda: sub.late > 0, self.env.no_signals_timeout)
        if sub.late:
            raise TckFailure(
                f"Rule 3.12: the subscriber cancelled from inside its first on_next, yet "
                f"{sub.late} more on_next signal(s) followed; check for cancel before each "
                "on_next"
            )
        sub.drain()  # a terminal signal after cancel is tolerated (Rule 1.8 is untested)
        self.env.verify_no_async_errors_no_delay()

    @tck_test("3.13", Kind.REQUIRED)
    def test_required_spec313_cancel_must_make_the_publisher_eventually_drop_all_references_to_the_subscriber(  # noqa: E501
        self,
    ) -> None:
        """After cancel the subscriber becomes garbage (weakref + gc.collect())."""
        publisher = self._active(3, completion=False)
        reference = self._subscribe_and_cancel(publisher)
        deadline = time.monotonic() + self.env.gc_timeout
        pause = threading.Event()
        while True:
            gc.collect()
            if reference() is None:
                return
            if time.monotonic() >= deadline:
                break
            pause.wait(self.env.poll_interval)
        raise TckFailure(
            f"Rule 3.13: {self.env.gc_timeout:g} s after cancel() the publisher still "
            f"references the subscriber (gc.collect() could not free it)"
        )

    def _subscribe_and_cancel(self, publisher: Publisher[Any]) -> weakref.ref[ManualSubscriber]:
        sub = self._subscribe(publisher, cleanup=False)
        sub.request_next_element("Rule 3.13: request(1) must produce an element")
        sub.cancel()
        sub.drain()
        return weakref.ref(sub)

    @tck_test("3.15", Kind.REQUIRED)
    def test_required_spec315_cancel_must_return_normally(self) -> None:
        """Beyond the JVM TCK: cancel returns normally before any request and after completion."""
        first = self._subscribe(self._active(1, completion=False))
        first.cancel()
        first.cancel()
        if self.max_elements_from_publisher == MAX_DEMAND:
            return
        second = self._subscribe(self._active(1, completion=True))
        second.request(2)
        second.next_element(
            "Rule 3.15: request(2) on a 1-element publisher must produce an element"
        )
        second.expect_completion("Rule 3.15: the 1-element publisher must complete")
        second.cancel()
        second.cancel()

    @tck_test("3.16", Kind.REQUIRED)
    def test_required_spec316_request_must_return_normally_even_with_bad_arguments(
        self,
    ) -> None:
        """Beyond the JVM TCK: request never raises, whatever its argument or state.

        Only the return is checked here. Each bad ``n`` owes an ``on_error`` (Rule 3.9, the
        spec309 tests check it); an asynchronous publisher may deliver it late, so the test
        waits for a terminal signal (up to ``timeout``) before it cancels and takes it.
        """
        for bad in (0, -1, 1.5, "3", None, True, object()):
            sub = self._subscribe(self._active(3, completion=False))
            subscription = sub.subscription
            assert subscription is not None
            try:
                subscription.request(bad)  # type: ignore[arg-type]
            except Exception as exc:
                raise TckFailure(
                    f"Rule 3.16: request({bad!r}) raised {type(exc).__name__}: {exc}; it must "
                    f"return normally and signal on_error"
                ) from exc
            sub.wait_for_terminal()  # the owed Rule 3.9 error, however late it comes
            sub.cancel()
            sub.drain()
        sub = self._subscribe(
            self._active(3, completion=False),
            _RequestOnNextSubscriber(self.env, on_subscribe=0, per_element=0, limit=3),
        )
        sub.request(2**64)  # above MAX_DEMAND: capped, effectively unbounded (Rule 3.17)
        sub.next_elements(3, "Rule 3.16: request(2**64) must be accepted as unbounded demand")
        sub.cancel()
        sub.request(1)  # after cancel

    @tck_test("3.17", Kind.REQUIRED)
    def test_required_spec317_must_support_a_pending_element_count_up_to_max_demand(
        self,
    ) -> None:
        """request(MAX_DEMAND) gives every element and on_complete."""
        sub = self._subscribe(self._active(3, completion=True))
        sub.request(MAX_DEMAND)
        sub.next_elements(3, "Rule 3.17: request(MAX_DEMAND) must produce all 3 elements")
        sub.expect_completion("Rule 3.17: request(MAX_DEMAND) must lead to on_complete")
        self.env.verify_no_async_errors()

    @tck_test("3.17", Kind.REQUIRED)
    def test_required_spec317_must_support_a_cumulative_pending_element_count_up_to_max_demand(
        self,
    ) -> None:
        """request(MAX//2) twice plus request(1) (exactly MAX_DEMAND) gives every element."""
        sub = self._subscribe(self._active(3, completion=True))
        sub.request(MAX_DEMAND // 2)
        sub.request(MAX_DEMAND // 2)
        sub.request(1)
        sub.next_elements(
            3, "Rule 3.17: a cumulative demand of MAX_DEMAND must produce all 3 elements"
        )
        sub.expect_completion(
            "Rule 3.17: a cumulative demand of MAX_DEMAND must lead to on_complete"
        )
        self.env.verify_no_async_errors()

    @tck_test("3.17", Kind.REQUIRED)
    def test_required_spec317_must_not_signal_on_error_when_pending_above_max_demand(
        self,
    ) -> None:
        """Demand past MAX_DEMAND saturates: no on_error, and elements keep coming."""
        calls = 10
        sub = _OverflowSubscriber(self.env, calls)
        self._subscribe(self._active(2**31 - 1, completion=False), sub)
        sub.request(1)
        sub.wait_for(lambda: sub._delivered >= calls or sub._terminal is not None)
        if sub.terminal == "on_error":
            raise TckFailure(
                f"Rule 3.17: demand above MAX_DEMAND must saturate, but the publisher "
                f"signalled on_error({sub.error!r})"
            )
        if sub.delivered < calls:
            raise TckFailure(
                f"Rule 3.17: with more than MAX_DEMAND requested the publisher must keep "
                f"emitting; only {sub.delivered} of {calls} elements arrived"
            )
        self.env.verify_no_async_errors()

    # -- the publisher's own sources --------------------------------------------------------

    @tck_test("2.3", Kind.REQUIRED)
    def test_required_spec203_must_not_call_its_sources_subscription_from_on_complete(
        self,
    ) -> None:
        """Beyond the JVM TCK: the subscriber a publisher gives a source keeps Rule 2.3.

        As the JVM blackbox test ``required_spec203`` does to a subscriber: the source
        signals ``on_subscribe`` and at once ``on_complete``; no ``request`` or ``cancel``
        may reach its subscription during ``on_complete`` (the publisher may run its
        drain there, on the same thread: it must leave the ended source out).
        """
        self._terminate_source(None)

    @tck_test("2.3", Kind.REQUIRED)
    def test_required_spec203_must_not_call_its_sources_subscription_from_on_error(
        self,
    ) -> None:
        """Beyond the JVM TCK: as above, with ``on_error`` after ``on_subscribe``."""
        self._terminate_source(RuntimeError("TCK: the source failed (expected)"))

    def _terminate_source(self, error: Exception | None) -> None:
        signal = "on_complete" if error is None else "on_error"
        probe = TerminatingProbe(self.env)
        publisher = self._made(
            "create_publisher_with_source()",
            lambda: self.create_publisher_with_source(probe),
            skip="create_publisher_with_source() returned None: override it (or "
            "create_publisher_from) to run the tests of the publisher's own sources",
        )
        sub = _AnyEndSubscriber(self.env)  # requests 16 from on_subscribe
        try:
            publisher.subscribe(sub)
        except Exception as exc:
            raise TckFailure(f"Rule 1.9: subscribe() raised {type(exc).__name__}: {exc}") from exc

        def cancel() -> None:
            if sub.subscription is not None:
                sub.cancel()

        self.add_cleanup(cancel)
        probe.terminate(error, f"before its {signal}")
        if probe.violations:
            raise TckFailure(
                f"Rule 2.3: the subscriber the publisher gave its source called "
                f"{', '.join(probe.violations)} on that source's subscription from inside "
                f"its {signal} (an ended source must be left out of a cancel-all)"
            )
        self.env.verify_no_async_errors_no_delay()

    @tck_test("3.3", Kind.REQUIRED)
    def test_required_spec303_request_max_inside_on_subscribe_over_an_endless_synchronous_source(
        self,
    ) -> None:
        """Beyond the JVM TCK: request(MAX_DEMAND) in on_subscribe over an endless source.

        The source emits synchronously on the thread that requests. ``on_subscribe``
        must return; the subscriber cancels at its fifth element, which must arrive; and
        the publisher must not read more than ``max_read_ahead`` elements beyond those it
        delivered (its buffers stay bounded whatever the subscriber requests).
        """
        self._read_endless(initial=MAX_DEMAND, later=0)

    @tck_test("3.3", Kind.REQUIRED)
    def test_required_spec303_request_one_inside_on_subscribe_then_max_over_an_endless_synchronous_source(  # noqa: E501
        self,
    ) -> None:
        """Beyond the JVM TCK: request(1) in on_subscribe, then request(MAX_DEMAND) in on_next.

        The pattern of the Rule 3.17 tests, over an endless synchronous source: the
        first element must arrive, the second request must not stall the stream, the
        fifth element must arrive, and the read-ahead stays within ``max_read_ahead``.
        """
        self._read_endless(initial=1, later=MAX_DEMAND)

    def _read_endless(self, *, initial: int, later: int) -> None:
        env = self.env
        bound = self.max_read_ahead
        source = EndlessSource(cap=_CANCEL_AT + bound + 1)
        self.add_cleanup(source.stop)
        publisher = self._made(
            "create_publisher_from()",
            lambda: self.create_publisher_from(source),
            skip="create_publisher_from() returned None: override it to run the "
            "endless-source tests",
        )
        sub = _EndlessReader(env, initial=initial, later=later)
        label = f"request({initial}) inside on_subscribe" + (
            f", then request({later}) inside the first on_next" if later else ""
        )
        worker = threading.Thread(
            target=lambda: publisher.subscribe(sub), name="tck-endless", daemon=True
        )
        worker.start()
        if not sub.wait_for(lambda: sub.returned, 10 * env.timeout):
            source.stop()
            raise TckFailure(
                f"Rule 3.3: on_subscribe did not return within {10 * env.timeout:g} s after "
                f"{label} over an endless synchronous source (the source had emitted "
                f"{source.emitted} elements, {sub.delivered} delivered)"
            )
        if not sub.wait_for(lambda: sub._delivered >= _CANCEL_AT or sub._terminal is not None):
            source.stop()
            raise TckFailure(
                f"Rule 1.1: after {label} over an endless synchronous source only "
                f"{sub.delivered} of {_CANCEL_AT} elements arrived (the source had emitted "
                f"{source.emitted}: the publisher keeps them)"
            )
        worker.join(env.timeout)
        ahead = source.emitted - sub.delivered
        if source.capped or ahead > bound:
            raise TckFailure(
                f"Rule 3.3: after {label}, the publisher read {source.emitted} elements from "
                f"an endless synchronous source and delivered {sub.delivered}: more than "
                f"max_read_ahead = {bound} ahead, so its buffer grows without bound"
                + ("" if sub.returned_at is None else f" ({sub.returned_at})")
            )
        env.verify_no_async_errors()

    # -- property-based schedules -----------------------------------------------------------

    @tck_test("1.1", Kind.REQUIRED)
    def test_required_spec101_spec107_spec303_random_demand_and_cancel_schedules(self) -> None:
        """Beyond the JVM TCK: random demand/cancel schedules keep Rules 1.1, 1.7 and 3.3.

        Needs ``hypothesis``; skipped without it.
        """
        try:
            from hypothesis import HealthCheck, Phase, given, settings  # noqa: PLC0415
            from hypothesis import strategies as st  # noqa: PLC0415
        except ImportError:
            self.skip("needs the hypothesis package (pip install hypothesis)")
        maximum = min(self.max_elements_from_publisher, 12)
        completes = self.max_elements_from_publisher != MAX_DEMAND
        operation = st.one_of(
            st.tuples(st.just("request"), st.integers(min_value=1, max_value=5)),
            st.tuples(st.just("reentrant"), st.integers(min_value=1, max_value=5)),
            st.tuples(st.just("cancel"), st.just(0)),
        )

        @settings(
            max_examples=self.property_examples,
            deadline=None,
            database=None,
            derandomize=True,
            phases=(Phase.explicit, Phase.generate),
            suppress_health_check=list(HealthCheck),
        )
        @given(
            elements=st.integers(min_value=0, max_value=maximum),
            schedule=st.lists(operation, max_size=8),
        )
        def check(elements: int, schedule: list[tuple[str, int]]) -> None:
            self._run_schedule(elements, schedule, completes=completes)

        check()

    def _run_schedule(
        self, elements: int, schedule: list[tuple[str, int]], *, completes: bool
    ) -> None:
        env = self.env
        sub = _ScheduleSubscriber(env, self.bounded_depth_of_on_next_and_request_recursion)
        self._subscribe(self._active(elements, completion=False), sub)
        label = f"elements={elements}, schedule={schedule}"
        for action, amount in schedule:
            if action == "cancel":
                sub.cancel()
                break
            if action == "reentrant":
                with sub._cond:
                    sub.reentrant.append(amount)
                    waiting = sub._delivered < min(sub._requested, elements)
                if waiting:
                    continue
                with sub._cond:
                    if amount in sub.reentrant:
                        sub.reentrant.remove(amount)
            sub.request(amount)

            def settled() -> bool:
                # Every requested element has arrived; once more was requested than the
                # stream has, on_complete must arrive too (a publisher may need that extra
                # demand to find out that its source is exhausted).
                target = min(sub._requested, elements)
                if sub._terminal is not None:
                    return True
                if sub._delivered < target:
                    return False
                return not (completes and sub._requested > elements)

            if not sub.wait_for(settled):
                raise TckFailure(
                    f"Rule 1.1: the publisher stalled: requested {sub.requested}, delivered "
                    f"{sub.delivered} of {elements} within {env.timeout:g} s ({label})"
                )
        problems = [str(error) for error in env.async_errors]
        if problems:
            raise TckFailure(f"{problems[0]} ({label})")
        sub.cancel()


def _same_sequences(*sequences: list[Any]) -> None:
    first = sequences[0]
    for other in sequences[1:]:
        if other != first:
            raise TckFailure(
                f"Rule 1.11: subscribers received different sequences: "
                f"{[list(seq) for seq in sequences]!r}"
            )


class _RequestOnNextSubscriber(ManualSubscriber):
    """Requests 1 ``on_subscribe`` times from on_subscribe and ``per_element`` per element.

    With a ``limit`` it cancels once that many elements arrived, so that an infinite
    synchronous publisher does not keep the test thread busy forever.
    """

    def __init__(
        self,
        env: TestEnvironment,
        *,
        on_subscribe: int,
        per_element: int,
        limit: int | None = None,
    ) -> None:
        super().__init__(env)
        self._initial = on_subscribe
        self._per_element = per_element
        self._limit = limit

    def when_subscribed(self, subscription: Subscription) -> None:
        for _ in range(self._initial):
            self.request(1)

    def when_next(self, element: Any) -> None:
        if self._limit is not None and self._delivered >= self._limit:
            if self._delivered == self._limit:
                self.cancel()
            return
        if self._per_element:
            self.request(self._per_element)


class _LingeringSubscriber(ManualSubscriber):
    """Requests from ``on_subscribe``, then stays in it until an element or ``linger`` s.

    An ``on_next`` that starts on another thread while ``on_subscribe`` is still running
    is recorded in ``overlap`` and flopped (Rule 1.3); one nested on the subscribing
    thread (inside its own ``request``) is allowed.
    """

    def __init__(self, env: TestEnvironment, *, request: int, linger: float) -> None:
        super().__init__(env)
        self._initial = request
        self._linger = linger
        self._arrived = threading.Event()
        self._subscribing: int | None = None
        self.overlap: str | None = None

    def when_subscribed(self, subscription: Subscription) -> None:
        self._subscribing = threading.get_ident()
        try:
            self.request(self._initial)
            self._arrived.wait(self._linger)  # an element may come at once, on any thread
        finally:
            self._subscribing = None

    def on_next(self, element: Any) -> None:
        subscribing = self._subscribing
        if subscribing is not None and subscribing != threading.get_ident():
            self.overlap = (
                f"Rule 1.3: on_next({element!r}) started on thread "
                f"{threading.current_thread().name} while on_subscribe, which had requested "
                f"{self._initial}, was still running on another thread"
            )
            self.env.flop(self.overlap)
        self._arrived.set()
        super().on_next(element)


class _AnyEndSubscriber(ManualSubscriber):
    """Requests 16 from on_subscribe; takes ``on_error`` as an ordinary end.

    A source that fails may make the whole stream fail, so the error is not a failure
    here; and the publisher may signal ``on_subscribe`` only once its source has (an
    operator over one upstream), so the demand is made there.
    """

    def when_subscribed(self, subscription: Subscription) -> None:
        self.request(16)

    def on_error(self, error: Exception) -> None:
        with self._cond:
            if self._terminal is None:
                self._terminal = "on_error"
                self._error = error
            self._cond.notify_all()


class _EndlessReader(ManualSubscriber):
    """Requests ``initial`` in on_subscribe and ``later`` in its first on_next; cancels at 5.

    ``returned`` says ``on_subscribe`` has returned; ``returned_at`` how many elements the
    source had delivered by then.
    """

    def __init__(self, env: TestEnvironment, *, initial: int, later: int) -> None:
        super().__init__(env, record_elements=False)
        self._initial = initial
        self._later = later
        self._seen = 0
        self.returned = False
        self.returned_at: str | None = None

    def when_subscribed(self, subscription: Subscription) -> None:
        self.request(self._initial)
        with self._cond:
            self.returned = True
            arrived = self._delivered
            self.returned_at = f"{arrived} element(s) had arrived when on_subscribe returned"
            self._cond.notify_all()

    def when_next(self, element: Any) -> None:
        self._seen += 1
        if self._seen == 1 and self._later:
            self.request(self._later)
        if self._seen == _CANCEL_AT:
            self.cancel()


class _SlowSubscriber(ManualSubscriber):
    """Each on_next lasts a moment (simulated work), widening the window for overlaps."""

    def when_next(self, element: Any) -> None:
        threading.Event().wait(0.0005)


class _RaisingSubscriber(ManualSubscriber):
    """Raises from its first on_next (a Rule 2.13 violation the publisher must absorb)."""

    def when_next(self, element: Any) -> None:
        if self._delivered == 1:
            raise _DeliberateFailure("TCK: a subscriber that raises from on_next (Rule 2.13)")


class _CancelInOnNextSubscriber(ManualSubscriber):
    """Cancels from inside its first ``on_next``; counts the ``on_next`` calls after it."""

    def __init__(self, env: TestEnvironment) -> None:
        super().__init__(env)
        self.late = 0

    def when_next(self, element: Any) -> None:
        if self._delivered > 1:
            with self._cond:
                self.late += 1
                self._cond.notify_all()
            return
        self.cancel()


class _RecursionSubscriber(ManualSubscriber):
    """Requests 1 from every on_next and measures the nesting depth on each thread."""

    def __init__(self, env: TestEnvironment, bound: int) -> None:
        super().__init__(env)
        self._bound = bound
        self._local = threading.local()
        self.stopped = False

    def when_next(self, element: Any) -> None:
        depth = getattr(self._local, "depth", 0) + 1
        self._local.depth = depth
        try:
            if depth > self._bound:
                self.stopped = True
                self.env.flop(
                    f"Rule 3.3: on_next -> request -> on_next nested {depth} deep on one "
                    f"thread; bounded_depth_of_on_next_and_request_recursion = {self._bound}"
                )
                return
            if not self.stopped and self._delivered <= self._bound:
                self.request(1)
        finally:
            self._local.depth = depth - 1


class _OverflowSubscriber(ManualSubscriber):
    """Requests MAX_DEMAND - 1 from each of its first ``calls`` on_next, then cancels."""

    def __init__(self, env: TestEnvironment, calls: int) -> None:
        super().__init__(env, record_elements=False)
        self._calls = calls
        self._seen = 0

    def when_next(self, element: Any) -> None:
        self._seen += 1
        if self._seen < self._calls:
            self.request(MAX_DEMAND - 1)
        elif self._seen == self._calls:
            self.cancel()


class _ScheduleSubscriber(ManualSubscriber):
    """Checks Rule 3.3 depth and performs queued re-entrant requests from on_next."""

    def __init__(self, env: TestEnvironment, bound: int) -> None:
        super().__init__(env, record_elements=False)
        self._bound = bound
        self._local = threading.local()
        self.reentrant: list[int] = []

    def when_next(self, element: Any) -> None:
        depth = getattr(self._local, "depth", 0) + 1
        self._local.depth = depth
        try:
            if depth > self._bound:
                self.env.flop(
                    f"Rule 3.3: on_next -> request -> on_next nested {depth} deep on one "
                    f"thread; bounded_depth_of_on_next_and_request_recursion = {self._bound}"
                )
                return
            with self._cond:
                amount = self.reentrant.pop(0) if self.reentrant else 0
            if amount:
                self.request(amount)
        finally:
            self._local.depth = depth - 1


_ = END_OF_STREAM  # re-exported through the package for implementers' own tests
