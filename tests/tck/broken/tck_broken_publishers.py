"""Deliberately broken publishers: each breaks exactly one rule of a correct range publisher.

``RangePublisher`` here is small and correct (it passes every required TCK test, which
``test_tck_broken_publishers.py`` checks first); every subclass overrides one decision and
so breaks one rule. The TCK must fail each of them on the test named for that rule.
"""

from __future__ import annotations

import threading
from typing import Any

from reactive_streams import MAX_DEMAND, Publisher, Subscriber, Subscription
from reactive_streams.tck._support import is_none

_INT64 = 2**64


class RangeSubscription(Subscription):
    """Emits ``0 .. elements-1`` on the thread that requests, with a trampoline."""

    def __init__(self, publisher: RangePublisher, subscriber: Subscriber[int], elements: int):
        self.publisher = publisher
        self.subscriber: Subscriber[int] | None = subscriber
        self.index = 0
        self.end = elements
        self.lock = threading.Lock()
        self.demand = 0
        self.pending_error: Exception | None = None
        self.cancelled = False
        self.done = False
        self.emitting = False
        self.missed = False

    # -- decisions the broken subclasses override --------------------------------------

    def check(self, n: object) -> Exception | None:
        """Rule 3.9: the error to signal for a bad ``n``, or None."""
        if type(n) is not int:
            return TypeError(f"Rule 3.9: subscription request must be an int, got {n!r}")
        if n <= 0:
            return ValueError(f"Rule 3.9: non-positive subscription request (n={n})")
        return None

    def add(self, demand: int, n: int) -> int:
        """Rule 3.17: saturate at MAX_DEMAND."""
        return min(demand + n, MAX_DEMAND)

    def consume(self, demand: int, sent: int) -> int:
        """Rule 3.17: demand of MAX_DEMAND is unbounded and never decremented."""
        return demand if demand == MAX_DEMAND else demand - sent

    def drop_subscriber(self) -> None:
        """Rule 3.13: forget the subscriber."""
        self.subscriber = None

    def batch_goes_on(self) -> bool:
        """Rule 3.12: a cancel, even from inside on_next, stops the batch at once."""
        return not self.cancelled

    # -- the protocol ------------------------------------------------------------------

    def request(self, n: int) -> None:
        error = self.check(n)
        with self.lock:
            if self.cancelled:
                return
            if error is not None:
                self.pending_error = self.pending_error or error
            else:
                self.demand = self.add(self.demand, n)
            if self.emitting:
                self.missed = True
                return
            self.emitting = True
        self.emit()

    def cancel(self) -> None:
        with self.lock:
            self.cancelled = True
            if self.emitting:
                return
        self.drop_subscriber()

    def emit(self) -> None:
        while True:
            with self.lock:
                error, self.pending_error = self.pending_error, None
                demand = self.demand
                cancelled = self.cancelled
            subscriber = self.subscriber
            if cancelled or subscriber is None:
                self.drop_subscriber()
                return
            if error is not None:
                self.terminate()
                subscriber.on_error(error)
                return
            sent = 0
            while (
                sent < demand
                and self.index < self.end
                and self.batch_goes_on()
                and self.pending_error is None  # Rule 3.9: a bad request stops emission
            ):
                element = self.index
                self.index += 1
                sent += 1
                try:
                    subscriber.on_next(element)
                except Exception:
                    self.cancel_from_emitter()
                    return
            if self.index >= self.end and not self.cancelled:
                self.complete(subscriber)
                return
            with self.lock:
                self.demand = self.consume(self.demand, sent)
                if self.missed:
                    self.missed = False
                    continue
                self.emitting = False
                if self.cancelled:
                    break
                return
        self.drop_subscriber()

    def complete(self, subscriber: Subscriber[int]) -> None:
        """Rule 1.5: the end of the range is signalled."""
        self.terminate()
        subscriber.on_complete()

    def terminate(self) -> None:
        """Rule 1.6: a terminal signal cancels the subscription; the emitter keeps ownership."""
        with self.lock:
            self.cancelled = True
            self.done = True
        self.drop_subscriber()

    def cancel_from_emitter(self) -> None:
        with self.lock:
            self.cancelled = True
        self.drop_subscriber()


class RangePublisher(Publisher[int]):
    """A correct synchronous publisher of ``0 .. elements-1`` (unicast)."""

    subscription_class: type[RangeSubscription] = RangeSubscription

    def __init__(self, elements: int) -> None:
        self.elements = elements

    def subscribe(self, subscriber: Subscriber[int]) -> None:
        if subscriber is None:
            raise TypeError("Rule 1.9: subscribe(None)")
        subscription = self.subscription_class(self, subscriber, self.elements)
        try:
            subscriber.on_subscribe(subscription)
        except Exception:
            subscription.cancel()
            return
        if self.elements == 0:
            subscription.request(MAX_DEMAND)  # an empty stream completes at once


