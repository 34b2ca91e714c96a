"""The subscriber half of the TCK (Rules 2.x and the subscriber's side of 3.x).

``SubscriberWhiteboxVerification`` needs the subscriber's cooperation: it reports every
signal it processes to a ``WhiteboxSubscriberProbe`` and hands the TCK a
``SubscriberPuppet`` through which the TCK makes it request or cancel.
``SubscriberBlackboxVerification`` needs nothing: the TCK only watches the calls the
subscriber makes on its subscription. In both, the TCK is the upstream (a
``ManualPublisher``) and checks Rules 2.3, 2.5, 2.7 and the caller side of 3.9 as the
subscriber calls it.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections import deque
from typing import TYPE_CHECKING, Any, Final

from ..api import Subscriber, Subscription
from ._base import VerificationBase
from ._cases import Kind, tck_test
from ._environment import TckFailure
from ._support import ManualPublisher, describe, is_none

if TYPE_CHECKING:
    from collections.abc import Callable

    from ._environment import TestEnvironment

__all__ = [
    "SubscriberBlackboxVerification",
    "SubscriberPuppet",
    "SubscriberWhiteboxVerification",
    "TckTestError",
    "WhiteboxSubscriberProbe",
    "probed",
]

_BLACKBOX_UNTESTABLE: Final = "cannot be meaningfully tested as black box"
_UNTESTABLE: Final = "cannot be meaningfully tested, or can it?"


class TckTestError(Exception):
    """The error the TCK sends with ``on_error``; never a real problem."""


class SubscriberPuppet(ABC):
    """Lets the TCK make the subscriber under test request or cancel (whitebox tests)."""

    @abstractmethod
    def trigger_request(self, n: int) -> None:
        """Make the subscriber call ``request(n)`` on its subscription, soon."""

    @abstractmethod
    def signal_cancel(self) -> None:
        """Make the subscriber call ``cancel()`` on its subscription, soon."""


class WhiteboxSubscriberProbe:
    """What the subscriber under test reports to, from any thread.

    The subscriber calls ``register_on_subscribe(puppet)`` when it has processed
    ``on_subscribe``, and ``register_on_next``/``register_on_complete``/
    ``register_on_error`` when it has processed those signals. The TCK then expects on
    the probe.

    Args:
        env: the environment of the current test.
    """

    def __init__(self, env: TestEnvironment) -> None:
        self.env = env
        self._cond = threading.Condition(threading.Lock())
        self._puppet: SubscriberPuppet | None = None
        self._inbox: deque[tuple[str, object]] = deque()

    # -- called by the subscriber under test -------------------------------------------------

    def register_on_subscribe(self, puppet: SubscriberPuppet) -> None:
        """The subscriber processed ``on_subscribe``; ``puppet`` drives it from now on."""
        with self._cond:
            duplicate = self._puppet is not None
            if not duplicate:
                self._puppet = puppet
            self._cond.notify_all()
        if duplicate:
            self.env.flop("Rule 2.12: the subscriber registered on_subscribe twice with the probe")

    def register_on_next(self, element: Any) -> None:
        """The subscriber processed ``on_next(element)``."""
        self._record("on_next", element)

    def register_on_complete(self) -> None:
        """The subscriber processed ``on_complete``."""
        self._record("on_complete", None)

    def register_on_error(self, error: BaseException) -> None:
        """The subscriber processed ``on_error(error)``."""
        self._record("on_error", error)

    def _record(self, signal: str, value: object) -> None:
        with self._cond:
            self._inbox.append((signal, value))
            self._cond.notify_all()

    # -- expectations, on the test thread ------------------------------------------------------

    def puppet(self) -> SubscriberPuppet:
        """The puppet, waiting for ``register_on_subscribe``.

        Raises:
            TckFailure: the subscriber did not register within ``env.timeout``.
        """
        with self._cond:
            if not self._cond.wait_for(lambda: self._puppet is not None, self.env.timeout):
                raise TckFailure(
                    f"Rule 2.1: the subscriber did not call probe.register_on_subscribe "
                    f"within {self.env.timeout:g} s of on_subscribe"
                )
            assert self._puppet is not None
            return self._puppet

    def _next(self, what: str) -> tuple[str, object]:
        with self._cond:
            if not self._cond.wait_for(lambda: bool(self._inbox), self.env.timeout):
                raise TckFailure(
                    f"{what}; the subscriber reported nothing within {self.env.timeout:g} s"
                )
            return self._inbox.popleft()

    def expect_next(self, element: Any, what: str) -> None:
        """The next report must be ``on_next(element)``."""
        signal, value = self._next(what)
        if signal != "on_next" or value != element:
            raise TckFailure(
                f"{what}; expected on_next({element!r}), got {describe(signal, value)}"
            )

    def expect_completion(self, what: str) -> None:
        """The next report must be ``on_complete``."""
        signal, value = self._next(what)
        if signal != "on_complete":
            raise TckFailure(f"{what}; expected on_complete(), got {describe(signal, value)}")

    def expect_error(self, error: BaseException | None, what: str) -> BaseException:
        """The next report must be ``on_error`` (with ``error`` itself, if given)."""
        signal, value = self._next(what)
        if signal != "on_error" or (error is not None and value is not error):
            expected = "on_error" if error is None else describe("on_error", error)
            raise TckFailure(f"{what}; expected {expected}, got {describe(signal, value)}")
        assert isinstance(value, BaseException)
        return value

    def expect_none(self, what: str) -> None:
        """Nothing may be reported for ``no_signals_timeout``."""
        with self._cond:
            if self._cond.wait_for(lambda: bool(self._inbox), self.env.no_signals_timeout):
                signal, value = self._inbox[0]
                raise TckFailure(f"{what}; got {describe(signal, value)}")


class _SubscriptionPuppet(SubscriberPuppet):
    """A puppet that calls the subscription directly (what ``probed`` uses)."""

    def __init__(self, subscription: Subscription, cancel: Callable[[], None] | None) -> None:
        self._subscription = subscription
        self._cancel = cancel

    def trigger_request(self, n: int) -> None:
        self._subscription.request(n)

    def signal_cancel(self) -> None:
        if self._cancel is not None:
            self._cancel()
        else:
            self._subscription.cancel()


class _Probed(Subscriber[Any]):
    def __init__(
        self,
        subscriber: Subscriber[Any],
        probe: WhiteboxSubscriberProbe,
        cancel: Callable[[], None] | None,
    ) -> None:
        self._subscriber = subscriber
        self._probe = probe
        self._cancel = cancel
        self._subscribed = False

    def on_subscribe(self, subscription: Subscription) -> None:
        self._subscriber.on_subscribe(subscription)
        if not self._subscribed:
            self._subscribed = True
            self._probe.register_on_subscribe(_SubscriptionPuppet(subscription, self._cancel))

    def on_next(self, element: Any) -> None:
        self._subscriber.on_next(element)
        self._probe.register_on_next(element)

    def on_error(self, error: Exception) -> None:
        self._subscriber.on_error(error)
        self._probe.register_on_error(error)

    def on_complete(self) -> None:
        self._subscriber.on_complete()
        self._probe.register_on_complete()


def probed(
    subscriber: Subscriber[Any],
    probe: WhiteboxSubscriberProbe,
    *,
    cancel: Callable[[], None] | None = None,
) -> Subscriber[Any]:
    """Wrap ``subscriber`` so that it reports to ``probe`` (a whitebox shortcut).

    Each signal is delegated first and reported after it returned. The puppet's
    ``trigger_request`` calls the subscription directly, as the JVM TCK's examples do.

    Args:
        subscriber: the subscriber under test.
        probe: the probe of the running test.
        cancel: what the puppet's ``signal_cancel`` calls, typically the subscriber's own
            ``cancel`` method; by default the subscription's ``cancel``.
    """
    return _Probed(subscriber, probe, cancel)


class _Stage:
    """One subscriber under test, attached to a ``ManualPublisher`` the test drives."""

    def __init__(self, verification: _SubscriberVerificationBase, subscriber: Subscriber[Any]):
        self.verification = verification
        self.env = verification.env
        self.publisher = ManualPublisher(self.env, rule=verification.current_rule)
        self.subscriber = subscriber
        self._index = 0

    def next_element(self) -> Any:
        element = self.verification.create_element(self._index)
        self._index += 1
        return element

    def send_next(self) -> Any:
        element = self.next_element()
        self.publisher.send_next(element)
        return element


def _expect_type_error(call: str, method: Any, argument: None = None) -> None:
    try:
        method(argument)
    except TypeError:
        return
    except Exception as exc:
        raise TckFailure(
            f"Rule 2.13: {call} must raise TypeError, but it raised {type(exc).__name__}: {exc}"
        ) from exc
    raise TckFailure(f"Rule 2.13: {call} returned normally; it must raise TypeError")


class _NoopSubscription(Subscription):
    def request(self, n: int) -> None:
        pass

    def cancel(self) -> None:
        pass


class _SubscriberVerificationBase(VerificationBase):
    def create_element(self, index: int) -> Any:
        """The element to send as number ``index`` (default: ``index``). Never ``None``."""
        return index

    def _attach(self, subscriber: Subscriber[Any]) -> _Stage:
        stage = _Stage(self, subscriber)
        stage.publisher.subscribe(subscriber)
        return stage


class SubscriberWhiteboxVerification(_SubscriberVerificationBase, ABC):
    """Verifies a ``Subscriber`` that reports to a probe (Rules 2.x, 3.8).

    Implement ``create_subscriber(probe)``: return the subscriber under test, which must
    call ``probe.register_on_subscribe(puppet)`` from ``on_subscribe`` and report
    ``on_next``/``on_complete``/``on_error`` to the probe. ``probed(subscriber, probe)``
    does that for a subscriber whose requests may be triggered from outside.

    Knobs: ``create_element(index)`` chooses the elements sent (default: the index).
    """

    @abstractmethod
    def create_subscriber(self, probe: WhiteboxSubscriberProbe) -> Subscriber[Any]:
        """A new subscriber under test that reports to ``probe``."""

    def _whitebox_stage(self) -> tuple[_Stage, WhiteboxSubscriberProbe, SubscriberPuppet]:
        probe = WhiteboxSubscriberProbe(self.env)
        subscriber = self.create_subscriber(probe)
        if subscriber is None:
            raise TckFailure("create_subscriber(probe) returned None")
        stage = self._attach(subscriber)
        return stage, probe, probe.puppet()

    @tck_test("setup", Kind.REQUIRED)
    def test_required_exercise_whitebox_happy_path(self) -> None:
        """Request, receive, request again, receive, cancel."""
        stage, probe, puppet = self._whitebox_stage()
        puppet.trigger_request(1)
        puppet.trigger_request(1)
        first = stage.publisher.expect_request("the puppet's request(1) must reach upstream")
        element = stage.send_next()
        probe.expect_next(element, "the subscriber must process the element sent")
        puppet.trigger_request(1)
        if first == 1:
            stage.publisher.expect_request("the puppet's request(1) must reach upstream")
        element = stage.send_next()
        probe.expect_next(element, "the subscriber must process the element sent")
        puppet.signal_cancel()
        stage.publisher.expect_cancelling("the puppet's cancel must reach upstream")

    @tck_test("2.1", Kind.REQUIRED)
    def test_required_spec201_must_signal_demand_via_subscription_request(self) -> None:
        """A triggered request reaches upstream as request(n > 0)."""
        stage, probe, puppet = self._whitebox_stage()
        puppet.trigger_request(1)
        stage.publisher.expect_request(
            "Rule 2.1: the subscriber must signal demand with request(n)"
        )
        element = stage.send_next()
        probe.expect_next(element, "Rule 2.1: the requested element must be processed")

    @tck_test("2.2", Kind.UNTESTED, reason=_UNTESTABLE)
    def test_untested_spec202_should_asynchronously_dispatch(self) -> None:
        """Rule 2.2 is not verified."""

    def _no_calls_from_terminal(self, terminal: str) -> None:
        stage, probe, _ = self._whitebox_stage()
        if terminal == "on_complete":
            stage.publisher.send_completion()
            probe.expect_completion("Rule 2.3: the subscriber must process on_complete")
        else:
            error = TckTestError("TCK: on_error for Rule 2.3")
            stage.publisher.send_error(error)
            probe.expect_error(error, "Rule 2.3: the subscriber must process on_error")
        self.env.verify_no_async_errors()

    @tck_test("2.3", Kind.REQUIRED)
    def test_required_spec203_must_not_call_methods_on_subscription_or_publisher_in_on_complete(
        self,
    ) -> None:
        """on_complete does not call request or cancel."""
        self._no_calls_from_terminal("on_complete")

    @tck_test("2.3", Kind.REQUIRED)
    def test_required_spec203_must_not_call_methods_on_subscription_or_publisher_in_on_error(
        self,
    ) -> None:
        """on_error does not call request or cancel."""
        self._no_calls_from_terminal("on_error")

    @tck_test("2.4", Kind.UNTESTED, reason=_UNTESTABLE)
    def test_untested_spec204_must_consider_the_subscription_as_cancelled_after_receiving_on_complete_or_on_error(  # noqa: E501
        self,
    ) -> None:
        """Rule 2.4 is not verified."""

    @tck_test("2.5", Kind.REQUIRED)
    def test_required_spec205_must_call_subscription_cancel_if_it_already_has_a_subscription_and_receives_another_on_subscribe_signal(  # noqa: E501
        self,
    ) -> None:
        """A second on_subscribe is answered with cancel() on the second subscription."""
        stage, _, _ = self._whitebox_stage()
        cancelled = stage.publisher.send_extra_subscription()
        cancelled.expect_close(
            "Rule 2.5: a subscriber that already has a subscription must cancel a second one"
        )
        self.env.verify_no_async_errors()

    @tck_test("2.6", Kind.UNTESTED, reason=_UNTESTABLE)
    def test_untested_spec206_must_call_subscription_cancel_if_it_is_no_longer_valid(self) -> None:
        """Rule 2.6 is not verified."""

    @tck_test("2.7", Kind.UNTESTED, reason=_UNTESTABLE)
    def test_untested_spec207_must_ensure_all_calls_on_its_subscription_take_place_from_the_same_thread_or_take_care_of_synchronization(  # noqa: E501
        self,
    ) -> None:
        """Rule 2.7 is not verified here (the TCK's upstream flags overlapping calls)."""

    @tck_test("2.8", Kind.REQUIRED)
    def test_required_spec208_must_be_prepared_to_receive_on_next_signals_after_having_called_subscription_cancel(  # noqa: E501
        self,
    ) -> None:
        """An element in flight after cancel is accepted quietly."""
        stage, _, puppet = self._whitebox_stage()
        puppet.trigger_request(1)
        stage.publisher.expect_request("Rule 2.8: the puppet's request(1) must reach upstream")
        puppet.signal_cancel()
        stage.publisher.expect_cancelling("Rule 2.8: the puppet's cancel must reach upstream")
        stage.send_next()
        puppet.trigger_request(1)
        puppet.trigger_request(1)
        self.env.verify_no_async_errors()

    @tck_test("2.9", Kind.REQUIRED)
    def test_required_spec209_must_be_prepared_to_receive_an_on_complete_signal_with_preceding_request_call(  # noqa: E501
        self,
    ) -> None:
        """on_complete after a request is processed."""
        stage, probe, puppet = self._whitebox_stage()
        puppet.trigger_request(1)
        stage.publisher.send_completion()
        probe.expect_completion("Rule 2.9: on_complete after a request must be processed")
        self.env.verify_no_async_errors()

    @tck_test("2.9", Kind.REQUIRED)
    def test_required_spec209_must_be_prepared_to_receive_an_on_complete_signal_without_preceding_request_call(  # noqa: E501
        self,
    ) -> None:
        """on_complete without any request is processed."""
        stage, probe, _ = self._whitebox_stage()
        stage.publisher.send_completion()
        probe.expect_completion("Rule 2.9: on_complete without a request must be processed")
        self.env.verify_no_async_errors()

    @tck_test("2.10", Kind.REQUIRED)
    def test_required_spec210_must_be_prepared_to_receive_an_on_error_signal_with_preceding_request_call(  # noqa: E501
        self,
    ) -> None:
        """on_error after a request is processed, with that very error."""
        stage, probe, puppet = self._whitebox_stage()
        puppet.trigger_request(1)
        puppet.trigger_request(1)
        error = TckTestError("TCK: on_error for Rule 2.10")
        stage.publisher.send_error(error)
        probe.expect_error(error, "Rule 2.10: on_error after a request must be processed")
        self.env.verify_no_async_errors()

    @tck_test("2.10", Kind.REQUIRED)
    def test_required_spec210_must_be_prepared_to_receive_an_on_error_signal_without_preceding_request_call(  # noqa: E501
        self,
    ) -> None:
        """on_error without any request is processed."""
        stage, probe, _ = self._whitebox_stage()
        error = TckTestError("TCK: on_error for Rule 2.10")
        stage.publisher.send_error(error)
        probe.expect_error(error, "Rule 2.10: on_error without a request must be processed")
        self.env.verify_no_async_errors()

    @tck_test("2.11", Kind.UNTESTED, reason=_UNTESTABLE)
    def test_untested_spec211_must_make_sure_that_all_calls_on_its_methods_happen_before_the_processing_of_the_respective_events(  # noqa: E501
        self,
    ) -> None:
        """Rule 2.11 is not verified as in the reference TCK."""

    @tck_test("2.11", Kind.REQUIRED)
    def test_required_spec211_must_process_signals_sent_serially_from_different_threads(
        self,
    ) -> None:
        """Beyond the JVM TCK: elements sent from a new thread each are all processed in order."""
        stage, probe, puppet = self._whitebox_stage()
        count = 8
        puppet.trigger_request(count)
        elements = []
        problems: list[BaseException] = []
        for _ in range(count):
            stage.publisher.expect_demand(
                f"Rule 2.11: the puppet's request({count}) must reach upstream"
            )
            element = stage.next_element()
            elements.append(element)

            def send(value: Any = element) -> None:
                try:
                    stage.publisher.send_next(value)
                except BaseException as exc:
                    problems.append(exc)

            sender = threading.Thread(target=send, name="tck-sender", daemon=True)
            sender.start()
            sender.join(self.env.timeout)  # the join is the happens-before edge (Rule 1.3)
            if sender.is_alive():
                raise TckFailure("Rule 2.11: on_next did not return (it must not block)")
            if problems:
                raise problems[0]
        for element in elements:
            probe.expect_next(element, "Rule 2.11: every element sent must be processed, in order")
        self.env.verify_no_async_errors()

    @tck_test("2.12", Kind.UNTESTED, reason=_UNTESTABLE)
    def test_untested_spec212_must_not_call_on_subscribe_more_than_once_based_on_object_equality(
        self,
    ) -> None:
        """Rule 2.12 is not verified."""

    @tck_test("2.13", Kind.UNTESTED, reason=_UNTESTABLE)
    def test_untested_spec213_failing_on_signal_invocation(self) -> None:
        """Rule 2.13 (a failing signal method) is not verified."""

    @tck_test("2.13", Kind.REQUIRED)
    def test_required_spec213_on_subscribe_must_raise_type_error_when_parameters_are_none(
        self,
    ) -> None:
        """on_subscribe(None) raises TypeError."""
        subscriber = self.create_subscriber(WhiteboxSubscriberProbe(self.env))
        _expect_type_error("on_subscribe(None)", subscriber.on_subscribe)

    @tck_test("2.13", Kind.REQUIRED)
    def test_required_spec213_on_next_must_raise_type_error_when_parameters_are_none(
        self,
    ) -> None:
        """on_next(None) raises TypeError."""
        stage, _, _ = self._whitebox_stage()
        _expect_type_error("on_next(None)", stage.subscriber.on_next)
        self.env.verify_no_async_errors_no_delay()

    @tck_test("2.13", Kind.REQUIRED)
    def test_required_spec213_on_error_must_raise_type_error_when_parameters_are_none(
        self,
    ) -> None:
        """on_error(None) raises TypeError."""
        stage, _, _ = self._whitebox_stage()
        _expect_type_error("on_error(None)", stage.subscriber.on_error)
        self.env.verify_no_async_errors_no_delay()

    @tck_test("3.1", Kind.UNTESTED, reason=_UNTESTABLE)
    def test_untested_spec301_must_not_be_called_outside_subscriber_context(self) -> None:
        """Rule 3.1 is not verified."""

    @tck_test("3.8", Kind.REQUIRED)
    def test_required_spec308_request_must_register_given_number_elements_to_be_produced(
        self,
    ) -> None:
        """request(2) lets exactly two elements through to the subscriber."""
        stage, probe, puppet = self._whitebox_stage()
        puppet.trigger_request(2)
        granted = stage.publisher.expect_request(
            "Rule 3.8: the puppet's request(2) must reach upstream"
        )
        first = stage.send_next()
        if granted < 2:
            stage.publisher.expect_request(
                "Rule 3.8: the subscriber must request the second element"
            )
        second = stage.send_next()
        probe.expect_next(first, "Rule 3.8: the first requested element must be processed")
        probe.expect_next(second, "Rule 3.8: the second requested element must be processed")
        probe.expect_none("Rule 3.8: nothing beyond the two elements sent may be processed")
        puppet.trigger_request(3)
        self.env.verify_no_async_errors()

    @tck_test("3.10", Kind.UNTESTED, reason=_UNTESTABLE)
    def test_untested_spec310_request_may_synchronously_call_on_next_on_subscriber(self) -> None:
        """Rule 3.10 is not verified."""

    @tck_test("3.11", Kind.UNTESTED, reason=_UNTESTABLE)
    def test_untested_spec311_request_may_synchronously_call_on_complete_or_on_error(self) -> None:
        """Rule 3.11 is not verified."""

    @tck_test("3.14", Kind.UNTESTED, reason=_UNTESTABLE)
    def test_untested_spec314_cancel_may_cause_the_publisher_to_shutdown_if_no_other_subscription_exists(  # noqa: E501
        self,
    ) -> None:
        """Rule 3.14 is not verified."""

    @tck_test("3.15", Kind.UNTESTED, reason=_UNTESTABLE)
    def test_untested_spec315_cancel_must_not_throw_exception_and_must_signal_on_error(
        self,
    ) -> None:
        """Rule 3.15 is a publisher obligation; see PublisherVerification."""

    @tck_test("3.16", Kind.UNTESTED, reason=_UNTESTABLE)
    def test_untested_spec316_request_must_not_throw_exception_and_must_on_error_the_subscriber(
        self,
    ) -> None:
        """Rule 3.16 is a publisher obligation; see PublisherVerification."""


class _BlackboxProxy(Subscriber[Any]):
    """Delegates to the subscriber under test and records what was delivered to it."""

    def __init__(self, subscriber: Subscriber[Any], probe: WhiteboxSubscriberProbe) -> None:
        self._subscriber = subscriber
        self._probe = probe

    def on_subscribe(self, subscription: Subscription) -> None:
        self._subscriber.on_subscribe(subscription)

    def on_next(self, element: Any) -> None:
        self._subscriber.on_next(element)
        self._probe.register_on_next(element)

    def on_error(self, error: Exception) -> None:
        self._subscriber.on_error(error)
        self._probe.register_on_error(error)

    def on_complete(self) -> None:
        self._subscriber.on_complete()
        self._probe.register_on_complete()


class SubscriberBlackboxVerification(_SubscriberVerificationBase, ABC):
    """Verifies a ``Subscriber`` with no cooperation from it (Rules 2.x).

    Implement ``create_subscriber()``. Override ``trigger_request(subscriber)`` if the
    subscriber only requests after an external nudge, and ``create_element(index)`` to
    choose the elements sent.
    """

    @abstractmethod
    def create_subscriber(self) -> Subscriber[Any]:
        """A new subscriber under test."""

    def trigger_request(self, subscriber: Subscriber[Any]) -> None:
        """Hook: make ``subscriber`` request (default: nothing; it requests by itself)."""

    def _blackbox_stage(self) -> tuple[_Stage, WhiteboxSubscriberProbe]:
        subscriber = self.create_subscriber()
        if is_none(subscriber):
            raise TckFailure("create_subscriber() returned None")
        probe = WhiteboxSubscriberProbe(self.env)
        stage = _Stage(self, subscriber)
        stage.publisher.subscribe(_BlackboxProxy(subscriber, probe))
        return stage, probe

    @tck_test("2.1", Kind.REQUIRED)
    def test_required_spec201_blackbox_must_signal_demand_via_subscription_request(self) -> None:
        """The subscriber requests; the elements it asked for and on_complete are accepted."""
        stage, _ = self._blackbox_stage()
        self.trigger_request(stage.subscriber)
        n = stage.publisher.expect_request(
            "Rule 2.1: the subscriber must signal demand with request(n)"
        )
        for _ in range(min(n, 16)):
            if stage.publisher.is_cancelled:
                break
            stage.send_next()
        if not stage.publisher.is_cancelled:
            stage.publisher.send_completion()
        self.env.verify_no_async_errors()

    @tck_test("2.2", Kind.UNTESTED, reason=_UNTESTABLE)
    def test_untested_spec202_blackbox_should_asynchronously_dispatch(self) -> None:
        """Rule 2.2 is not verified."""

    def _blackbox_no_calls_from_terminal(self, terminal: str) -> None:
        stage, probe = self._blackbox_stage()
        if terminal == "on_complete":
            stage.publisher.send_completion()
            probe.expect_completion("Rule 2.3: on_complete must be delivered")
        else:
            error = TckTestError("TCK: on_error for Rule 2.3")
            stage.publisher.send_error(error)
            probe.expect_error(error, "Rule 2.3: on_error must be delivered")
        self.env.verify_no_async_errors()

    @tck_test("2.3", Kind.REQUIRED)
    def test_required_spec203_blackbox_must_not_call_methods_on_subscription_or_publisher_in_on_complete(  # noqa: E501
        self,
    ) -> None:
        """on_complete does not call request or cancel."""
        self._blackbox_no_calls_from_terminal("on_complete")

    @tck_test("2.3", Kind.REQUIRED)
    def test_required_spec203_blackbox_must_not_call_methods_on_subscription_or_publisher_in_on_error(  # noqa: E501
        self,
    ) -> None:
        """on_error does not call request or cancel."""
        self._blackbox_no_calls_from_terminal("on_error")

    @tck_test("2.4", Kind.UNTESTED, reason=_UNTESTABLE)
    def test_untested_spec204_blackbox_must_consider_the_subscription_as_cancelled_after_receiving_on_complete_or_on_error(  # noqa: E501
        self,
    ) -> None:
        """Rule 2.4 is not verified."""

    @tck_test("2.5", Kind.REQUIRED)
    def test_required_spec205_blackbox_must_call_subscription_cancel_if_it_already_has_a_subscription_and_receives_another_on_subscribe_signal(  # noqa: E501
        self,
    ) -> None:
        """A second on_subscribe is cancelled, and never requested from."""
        stage, _ = self._blackbox_stage()
        cancelled = stage.publisher.send_extra_subscription()
        cancelled.expect_close(
            "Rule 2.5: a subscriber that already has a subscription must cancel a second one"
        )
        stage.publisher.send_completion()
        self.env.verify_no_async_errors()

    @tck_test("2.6", Kind.UNTESTED, reason=_UNTESTABLE)
    def test_untested_spec206_blackbox_must_call_subscription_cancel_if_it_is_no_longer_valid(
        self,
    ) -> None:
        """Rule 2.6 is not verified."""

    @tck_test("2.7", Kind.UNTESTED, reason=_UNTESTABLE)
    def test_untested_spec207_blackbox_must_ensure_all_calls_on_its_subscription_take_place_from_the_same_thread_or_take_care_of_synchronization(  # noqa: E501
        self,
    ) -> None:
        """Rule 2.7 is not verified here (the TCK's upstream flags overlapping calls)."""

    @tck_test("2.8", Kind.UNTESTED, reason=_BLACKBOX_UNTESTABLE)
    def test_untested_spec208_blackbox_must_be_prepared_to_receive_on_next_signals_after_having_called_subscription_cancel(  # noqa: E501
        self,
    ) -> None:
        """Rule 2.8 needs the whitebox verification."""

    @tck_test("2.9", Kind.REQUIRED)
    def test_required_spec209_blackbox_must_be_prepared_to_receive_an_on_complete_signal_with_preceding_request_call(  # noqa: E501
        self,
    ) -> None:
        """on_complete after the subscriber's request is delivered."""
        stage, probe = self._blackbox_stage()
        self.trigger_request(stage.subscriber)
        stage.publisher.expect_request("Rule 2.9: the subscriber must request")
        stage.publisher.send_completion()
        probe.expect_completion("Rule 2.9: on_complete after a request must be delivered")
        self.env.verify_no_async_errors()

    @tck_test("2.9", Kind.REQUIRED)
    def test_required_spec209_blackbox_must_be_prepared_to_receive_an_on_complete_signal_without_preceding_request_call(  # noqa: E501
        self,
    ) -> None:
        """on_complete straight after on_subscribe is delivered."""
        stage, probe = self._blackbox_stage()
        stage.publisher.send_completion()
        probe.expect_completion("Rule 2.9: on_complete without a request must be delivered")
        self.env.verify_no_async_errors()

    @tck_test("2.10", Kind.REQUIRED)
    def test_required_spec210_blackbox_must_be_prepared_to_receive_an_on_error_signal_with_preceding_request_call(  # noqa: E501
        self,
    ) -> None:
        """on_error after the subscriber's request is delivered."""
        stage, probe = self._blackbox_stage()
        self.trigger_request(stage.subscriber)
        stage.publisher.expect_request("Rule 2.10: the subscriber must request")
        error = TckTestError("TCK: on_error for Rule 2.10")
        stage.publisher.send_error(error)
        probe.expect_error(error, "Rule 2.10: on_error after a request must be delivered")
        self.env.verify_no_async_errors()

    @tck_test("2.10", Kind.REQUIRED)
    def test_required_spec210_blackbox_must_be_prepared_to_receive_an_on_error_signal_without_preceding_request_call(  # noqa: E501
        self,
    ) -> None:
        """on_error straight after on_subscribe is delivered."""
        stage, probe = self._blackbox_stage()
        error = TckTestError("TCK: on_error for Rule 2.10")
        stage.publisher.send_error(error)
        probe.expect_error(error, "Rule 2.10: on_error without a request must be delivered")
        self.env.verify_no_async_errors()

    @tck_test("2.11", Kind.UNTESTED, reason=_UNTESTABLE)
    def test_untested_spec211_blackbox_must_make_sure_that_all_calls_on_its_methods_happen_before_the_processing_of_the_respective_events(  # noqa: E501
        self,
    ) -> None:
        """Rule 2.11 is not verified."""

    @tck_test("2.12", Kind.UNTESTED, reason=_UNTESTABLE)
    def test_untested_spec212_blackbox_must_not_call_on_subscribe_more_than_once_based_on_object_equality(  # noqa: E501
        self,
    ) -> None:
        """Rule 2.12 is not verified."""

    @tck_test("2.13", Kind.UNTESTED, reason=_UNTESTABLE)
    def test_untested_spec213_blackbox_failing_on_signal_invocation(self) -> None:
        """Rule 2.13 (a failing signal method) is not verified."""

    @tck_test("2.13", Kind.REQUIRED)
    def test_required_spec213_blackbox_on_subscribe_must_raise_type_error_when_parameters_are_none(
        self,
    ) -> None:
        """on_subscribe(None) raises TypeError."""
        _expect_type_error("on_subscribe(None)", self.create_subscriber().on_subscribe)

    @tck_test("2.13", Kind.REQUIRED)
    def test_required_spec213_blackbox_on_next_must_raise_type_error_when_parameters_are_none(
        self,
    ) -> None:
        """on_next(None) raises TypeError, after a no-op on_subscribe."""
        subscriber = self.create_subscriber()
        subscriber.on_subscribe(_NoopSubscription())
        _expect_type_error("on_next(None)", subscriber.on_next)

    @tck_test("2.13", Kind.REQUIRED)
    def test_required_spec213_blackbox_on_error_must_raise_type_error_when_parameters_are_none(
        self,
    ) -> None:
        """on_error(None) raises TypeError, after a no-op on_subscribe."""
        subscriber = self.create_subscriber()
        subscriber.on_subscribe(_NoopSubscription())
        _expect_type_error("on_error(None)", subscriber.on_error)

    @tck_test("3.1", Kind.UNTESTED, reason=_UNTESTABLE)
    def test_untested_spec301_blackbox_must_not_be_called_outside_subscriber_context(self) -> None:
        """Rule 3.1 is not verified."""

    @tck_test("3.8", Kind.UNTESTED, reason=_BLACKBOX_UNTESTABLE)
    def test_untested_spec308_blackbox_request_must_register_given_number_elements_to_be_produced(
        self,
    ) -> None:
        """Rule 3.8 needs the whitebox verification."""

    @tck_test("3.10", Kind.UNTESTED, reason=_UNTESTABLE)
    def test_untested_spec310_blackbox_request_may_synchronously_call_on_next_on_subscriber(
        self,
    ) -> None:
        """Rule 3.10 is not verified."""

    @tck_test("3.11", Kind.UNTESTED, reason=_UNTESTABLE)
    def test_untested_spec311_blackbox_request_may_synchronously_call_on_complete_or_on_error(
        self,
    ) -> None:
        """Rule 3.11 is not verified."""

    @tck_test("3.14", Kind.UNTESTED, reason=_UNTESTABLE)
    def test_untested_spec314_blackbox_cancel_may_cause_the_publisher_to_shutdown_if_no_other_subscription_exists(  # noqa: E501
        self,
    ) -> None:
        """Rule 3.14 is not verified."""

    @tck_test("3.15", Kind.UNTESTED, reason=_UNTESTABLE)
    def test_untested_spec315_blackbox_cancel_must_not_throw_exception_and_must_signal_on_error(
        self,
    ) -> None:
        """Rule 3.15 is a publisher obligation."""

    @tck_test("3.16", Kind.UNTESTED, reason=_UNTESTABLE)
    def test_untested_spec316_blackbox_request_must_not_throw_exception_and_must_on_error_the_subscriber(  # noqa: E501
        self,
    ) -> None:
        """Rule 3.16 is a publisher obligation."""
