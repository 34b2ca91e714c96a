"""Test doubles of the TCK: a manual subscriber, a manual publisher, a latch.

``ManualSubscriber`` is the subscriber the publisher tests attach: it records every signal
in an inbox, checks the publisher's side of the protocol as signals arrive (Rules 1.1,
1.3, 1.7, 1.9, 2.13) and lets the test request, cancel and *expect* (an element, the
completion, an error, or nothing). ``ManualPublisher`` is the upstream the subscriber tests
control: it sends signals on command and records the requests and the cancel it receives,
checking the subscriber's side (Rules 2.3, 2.7, 3.9).

Checks that fail on a thread the test does not own *flop* on the ``TestEnvironment``;
expectations on the test thread raise ``TckFailure`` at once. Every wait has a timeout.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import TYPE_CHECKING, Any, Final

from .._core import StreamStatistics
from ..api import Publisher, Subscriber, Subscription
from ._environment import TckFailure

if TYPE_CHECKING:
    from collections.abc import Callable

    from ._environment import TestEnvironment

__all__ = [
    "END_OF_STREAM",
    "Latch",
    "ManualPublisher",
    "ManualSubscriber",
    "SerialCallChecker",
    "describe",
    "is_none",
    "subscribe",
]


class _EndOfStream:
    __slots__ = ()

    def __repr__(self) -> str:
        return "END_OF_STREAM"


END_OF_STREAM: Final = _EndOfStream()
"""Returned by ``ManualSubscriber.next_element_or_end_of_stream`` after ``on_complete``."""

_NEXT: Final = "on_next"
_COMPLETE: Final = "on_complete"
_ERROR: Final = "on_error"


def is_none(value: object) -> bool:
    """``value is None``, for run-time checks of arguments typed as not optional."""
    return value is None


def describe(signal: str, value: object = None) -> str:
    """Render one recorded signal for a failure message, e.g. ``on_next(3)``."""
    if signal == _COMPLETE:
        return "on_complete()"
    if signal == _ERROR:
        return f"on_error({type(value).__name__}: {value})"
    return f"{signal}({value!r})"


def _fmt(seconds: float) -> str:
    return f"{seconds:g} s"


class Latch:
    """A one-shot gate: ``close()`` once, ``expect_close()`` waits for it with a timeout."""

    __slots__ = ("_env", "_event")

    def __init__(self, env: TestEnvironment) -> None:
        self._env = env
        self._event = threading.Event()

    def close(self) -> None:
        """Close the latch (idempotent); wakes every waiter."""
        self._event.set()

    @property
    def is_closed(self) -> bool:
        """Whether ``close`` was called."""
        return self._event.is_set()

    def expect_close(self, what: str, timeout: float | None = None) -> None:
        """Wait until closed.

        Raises:
            TckFailure: not closed within ``timeout`` (default ``env.timeout``); the
                message is ``what`` followed by the wait.
        """
        wait = self._env.timeout if timeout is None else timeout
        if not self._event.wait(wait):
            raise TckFailure(f"{what}; it did not happen within {_fmt(wait)}")


class SerialCallChecker:
    """Detects overlapping calls from different threads (Rules 1.3 and 2.7).

    A call re-entered on the *same* thread (a synchronous publisher emitting from inside
    ``request``) is not an overlap; Rule 3.3 bounds that case separately.
    """

    __slots__ = ("_env", "_inside", "_lock", "_rule", "_what")

    def __init__(self, env: TestEnvironment, rule: str, what: str) -> None:
        self._env = env
        self._rule = rule
        self._what = what
        self._lock = threading.Lock()
        self._inside: dict[int, int] = {}

    def enter(self, call: str) -> None:
        """Mark the start of ``call`` on this thread; flop if another thread is inside."""
        me = threading.get_ident()
        with self._lock:
            others = [ident for ident, depth in self._inside.items() if depth and ident != me]
            self._inside[me] = self._inside.get(me, 0) + 1
        if others:
            self._env.flop(
                f"Rule {self._rule}: {self._what} must not overlap, but {call} started on "
                f"thread {threading.current_thread().name} while another call was still "
                f"running on a different thread"
            )

    def exit(self) -> None:
        """Mark the end of the call started by the matching ``enter`` on this thread."""
        me = threading.get_ident()
        with self._lock:
            depth = self._inside.get(me, 0) - 1
            if depth <= 0:
                self._inside.pop(me, None)
            else:
                self._inside[me] = depth


class ManualSubscriber(Subscriber[Any]):
    """A subscriber driven by the test: it requests, cancels and expects on command.

    Every signal goes into an inbox the expectations read, oldest first. As signals
    arrive it checks the publisher's obligations and flops on the environment when one is
    broken:

    * Rule 1.1: never more ``on_next`` than requested so far (requests are counted
      *before* ``Subscription.request`` is called, so synchronous emission is fine);
    * Rule 1.3: no two signals overlap on different threads;
    * Rule 1.7: nothing after ``on_complete`` or ``on_error``;
    * Rule 1.9: ``on_subscribe`` first, and only once;
    * Rule 2.13: ``None`` is never an element nor an error (it also raises ``TypeError``
      to the publisher, as every subscriber must).

    An ``on_error`` the test does not expect is flopped too (``expect_error`` takes it
    back), so an unexpected error fails the test even if no expectation reads it.

    Subclasses customise behaviour with the hooks ``when_subscribed(subscription)`` and
    ``when_next(element)``, called after the signal was recorded, outside any lock.

    Args:
        env: the environment of the current test.
        record_elements: keep the elements in the inbox; ``False`` only counts them
            (for tests that receive many).
    """

    duplicate_subscribe_rule: str = "1.9"
    """The rule cited when ``on_subscribe`` arrives twice."""

    def __init__(self, env: TestEnvironment, *, record_elements: bool = True) -> None:
        self.env = env
        self._record = record_elements
        self._cond = threading.Condition(threading.Lock())
        self._subscription: Subscription | None = None
        self._inbox: deque[tuple[str, object]] = deque()
        self._requested = 0
        self._delivered = 0
        self._terminal: str | None = None
        self._error: BaseException | None = None
        self._error_flop: BaseException | None = None
        self._cancelled = False
        self._serial = SerialCallChecker(env, "1.3", "signals to one subscriber")

    # -- signals, called by the publisher under test --------------------------------------

    def on_subscribe(self, subscription: Subscription) -> None:
        """Record the subscription; a second one is flopped (Rule 1.9) and cancelled."""
        if is_none(subscription):
            self.env.flop("Rule 2.13: the publisher signalled on_subscribe(None)")
            raise TypeError("Rule 2.13: on_subscribe(None): the subscription must not be None")
        self._serial.enter("on_subscribe")
        try:
            with self._cond:
                duplicate = self._subscription is not None
                if not duplicate:
                    self._subscription = subscription
                    self._cond.notify_all()
            if duplicate:
                self.env.flop(
                    f"Rule {self.duplicate_subscribe_rule}: on_subscribe was signalled more "
                    f"than once to the same subscriber (Rule 2.12)"
                )
                subscription.cancel()  # Rule 2.5
                return
            self.when_subscribed(subscription)
        finally:
            self._serial.exit()

    def on_next(self, element: Any) -> None:
        """Record one element, checking Rules 1.1, 1.7 and 1.9."""
        if element is None:
            self.env.flop(
                "Rule 2.13: the publisher signalled on_next(None); None is never an element"
            )
            raise TypeError("Rule 2.13: on_next(None): None is never an element")
        self._serial.enter("on_next")
        try:
            with self._cond:
                problem = self._check_order_locked(describe(_NEXT, element))
                subscribed = self._subscription is not None
                self._delivered += 1
                delivered, requested = self._delivered, self._requested
                self._inbox.append((_NEXT, element if self._record else True))
                self._cond.notify_all()
            if problem:
                self.env.flop(problem)
            if delivered > requested:
                self.env.flop(
                    f"Rule 1.1: the publisher signalled on_next #{delivered} ({element!r}) "
                    f"but only {requested} element(s) were requested"
                )
            if subscribed:  # before on_subscribe (Rule 1.9) the hooks have no subscription
                self.when_next(element)
        finally:
            self._serial.exit()

    def on_error(self, error: Exception) -> None:
        """Record the error; unless a test expects it, it fails the test."""
        if is_none(error):
            self.env.flop("Rule 2.13: the publisher signalled on_error(None)")
            raise TypeError("Rule 2.13: on_error(None): the error must not be None")
        self._serial.enter("on_error")
        try:
            with self._cond:
                problem = self._check_order_locked(describe(_ERROR, error))
                if self._terminal is None:
                    self._terminal = _ERROR
                self._error = error
                unexpected = TckFailure(f"unexpected {describe(_ERROR, error)}")
                unexpected.__cause__ = error
                self._error_flop = self.env.flop(unexpected)
                self._inbox.append((_ERROR, error))
                self._cond.notify_all()
            if problem:
                self.env.flop(problem)
        finally:
            self._serial.exit()

    def on_complete(self) -> None:
        """Record the completion."""
        self._serial.enter("on_complete")
        try:
            with self._cond:
                problem = self._check_order_locked(describe(_COMPLETE))
                if self._terminal is None:
                    self._terminal = _COMPLETE
                self._inbox.append((_COMPLETE, None))
                self._cond.notify_all()
            if problem:
                self.env.flop(problem)
        finally:
            self._serial.exit()

    def _check_order_locked(self, signal: str) -> str | None:
        if self._subscription is None:
            return f"Rule 1.9: the publisher signalled {signal} before on_subscribe"
        if self._terminal is not None:
            return f"Rule 1.7: the publisher signalled {signal} after {self._terminal}()"
        return None

    # -- hooks --------------------------------------------------------------------------

    def when_subscribed(self, subscription: Subscription) -> None:
        """Hook: called after ``on_subscribe`` was recorded (default: nothing)."""

    def when_next(self, element: Any) -> None:
        """Hook: called after ``on_next`` was recorded (default: nothing)."""

    # -- state --------------------------------------------------------------------------

    @property
    def subscription(self) -> Subscription | None:
        """The subscription received in ``on_subscribe``, if any yet."""
        return self._subscription

    @property
    def requested(self) -> int:
        """Total positive demand requested through ``request`` so far."""
        with self._cond:
            return self._requested

    @property
    def delivered(self) -> int:
        """How many ``on_next`` signals arrived."""
        with self._cond:
            return self._delivered

    @property
    def terminal(self) -> str | None:
        """``"on_complete"`` or ``"on_error"`` once one arrived, else ``None``."""
        with self._cond:
            return self._terminal

    @property
    def error(self) -> BaseException | None:
        """The error received with ``on_error``, if any."""
        with self._cond:
            return self._error

    def statistics(self) -> StreamStatistics:
        """A snapshot: requested, delivered, signals not yet read, cancelled, terminated."""
        with self._cond:
            return StreamStatistics(
                requested=self._requested,
                delivered=self._delivered,
                buffered=len(self._inbox),
                cancelled=self._cancelled or self._terminal is not None,
                terminated=self._terminal is not None,
            )

    def wait_for(self, predicate: Callable[[], bool], timeout: float | None = None) -> bool:
        """Wait until ``predicate()`` (evaluated under the inbox lock) holds; ``False`` on timeout.

        Every signal re-evaluates the predicate, so it may read ``delivered`` state
        through the private counters of a subclass or through ``self._inbox``.
        """
        with self._cond:
            return self._cond.wait_for(predicate, self.env.timeout if timeout is None else timeout)

    def wait_for_terminal(self, timeout: float | None = None) -> bool:
        """Wait until ``on_complete`` or ``on_error`` arrived; ``False`` after ``timeout``.

        For a signal that is owed but may come late from an asynchronous publisher (the
        Rule 3.9 error of a bad request, say): waiting for it, rather than cancelling at
        once, keeps a test from racing against asynchronous delivery. A ``False`` is not a
        failure by itself; the caller decides what the rules require.
        """
        return self.wait_for(lambda: self._terminal is not None, timeout)

    # -- actions, called by the test ----------------------------------------------------

    def expect_subscription(self, what: str) -> Subscription:
        """Wait for ``on_subscribe``.

        Raises:
            TckFailure: it did not arrive within ``env.timeout``.
        """
        with self._cond:
            if not self._cond.wait_for(lambda: self._subscription is not None, self.env.timeout):
                raise TckFailure(
                    f"{what}; on_subscribe did not arrive within {_fmt(self.env.timeout)}"
                )
            assert self._subscription is not None
            return self._subscription

    def request(self, n: int) -> None:
        """Call ``request(n)`` on the subscription; a positive int counts as demand first.

        Raises:
            TckFailure: ``request`` raised (Rule 3.16), or there is no subscription yet.
        """
        subscription = self._require_subscription()
        if type(n) is int and n > 0:
            with self._cond:
                self._requested += n
        try:
            subscription.request(n)
        except (RecursionError, TckFailure):
            raise  # unbounded recursion (Rule 3.3), or a check that failed deeper down
        except Exception as exc:
            self.env.flop_and_fail(
                f"Rule 3.16: request({n!r}) raised {type(exc).__name__}: {exc}; it must "
                f"return normally and signal problems with on_error"
            )

    def cancel(self) -> None:
        """Call ``cancel()`` on the subscription.

        Raises:
            TckFailure: ``cancel`` raised (Rule 3.15).
        """
        subscription = self._require_subscription()
        with self._cond:
            self._cancelled = True
        try:
            subscription.cancel()
        except Exception as exc:
            self.env.flop_and_fail(
                f"Rule 3.15: cancel() raised {type(exc).__name__}: {exc}; it must return normally"
            )

    def _require_subscription(self) -> Subscription:
        subscription = self._subscription
        if subscription is None:
            raise TckFailure("the TCK tried to use the subscription before on_subscribe")
        return subscription

    def _next_signal(self, what: str, timeout: float | None) -> tuple[str, object]:
        wait = self.env.timeout if timeout is None else timeout
        with self._cond:
            if not self._cond.wait_for(lambda: bool(self._inbox), wait):
                raise TckFailure(f"{what}; no signal arrived within {_fmt(wait)}")
            return self._inbox.popleft()

    def _take_error(self, error: object) -> None:
        flop = self._error_flop
        if flop is not None and flop.__cause__ is error:
            self.env.forget(flop)

    def next_element(self, what: str = "expected an element", timeout: float | None = None) -> Any:
        """Wait for the next signal and return its element.

        Raises:
            TckFailure: nothing arrived in time, or the next signal is not ``on_next``.
        """
        signal, value = self._next_signal(what, timeout)
        if signal != _NEXT:
            raise TckFailure(f"{what}; got {describe(signal, value)} instead")
        return value

    def next_elements(self, count: int, what: str = "expected elements") -> list[Any]:
        """Wait for ``count`` elements in a row and return them."""
        elements = []
        for index in range(count):
            elements.append(self.next_element(f"{what} (element {index + 1} of {count})"))
        return elements

    def request_next_element(self, what: str = "request(1) must produce an element") -> Any:
        """``request(1)`` then ``next_element``."""
        self.request(1)
        return self.next_element(what)

    def next_element_or_end_of_stream(
        self, what: str = "expected an element or on_complete", timeout: float | None = None
    ) -> Any:
        """The next element, or ``END_OF_STREAM`` if the next signal is ``on_complete``."""
        signal, value = self._next_signal(what, timeout)
        if signal == _NEXT:
            return value
        if signal == _COMPLETE:
            return END_OF_STREAM
        raise TckFailure(f"{what}; got {describe(signal, value)} instead")

    def expect_completion(
        self, what: str = "expected on_complete", timeout: float | None = None
    ) -> None:
        """Wait for the next signal; it must be ``on_complete``."""
        signal, value = self._next_signal(what, timeout)
        if signal != _COMPLETE:
            raise TckFailure(f"{what}; got {describe(signal, value)} instead")

    def request_end_of_stream(self, what: str = "request(1) must produce on_complete") -> None:
        """``request(1)`` then ``expect_completion``."""
        self.request(1)
        self.expect_completion(what)

    def expect_error(
        self,
        kind: type[BaseException] = Exception,
        what: str = "expected on_error",
        timeout: float | None = None,
    ) -> BaseException:
        """Wait for ``on_error``, skipping elements already in flight; return the error.

        Raises:
            TckFailure: no error in time, ``on_complete`` instead, or an error that is not
                an instance of ``kind``.
        """
        while True:
            signal, value = self._next_signal(what, timeout)
            if signal == _NEXT:
                continue
            if signal == _COMPLETE:
                raise TckFailure(f"{what}; got on_complete() instead")
            assert isinstance(value, BaseException)
            self._take_error(value)
            if not isinstance(value, kind):
                raise TckFailure(
                    f"{what}; got {describe(signal, value)}, which is not a {kind.__name__}"
                )
            return value

    def expect_none(self, what: str, timeout: float | None = None) -> None:
        """Watch for ``no_signals_timeout``: no signal at all may arrive.

        Raises:
            TckFailure: a signal arrived; the message is ``what`` and the signal.
        """
        wait = self.env.no_signals_timeout if timeout is None else timeout
        with self._cond:
            if self._cond.wait_for(lambda: bool(self._inbox), wait):
                signal, value = self._inbox[0]
                raise TckFailure(f"{what}; got {describe(signal, value)}")

    def drain(self) -> list[tuple[str, object]]:
        """Remove and return every signal recorded and not yet read."""
        with self._cond:
            signals = list(self._inbox)
            self._inbox.clear()
        for signal, value in signals:
            if signal == _ERROR:
                self._take_error(value)
        return signals


def subscribe(
    env: TestEnvironment,
    publisher: Publisher[Any],
    subscriber: ManualSubscriber,
    rule: str = "1.9",
) -> Subscription:
    """``publisher.subscribe(subscriber)`` and wait for ``on_subscribe`` (Rule 1.9).

    Raises:
        TckFailure: ``subscribe`` raised, or ``on_subscribe`` did not arrive in time. The
            message cites ``rule``.
    """
    try:
        publisher.subscribe(subscriber)
    except Exception as exc:
        env.flop_and_fail(
            f"Rule {rule}: subscribe() raised {type(exc).__name__}: {exc}; it must return "
            f"normally and signal failures with on_subscribe then on_error (Rule 1.9)"
        )
    return subscriber.expect_subscription(
        f"Rule {rule}: subscribe() must signal on_subscribe to the subscriber"
    )


class _ManualSubscription(Subscription):
    """The subscription ``ManualPublisher`` hands out; it records what the subscriber does."""

    def __init__(self, publisher: ManualPublisher, *, extra: bool) -> None:
        self._publisher = publisher
        self._extra = extra
        self.cancelled = Latch(publisher.env)

    def request(self, n: int) -> None:
        self._publisher._on_request(self, n)

    def cancel(self) -> None:
        self._publisher._on_cancel(self)


class ManualPublisher(Publisher[Any]):
    """The upstream a subscriber test controls: it sends signals and records the answers.

    It accepts one subscriber. Calls the subscriber makes on its subscription are checked:

    * Rule 2.3: no ``request``/``cancel`` from inside ``on_complete``/``on_error`` (the
      publisher marks the thread while it calls them, which catches synchronous calls);
    * Rule 2.7: no two calls overlap on different threads;
    * Rule 3.9 (caller side): ``n`` must be a positive ``int``.

    A subscriber method that raises breaks Rule 2.13 and fails the test.

    Args:
        env: the environment of the current test.
        rule: the rule of the test using it; a subscriber method that raises is reported
            against this rule (and Rule 2.13).
    """

    def __init__(self, env: TestEnvironment, *, rule: str | None = None) -> None:
        self.env = env
        self.rule = rule
        self._cond = threading.Condition(threading.Lock())
        self._subscriber: Subscriber[Any] | None = None
        self._subscription: _ManualSubscription | None = None
        self._requests: deque[int] = deque()
        self._demand = 0
        self._requested = 0
        self._sent = 0
        self._terminated = False
        self._in_terminal = threading.local()
        self._serial = SerialCallChecker(env, "2.7", "calls on a subscription")
        self.extra_requests: list[int] = []

    # -- Publisher -----------------------------------------------------------------------

    def subscribe(self, subscriber: Subscriber[Any]) -> None:
        """Attach ``subscriber`` and signal ``on_subscribe`` on the calling thread."""
        if is_none(subscriber):
            raise TypeError("Rule 1.9: subscribe(None): the subscriber must not be None")
        with self._cond:
            if self._subscriber is not None:
                self.env.flop("the TCK's ManualPublisher supports a single subscriber")
                return
            self._subscriber = subscriber
            self._subscription = _ManualSubscription(self, extra=False)
        self._call("on_subscribe", subscriber.on_subscribe, self._subscription)

    # -- subscription callbacks ------------------------------------------------------------

    def _on_request(self, subscription: _ManualSubscription, n: int) -> None:
        self._serial.enter("request")
        try:
            if getattr(self._in_terminal, "signal", None) is not None:
                self.env.flop(
                    f"Rule 2.3: the subscriber called request({n!r}) from inside "
                    f"{self._in_terminal.signal}; it must not call the subscription there"
                )
            if subscription._extra:
                self.extra_requests.append(n)
                self.env.flop(
                    f"Rule 2.5: the subscriber called request({n!r}) on a second subscription "
                    f"it should have cancelled"
                )
                return
            if type(n) is not int or n <= 0:
                self.env.flop(
                    f"Rule 3.9: the subscriber called request({n!r}); demand must be a positive int"
                )
                return
            with self._cond:
                self._requests.append(n)
                self._demand += n
                self._requested += n
                self._cond.notify_all()
        finally:
            self._serial.exit()

    def _on_cancel(self, subscription: _ManualSubscription) -> None:
        self._serial.enter("cancel")
        try:
            if getattr(self._in_terminal, "signal", None) is not None:
                self.env.flop(
                    f"Rule 2.3: the subscriber called cancel() from inside "
                    f"{self._in_terminal.signal}; it must not call the subscription there"
                )
            subscription.cancelled.close()
            with self._cond:
                self._cond.notify_all()
        finally:
            self._serial.exit()

    # -- sending ---------------------------------------------------------------------------

    @property
    def subscriber(self) -> Subscriber[Any]:
        """The attached subscriber.

        Raises:
            TckFailure: nobody subscribed.
        """
        subscriber = self._subscriber
        if subscriber is None:
            raise TckFailure("the subscriber never subscribed to the TCK's publisher")
        return subscriber

    @property
    def demand(self) -> int:
        """Requested and not yet sent."""
        with self._cond:
            return self._demand

    def _call(self, name: str, method: Callable[..., None], *args: object) -> None:
        try:
            method(*args)
        except Exception as exc:
            call = f"{name}({', '.join(repr(arg) for arg in args)})"
            if self.rule is None or self.rule == "2.13":
                prefix, suffix = "Rule 2.13: ", ""
            else:
                prefix, suffix = f"Rule {self.rule}: ", " (Rule 2.13)"
            self.env.flop_and_fail(
                f"{prefix}{call} raised {type(exc).__name__}: {exc}; subscriber methods "
                f"must return normally{suffix}"
            )

    def send_next(self, element: object) -> None:
        """Signal ``on_next(element)``; the TCK only sends what was requested (Rule 1.1).

        Raises:
            TckFailure: there is no outstanding demand (a TCK bug), or ``on_next`` raised.
        """
        with self._cond:
            if self._demand <= 0:
                raise TckFailure("the TCK tried to send an element without demand (Rule 1.1)")
            self._demand -= 1
            self._sent += 1
        self._call("on_next", self.subscriber.on_next, element)

    def send_completion(self) -> None:
        """Signal ``on_complete`` (marking the thread for the Rule 2.3 check)."""
        with self._cond:
            self._terminated = True
        self._in_terminal.signal = "on_complete()"
        try:
            self._call("on_complete", self.subscriber.on_complete)
        finally:
            self._in_terminal.signal = None

    def send_error(self, error: Exception) -> None:
        """Signal ``on_error(error)`` (marking the thread for the Rule 2.3 check)."""
        with self._cond:
            self._terminated = True
        self._in_terminal.signal = f"on_error({error!r})"
        try:
            self._call("on_error", self.subscriber.on_error, error)
        finally:
            self._in_terminal.signal = None

    def send_extra_subscription(self) -> Latch:
        """Signal a second ``on_subscribe``; return the latch its ``cancel`` closes."""
        extra = _ManualSubscription(self, extra=True)
        self._call("on_subscribe", self.subscriber.on_subscribe, extra)
        return extra.cancelled

    # -- expectations ------------------------------------------------------------------------

    def expect_request(self, what: str, timeout: float | None = None) -> int:
        """Wait for the next ``request(n)`` and return ``n``.

        Raises:
            TckFailure: no request within the timeout.
        """
        wait = self.env.timeout if timeout is None else timeout
        with self._cond:
            if not self._cond.wait_for(lambda: bool(self._requests), wait):
                raise TckFailure(f"{what}; no request(n) arrived within {_fmt(wait)}")
            return self._requests.popleft()

    def expect_demand(self, what: str, timeout: float | None = None) -> int:
        """Wait until there is outstanding demand (requested and not sent); return it.

        Unlike ``expect_request`` this does not consume a recorded request.

        Raises:
            TckFailure: no demand within the timeout.
        """
        wait = self.env.timeout if timeout is None else timeout
        with self._cond:
            if not self._cond.wait_for(lambda: self._demand > 0, wait):
                raise TckFailure(f"{what}; no request(n) arrived within {_fmt(wait)}")
            return self._demand

    def expect_exact_request(self, expected: int, what: str) -> None:
        """Wait for ``request(expected)``."""
        n = self.expect_request(what)
        if n != expected:
            raise TckFailure(f"{what}; got request({n}) instead of request({expected})")

    def expect_no_request(self, what: str) -> None:
        """Watch for ``no_signals_timeout``: no request may arrive."""
        with self._cond:
            if self._cond.wait_for(lambda: bool(self._requests), self.env.no_signals_timeout):
                raise TckFailure(f"{what}; got request({self._requests[0]})")

    def expect_cancelling(self, what: str, timeout: float | None = None) -> None:
        """Wait for ``cancel()`` on the main subscription."""
        subscription = self._subscription
        if subscription is None:
            raise TckFailure(f"{what}; the subscriber never subscribed")
        subscription.cancelled.expect_close(f"{what}: cancel() was expected", timeout)

    def statistics(self) -> StreamStatistics:
        """A snapshot: requested by the subscriber, elements sent, cancelled, terminated."""
        with self._cond:
            return StreamStatistics(
                requested=self._requested,
                delivered=self._sent,
                buffered=0,
                cancelled=self.is_cancelled or self._terminated,
                terminated=self._terminated,
            )

    @property
    def is_cancelled(self) -> bool:
        """Whether the subscriber cancelled its (main) subscription."""
        subscription = self._subscription
        return subscription is not None and subscription.cancelled.is_closed