class FailedPublisher(Publisher[int]):
    """A correct failed publisher: on_subscribe, then on_error."""

    def subscribe(self, subscriber: Subscriber[int]) -> None:
        if subscriber is None:
            raise TypeError("Rule 1.9: subscribe(None)")
        subscriber.on_subscribe(_NoopSubscription())
        subscriber.on_error(RuntimeError("this publisher always fails"))


class _NoopSubscription(Subscription):
    def request(self, n: int) -> None:
        pass

    def cancel(self) -> None:
        pass


# -- broken subscriptions ---------------------------------------------------------------


class _IgnoresDemand(RangeSubscription):
    def add(self, demand: int, n: int) -> int:
        return MAX_DEMAND  # Rule 1.1 broken: any request releases everything


class IgnoresDemandPublisher(RangePublisher):
    """Rule 1.1: one request(1) emits the whole range."""

    subscription_class = _IgnoresDemand


class _IgnoresCancel(RangeSubscription):
    def cancel(self) -> None:
        pass  # Rules 3.6 / 3.12 broken


class EmitsAfterCancelPublisher(RangePublisher):
    """Rule 3.6: cancel() is ignored, so later requests still emit."""

    subscription_class = _IgnoresCancel


class _FinishesTheBatch(RangeSubscription):
    def batch_goes_on(self) -> bool:
        return True  # Rule 3.12 (at once, from inside on_next) broken


class FinishesTheBatchAfterCancelPublisher(RangePublisher):
    """Rule 3.12: a cancel from inside on_next takes effect only after the batch."""

    subscription_class = _FinishesTheBatch


class _CompletesAgain(RangeSubscription):
    def terminate(self) -> None:
        with self.lock:
            self.emitting = False  # Rule 1.7 broken: the stream can be driven again


class EmitsAfterCompletionPublisher(RangePublisher):
    """Rule 1.7: every request after the end signals on_complete again."""

    subscription_class = _CompletesAgain


class _Recursive(RangeSubscription):
    def request(self, n: int) -> None:
        self.demand += n  # no trampoline: emit on every request, however deep
        while self.demand > 0 and self.index < self.end and self.subscriber is not None:
            self.demand -= 1
            element = self.index
            self.index += 1
            self.subscriber.on_next(element)
        if self.index >= self.end and self.subscriber is not None and not self.done:
            self.done = True
            self.subscriber.on_complete()


class RecursivePublisher(RangePublisher):
    """Rule 3.3: on_next -> request -> on_next recursion without a trampoline."""

    subscription_class = _Recursive


class _RaisesOnZero(RangeSubscription):
    def request(self, n: int) -> None:
        if n <= 0:
            raise ValueError("Rule 3.9: non-positive subscription request")
        super().request(n)


class RaisesOnRequestZeroPublisher(RangePublisher):
    """Rule 3.9: request(0) raises instead of signalling on_error."""

    subscription_class = _RaisesOnZero


class _IgnoresZero(RangeSubscription):
    def check(self, n: object) -> Exception | None:
        return None

    def add(self, demand: int, n: int) -> int:
        return demand + n if n > 0 else demand


class IgnoresRequestZeroPublisher(RangePublisher):
    """Rule 3.9: request(0) and request(-n) are silently ignored."""

    subscription_class = _IgnoresZero


class _Overflows(RangeSubscription):
    def add(self, demand: int, n: int) -> int:
        total = (demand + n) % _INT64  # a 64-bit signed addition, as on the JVM
        if total >= 2**63:
            total -= _INT64
        if total <= 0:
            self.pending_error = ValueError(f"demand overflowed to {total}")
            return 0
        return total

    def consume(self, demand: int, sent: int) -> int:
        return demand - sent  # no "unbounded" fast path either


class OverflowingDemandPublisher(RangePublisher):
    """Rule 3.17: demand wraps around like a 64-bit integer and then fails."""

    subscription_class = _Overflows


class _KeepsSubscriber(RangeSubscription):
    def drop_subscriber(self) -> None:
        if self.subscriber is not None:
            retained: list[Any] = getattr(self.publisher, "retained")  # noqa: B009
            retained.append(self.subscriber)  # Rule 3.13 broken
        self.subscriber = None


class KeepsSubscriberPublisher(RangePublisher):
    """Rule 3.13: every subscriber is kept in a list forever."""

    subscription_class = _KeepsSubscriber

    def __init__(self, elements: int) -> None:
        super().__init__(elements)
        self.retained: list[Any] = []


class SignalsBeforeOnSubscribePublisher(RangePublisher):
    """Rule 1.9: an empty stream signals on_complete before on_subscribe."""

    def subscribe(self, subscriber: Subscriber[int]) -> None:
        if subscriber is None:
            raise TypeError("Rule 1.9: subscribe(None)")
        if self.elements == 0:
            subscriber.on_complete()
            subscriber.on_subscribe(_NoopSubscription())
            return
        super().subscribe(subscriber)


