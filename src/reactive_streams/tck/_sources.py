"""Sources the TCK hands to the publisher under test: an endless one and a terminating probe.

``PublisherVerification`` checks what a publisher does with the publishers it subscribes
to, when the implementer wires them in (``create_publisher_from``,
``create_publisher_with_source``):

* ``EndlessSource``: a synchronous endless publisher that emits on the thread that calls
  ``request``, even from inside its own ``on_subscribe`` (as an iterable source does),
  and counts what it emitted, so the TCK sees how far the publisher under test read
  ahead of what it delivered. It stops at a cap, so a publisher that would read it for
  ever fails the test instead of filling the memory.
* ``TerminatingProbe``: hands its subscriber to the test, which signals ``on_subscribe``
  and then at once ``on_complete`` or ``on_error``, recording every ``request`` or
  ``cancel`` that arrives during that terminal call (Rule 2.3), as the JVM TCK's
  blackbox tests ``required_spec203_*`` do.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from .._core import MAX_DEMAND
from ..api import Publisher, Subscriber, Subscription
from ._environment import TckFailure

if TYPE_CHECKING:
    from ._environment import TestEnvironment

__all__ = ["EndlessSource", "TerminatingProbe"]


class _EndlessSubscription(Subscription):
    __slots__ = ("_source",)

    def __init__(self, source: EndlessSource) -> None:
        self._source = source

    def request(self, n: int) -> None:
        self._source._request(n)

    def cancel(self) -> None:
        self._source._cancel()


class EndlessSource(Publisher[int]):
    """0, 1, 2, ... for one subscriber, emitted inside ``request`` on the caller's thread.

    A ``request`` made while the source is emitting (from inside ``on_next``) only adds
    demand (Rule 3.3: depth 1); one made from inside ``on_subscribe`` is answered there
    and then, on the same thread (allowed: it is not concurrent, Rule 1.3). The source
    never completes; it stops emitting once it has emitted ``cap`` elements, and then
    sets ``capped`` (the demand stays unanswered, as with a slow source).

    Args:
        cap: the most elements it ever emits.

    Attributes:
        emitted: elements emitted so far.
        cancelled: whether the subscription was cancelled.
        capped: whether the source stopped at ``cap`` with demand outstanding.
    """

    def __init__(self, cap: int) -> None:
        self._cap = cap
        self._lock = threading.Lock()
        self._subscriber: Subscriber[Any] | None = None
        self._demand = 0
        self._emitting = False
        self.emitted = 0
        self.cancelled = False
        self.capped = False

    def subscribe(self, subscriber: Subscriber[Any]) -> None:
        """Serve ``subscriber``; a second subscriber gets ``on_error`` (one-shot source)."""
        if subscriber is None:
            raise TypeError("Rule 1.9: subscribe(None)")
        with self._lock:
            first = self._subscriber is None
            if first:
                self._subscriber = subscriber
        subscription = _EndlessSubscription(self)
        subscriber.on_subscribe(subscription)
        if not first:
            subscriber.on_error(RuntimeError("TCK: the endless source serves one subscriber"))

    def _request(self, n: int) -> None:
        with self._lock:
            if self.cancelled or n <= 0:
                return
            self._demand = min(MAX_DEMAND, self._demand + n)
            if self._emitting:
                return  # the emitting call up the stack sees the demand (Rule 3.3)
            self._emitting = True
        self._emit()

    def _emit(self) -> None:
        while True:
            with self._lock:
                subscriber = self._subscriber
                if self.cancelled or subscriber is None or self._demand == 0:
                    self._emitting = False
                    return
                if self.emitted >= self._cap:
                    self.capped = True
                    self._emitting = False
                    return
                element = self.emitted
                self.emitted += 1
                if self._demand != MAX_DEMAND:
                    self._demand -= 1
            subscriber.on_next(element)

    def _cancel(self) -> None:
        with self._lock:
            self.cancelled = True
            self._subscriber = None  # Rule 3.13

    def stop(self) -> None:
        """Stop emitting now (a cleanup: the publisher under test never stopped it)."""
        self._cancel()


class _RecordingSubscription(Subscription):
    __slots__ = ("_probe",)

    def __init__(self, probe: TerminatingProbe) -> None:
        self._probe = probe

    def request(self, n: int) -> None:
        self._probe._record(f"request({n!r})")

    def cancel(self) -> None:
        self._probe._record("cancel()")


class TerminatingProbe(Publisher[Any]):
    """A source the test drives: it keeps its subscriber until ``terminate`` is called.

    ``terminate(error)`` signals ``on_subscribe`` (with a subscription that only records
    calls) and at once ``on_complete`` (``error`` is ``None``) or ``on_error(error)``;
    ``violations`` lists every ``request``/``cancel`` made on that subscription while the
    terminal signal was being delivered (Rule 2.3).
    """

    def __init__(self, env: TestEnvironment) -> None:
        self._env = env
        self._cond = threading.Condition(threading.Lock())
        self._subscriber: Subscriber[Any] | None = None
        self._in_terminal = False
        self.violations: list[str] = []

    def subscribe(self, subscriber: Subscriber[Any]) -> None:
        """Keep ``subscriber`` for ``terminate``; a second subscriber is not served."""
        if subscriber is None:
            raise TypeError("Rule 1.9: subscribe(None)")
        with self._cond:
            if self._subscriber is None:
                self._subscriber = subscriber
                self._cond.notify_all()

    def _record(self, call: str) -> None:
        with self._cond:
            if self._in_terminal:
                self.violations.append(call)

    def terminate(self, error: Exception | None, what: str) -> None:
        """Wait for the subscriber, then signal ``on_subscribe`` and a terminal signal.

        Raises:
            TckFailure: nothing subscribed to the probe within the environment's timeout.
        """
        with self._cond:
            if not self._cond.wait_for(lambda: self._subscriber is not None, self._env.timeout):
                raise TckFailure(
                    f"the publisher under test never subscribed to the source given to it "
                    f"within {self._env.timeout:g} s ({what})"
                )
            subscriber = self._subscriber
        assert subscriber is not None
        subscriber.on_subscribe(_RecordingSubscription(self))
        with self._cond:
            self._in_terminal = True
        try:
            if error is None:
                subscriber.on_complete()
            else:
                subscriber.on_error(error)
        finally:
            with self._cond:
                self._in_terminal = False
