"""Bridges between reactive streams and reactivex (RxPY) Observables, both directions.

An Observable pushes without being asked: reactivex removed backpressure in version 3. So
``from_observable`` puts the bound and the overflow strategy in the user's hands, through
the package's one overflow stage (``OnBackpressureOperator``, the stage behind
``Flow.on_backpressure_buffer``). ``to_observable`` goes the other way: it requests in
batches of ``prefetch`` and replenishes at 75% (``replenish_threshold``), so a publisher
never produces faster than the batch allows.

reactivex is imported on first use, with an install hint when it is missing.
"""

from __future__ import annotations

import importlib
import threading
from typing import TYPE_CHECKING, Any, TypeVar

from .._core import (
    OnBackpressureOperator,
    Operator,
    Overflow,
    StageStatistics,
    accept_subscription,
    add_demand,
    cancel_quietly,
    check_positive,
    check_subscriber,
    replenish_threshold,
    report_undeliverable,
    signal_on_complete,
    signal_on_error,
    signal_on_next,
    signal_on_subscribe,
)
from ..api import Publisher, Subscriber, Subscription

if TYPE_CHECKING:
    from collections.abc import Callable

    from reactivex import Observable
    from reactivex.abc import DisposableBase, ObserverBase, SchedulerBase

__all__ = ["ObservablePublisher", "from_observable", "to_observable"]

T = TypeVar("T")

_INSTALL_HINT = (
    "reactive_streams.adapters.reactivex needs reactivex: "
    "pip install 'reactive-streams-py[reactivex]'"
)


def _require_reactivex() -> Any:
    """Import reactivex, or raise ``ImportError`` saying what to install."""
    try:
        return importlib.import_module("reactivex")
    except ImportError as exc:
        raise ImportError(_INSTALL_HINT) from exc


# ---------------------------------------------------------------------- Observable -> Publisher
class _ObservableSource(Operator[T]):
    """The raw source under ``ObservablePublisher``: one Observable subscription per subscriber.

    It subscribes to the Observable on the first ``request`` (so nothing arrives before
    demand) and then forwards every notification as it comes. It is only ever subscribed by
    the overflow stage above it, which requests ``MAX_DEMAND`` at once, so forwarding
    without counting never exceeds demand (Rule 1.1).
    """

    __slots__ = ("_observable",)

    def __init__(self, observable: Observable[T]) -> None:
        super().__init__()
        self._observable = observable

    @property
    def name(self) -> str:
        return "observable"

    def subscribe(self, subscriber: Subscriber[T]) -> None:
        """Serve ``subscriber`` with a new Observable subscription (Rule 1.9)."""
        check_subscriber(subscriber)
        link = _ObservableLink(self._observable, subscriber)
        self._track(link)
        if not signal_on_subscribe(subscriber, link):
            link.cancel()


class _ObservableLink(Subscription):
    """One subscriber's link to the Observable: an observer and a disposable.

    State under ``_lock``: ``_started`` (the Observable was subscribed), ``_done`` (a
    terminal signal went out, or the link was cancelled), ``_disposable``. The Observable
    contract makes notifications serial, which is Rule 1.3 for us.
    """

    __slots__ = (
        "_delivered",
        "_disposable",
        "_done",
        "_downstream",
        "_lock",
        "_observable",
        "_requested",
        "_started",
    )

    def __init__(self, observable: Observable[Any], downstream: Subscriber[Any]) -> None:
        self._observable = observable
        self._downstream: Subscriber[Any] | None = downstream
        self._lock = threading.Lock()
        self._started = False
        self._done = False
        self._disposable: DisposableBase | None = None
        self._delivered = 0
        self._requested = 0

    def statistics(self) -> StageStatistics:
        with self._lock:
            return StageStatistics(
                requested=self._requested,
                delivered=self._delivered,
                buffered=0,
                cancelled=self._done,
                terminated=self._done,
            )

    def request(self, n: int) -> None:
        """Subscribe to the Observable on the first call; demand is the overflow stage's."""
        with self._lock:
            if self._done:
                return
            if type(n) is int and n > 0:  # what was asked, for statistics(); demand is
                self._requested = add_demand(self._requested, n)  # the overflow stage's
            if self._started:
                return
            self._started = True
        try:
            disposable = self._observable.subscribe(
                on_next=self._on_next, on_error=self._on_error, on_completed=self._on_completed
            )
        except Exception as exc:  # a broken Observable: one on_error, never a raise
            self._on_error(exc)
            return
        if not self._attach(disposable):  # cancelled, or finished while subscribing
            _dispose_quietly(disposable)

    def _attach(self, disposable: DisposableBase) -> bool:
        """Keep ``disposable`` for ``cancel``; ``False`` if the link is already over."""
        with self._lock:
            if self._done:
                return False
            self._disposable = disposable
            return True

    def cancel(self) -> None:
        """Dispose the Observable subscription (idempotent, Rule 3.7)."""
        with self._lock:
            self._done = True
            disposable, self._disposable = self._disposable, None
            self._downstream = None
        if disposable is not None:
            _dispose_quietly(disposable)

    def _on_next(self, element: Any) -> None:
        downstream = self._downstream
        if downstream is None or self._done:
            return
        with self._lock:
            self._delivered += 1
        if not signal_on_next(downstream, element):
            self.cancel()

    def _finish(self) -> Subscriber[Any] | None:
        with self._lock:
            if self._done:
                return None
            self._done = True
            downstream, self._downstream = self._downstream, None
            self._disposable = None
            return downstream

    def _on_error(self, error: Exception) -> None:
        downstream = self._finish()
        if downstream is None:
            report_undeliverable(error)
        else:
            signal_on_error(downstream, error)

    def _on_completed(self) -> None:
        downstream = self._finish()
        if downstream is not None:
            signal_on_complete(downstream)