class AcceptsNoneSubscriberPublisher(RangePublisher):
    """Rule 1.9: subscribe(None) returns normally."""

    def subscribe(self, subscriber: Subscriber[int]) -> None:
        if is_none(subscriber):
            return
        super().subscribe(subscriber)


class _TwoThreads(RangeSubscription):
    def request(self, n: int) -> None:
        if self.check(n) is not None or self.cancelled:
            return
        # Rule 1.3 broken: every request starts its own emitter thread, unsynchronised.
        threading.Thread(target=self._emit_n, args=(n,), daemon=True).start()

    def _emit_n(self, n: int) -> None:
        for _ in range(n):
            with self.lock:
                if self.index >= self.end or self.cancelled:
                    return
                element = self.index
                self.index += 1
            subscriber = self.subscriber
            if subscriber is None:
                return
            subscriber.on_next(element)


class EmitsFromTwoThreadsPublisher(RangePublisher):
    """Rule 1.3: elements are emitted from several threads at once."""

    subscription_class = _TwoThreads


class NeverFailsPublisher(Publisher[int]):
    """Rule 1.4 / 1.9: a 'failed' publisher that never signals on_error."""

    def subscribe(self, subscriber: Subscriber[int]) -> None:
        if subscriber is None:
            raise TypeError("Rule 1.9: subscribe(None)")
        subscriber.on_subscribe(_NoopSubscription())


class _NeverCompletes(RangeSubscription):
    def complete(self, subscriber: Subscriber[int]) -> None:
        with self.lock:
            self.emitting = False  # Rule 1.5 broken: the end is never signalled


class NeverCompletesPublisher(RangePublisher):
    """Rules 1.2 / 1.5: the stream ends without on_complete."""

    subscription_class = _NeverCompletes


class _NotReentrant(RangeSubscription):
    def request(self, n: int) -> None:
        if self.emitting:
            raise RuntimeError("request() is not re-entrant")  # Rule 3.2 broken
        super().request(n)


class NotReentrantPublisher(RangePublisher):
    """Rule 3.2: request() from inside on_next raises."""

    subscription_class = _NotReentrant


class _CancelOnce(RangeSubscription):
    def cancel(self) -> None:
        if self.cancelled:
            raise RuntimeError("already cancelled")  # Rules 3.7 / 3.15 broken
        super().cancel()


class CancelTwiceRaisesPublisher(RangePublisher):
    """Rule 3.7: a second cancel() raises."""

    subscription_class = _CancelOnce


class _UnsafeCancel(RangeSubscription):
    cancelling = False

    def cancel(self) -> None:
        if self.cancelling:
            raise RuntimeError("cancel() is not thread-safe")  # Rule 3.5 broken
        self.cancelling = True
        threading.Event().wait(0.01)  # a slow, unguarded critical section
        super().cancel()
        self.cancelling = False


class UnsafeCancelPublisher(RangePublisher):
    """Rule 3.5: concurrent cancel() calls collide and raise."""

    subscription_class = _UnsafeCancel


class _Unchecked(RangeSubscription):
    def check(self, n: object) -> Exception | None:
        if n <= 0:  # type: ignore[operator]  # Rule 3.16 broken: raises for a str or None
            return ValueError(f"Rule 3.9: non-positive subscription request (n={n})")
        return None


class UncheckedRequestPublisher(RangePublisher):
    """Rule 3.16: request('3') raises TypeError to the caller."""

    subscription_class = _Unchecked


class _Propagates(RangeSubscription):
    def emit(self) -> None:
        subscriber = self.subscriber
        with self.lock:
            demand = self.demand
        while demand > 0 and self.index < self.end and subscriber is not None:
            element = self.index
            self.index += 1
            demand -= 1
            subscriber.on_next(element)  # Rule 2.13 broken: a raise escapes request()
        with self.lock:
            self.demand = demand
            self.emitting = False


class PropagatesSubscriberErrorPublisher(RangePublisher):
    """Rule 2.13: an exception from on_next escapes from request()."""

    subscription_class = _Propagates


class OnNextBeforeOnSubscribePublisher(RangePublisher):
    """Rule 1.9: the first element arrives before on_subscribe (then the stream goes on)."""

    def subscribe(self, subscriber: Subscriber[int]) -> None:
        if subscriber is None:
            raise TypeError("Rule 1.9: subscribe(None)")
        subscription = self.subscription_class(self, subscriber, self.elements)
        if self.elements:
            subscription.index = 1
            subscriber.on_next(0)  # Rule 1.9 broken: on_subscribe must come first
        subscriber.on_subscribe(subscription)
        if self.elements == 0:
            subscription.request(MAX_DEMAND)