def _dispose_quietly(disposable: DisposableBase) -> None:
    try:
        disposable.dispose()
    except Exception as exc:
        report_undeliverable(exc)


class ObservablePublisher(OnBackpressureOperator[T]):
    """A ``Publisher`` over an Observable, with a bounded buffer and an overflow strategy.

    Built by ``from_observable``; ``Flow.from_publisher(it)`` chains operators on it, and
    ``Flow.metrics()`` shows it as ``"from_observable"`` above its ``"observable"`` source.
    """

    __slots__ = ()

    def statistics(self) -> StageStatistics:
        """Counters of the most recent subscription (zeros before the first one).

        ``dropped`` counts the elements the overflow strategy discarded; ``buffered`` the
        elements waiting for demand; ``high_water_mark`` the most ever waiting.
        """
        stats = self.last_statistics()
        if stats is None:
            return StageStatistics(
                requested=0, delivered=0, buffered=0, cancelled=False, terminated=False
            )
        return stats


def from_observable(
    observable: Observable[T],
    *,
    buffer_size: int,
    overflow: Overflow = "error",
    on_drop: Callable[[T], object] | None = None,
) -> ObservablePublisher[T]:
    """Publish an Observable's notifications, holding at most ``buffer_size`` undemanded ones.

    Each subscriber subscribes to ``observable`` once (a cold Observable replays for each),
    on its first ``request``. ``on_completed`` becomes ``on_complete``; ``on_error`` passes
    the error on.

    Marble (``buffer_size=1``, ``overflow="drop_oldest"``)::

        observable: -1-2-3-4-5-|
        request:    (1)......(1)
        result:     -1.......4-5|    dropped: 2, 3

    Args:
        observable: any reactivex ``Observable`` (elements of type ``T``, never ``None``).
        buffer_size: elements kept beyond the outstanding demand, ``>= 1``.
        overflow: what a full buffer does with a new element: ``"error"`` signals
            ``MissingBackpressureError`` naming the bound (and disposes the Observable
            subscription), ``"drop_latest"`` drops the new element, ``"drop_oldest"`` the
            oldest buffered one.
        on_drop: called with every dropped element, on the Observable's thread; a raise
            goes to the undeliverable hook.

    Returns:
        An ``ObservablePublisher``, whose ``statistics().dropped`` counts the drops.

    Raises:
        ImportError: reactivex is not installed.
        TypeError, ValueError: ``buffer_size`` is not a positive ``int``, or ``overflow``
            is unknown.

    Backpressure:
        The Observable cannot slow down: demand decides what is delivered, the buffer and
        the strategy what happens to the rest. Nothing is lost silently: every drop is
        counted and passed to ``on_drop`` (Rule 1.1 holds downstream).

    Concurrency:
        Notifications arrive on the Observable's scheduler thread; delivery runs on the
        package's drain loop, serially (Rule 1.3), on whichever thread has work.
    """
    _require_reactivex()
    check_positive("buffer_size", buffer_size)
    return ObservablePublisher(
        _ObservableSource(observable), buffer_size, overflow, on_drop, "from_observable"
    )


# ---------------------------------------------------------------------- Publisher -> Observable
class _ObserverSubscriber(Subscriber[Any]):
    """Feeds one Observer from a publisher, requesting ``prefetch`` at a time.

    Rx observers may not be re-entered, and our publishers signal serially (Rule 1.3), so
    signals go straight through. Demand: ``prefetch`` at ``on_subscribe``, then the
    consumed count each time it reaches ``replenish_threshold(prefetch)``.
    """

    __slots__ = (
        "_consumed",
        "_disposed",
        "_limit",
        "_lock",
        "_observer",
        "_prefetch",
        "_subscription",
    )

    def __init__(self, observer: ObserverBase[Any], prefetch: int) -> None:
        self._observer = observer
        self._prefetch = prefetch
        self._limit = replenish_threshold(prefetch)
        self._consumed = 0
        self._lock = threading.Lock()
        self._subscription: Subscription | None = None
        self._disposed = False

    def on_subscribe(self, subscription: Subscription) -> None:
        if not accept_subscription(subscription, self._claim):
            return  # Rule 2.5, or disposed before the subscription arrived
        subscription.request(self._prefetch)

    def _claim(self, subscription: Subscription) -> bool:
        with self._lock:
            if self._subscription is not None or self._disposed:
                return False
            self._subscription = subscription
            return True

    def on_next(self, element: Any) -> None:
        if element is None:
            raise TypeError("Rule 2.13: on_next(None)")
        if self._disposed:
            return
        try:
            self._observer.on_next(element)
        except Exception as exc:  # the observer failed: stop the source, tell the observer
            self.dispose()
            self._observer.on_error(exc)
            return
        self._consumed += 1
        if self._consumed >= self._limit:
            count, self._consumed = self._consumed, 0
            subscription = self._subscription
            if subscription is not None and not self._disposed:
                subscription.request(count)

    def on_error(self, error: Exception) -> None:
        if error is None:
            raise TypeError("Rule 2.13: on_error(None)")
        if self._terminate():
            self._observer.on_error(error)

    def on_complete(self) -> None:
        if self._terminate():
            self._observer.on_completed()

    def _terminate(self) -> bool:
        """Mark the subscription over before a terminal signal reaches the observer.

        Rule 2.3 forbids calling the subscription from ``on_complete``/``on_error``, yet an
        observer may dispose while it handles the signal (reactivex's
        ``AutoDetachObserver`` always does). Marking ``_disposed`` first makes that
        ``dispose`` a no-op instead of a ``cancel`` from inside the terminal signal.

        Returns:
            ``True`` if the observer should get the signal, ``False`` if it was disposed.
        """
        with self._lock:
            if self._disposed:
                return False
            self._disposed = True
            self._subscription = None
            return True

    def dispose(self) -> None:
        """Cancel the subscription (now, or as soon as it arrives); idempotent."""
        with self._lock:
            if self._disposed:
                return
            self._disposed = True
            subscription = self._subscription
        if subscription is not None:
            cancel_quietly(subscription)


def to_observable(publisher: Publisher[T], *, prefetch: int = 256) -> Observable[T]:
    """An Observable that subscribes to ``publisher`` for each of its observers.

    Marble (``prefetch=4``: requests 4, then 3 after every 3 consumed)::

        publisher:  -1-2-3-4-5-6-|
        request:    (4)...(3)...
        observable: -1-2-3-4-5-6-|

    Args:
        publisher: any publisher of ``T``.
        prefetch: the first request, and the most elements ever in flight, ``>= 1``.

    Returns:
        A cold reactivex ``Observable``: each ``subscribe`` subscribes to ``publisher``
        anew; disposing the returned disposable cancels that subscription (Rule 3.5).
        ``on_complete`` becomes ``on_completed``, ``on_error`` passes the error on.

    Raises:
        ImportError: reactivex is not installed.
        TypeError, ValueError: ``prefetch`` is not a positive ``int``.

    Backpressure:
        Requests ``prefetch`` up front, then replenishes what was consumed each time 75% of
        a batch is (``replenish_threshold``); an observer that raises in ``on_next``
        cancels the subscription and receives that error through ``on_error``.

    Concurrency:
        The observer is called on the publisher's signalling thread; to move it, add
        ``observe_on`` on the Observable or ``publish_on`` before converting.
    """
    reactivex = _require_reactivex()
    check_positive("prefetch", prefetch)
    disposable_type = importlib.import_module("reactivex.disposable").Disposable

    def subscribe(observer: ObserverBase[T], scheduler: SchedulerBase | None = None) -> Any:
        subscriber = _ObserverSubscriber(observer, prefetch)
        try:
            publisher.subscribe(subscriber)
        except Exception as exc:  # a publisher that broke Rule 1.9: tell the observer
            observer.on_error(exc)
        return disposable_type(subscriber.dispose)

    observable: Observable[T] = reactivex.create(subscribe)
    return observable
