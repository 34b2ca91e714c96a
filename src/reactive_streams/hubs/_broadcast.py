"""``BroadcastHub``: one source, consumers that come and go, bounded drift."""

from __future__ import annotations

from collections import deque
from typing import Any, Generic, Literal, TypeVar

from .._core import (
    MissingBackpressureError,
    accept_subscription,
    cancel_quietly,
    check_positive,
    latch_terminal_locked,
    report_undeliverable,
    signal_each,
    signal_on_error,
    signal_on_subscribe,
    signal_terminal,
)
from ..api import Publisher, Subscriber, Subscription
from ._hub import HubBase, HubConsumer, HubStatistics

__all__ = ["BroadcastHub", "SlowConsumer"]

T = TypeVar("T")

SlowConsumer = Literal["wait", "drop", "fail"]


class _Reader(HubConsumer):
    __slots__ = ("cursor",)

    def __init__(self, hub: BroadcastHub[Any], subscriber: Subscriber[Any], cursor: int) -> None:
        super().__init__(hub, subscriber)
        self.cursor = cursor  # absolute index of the next element to deliver


class BroadcastHub(HubBase, Publisher[T], Generic[T]):
    """Every element of ``source`` to every consumer attached at the time, at any time.

    ``subscribe(s)`` works at any time: a consumer gets every element not yet delivered
    to any consumer when it joined (all that waited in the buffer, when it is the only
    one), then the source's terminal signal; a consumer joining after the end gets the terminal
    signal at once. The source is subscribed at the first ``subscribe``.

    >>> from reactive_streams import Flow
    >>> hub = BroadcastHub(Flow.range(0, 5), buffer_size=2)
    >>> from reactive_streams.testing import RecordingSubscriber
    >>> first, second = RecordingSubscriber(), RecordingSubscriber()
    >>> hub.subscribe(first); hub.subscribe(second)
    >>> first.request(10)   # waits for the slowest: at most buffer_size ahead
    >>> first.elements
    [0, 1]
    >>> second.request(10); first.elements, second.elements, first.completed
    ([0, 1, 2, 3, 4], [0, 1, 2, 3, 4], True)

    Args:
        source: the upstream publisher.
        buffer_size: elements kept for the slowest consumer (the bounded drift).
        slow_consumer: what a consumer ``buffer_size`` elements behind does:
            ``"wait"`` (default): it paces the source; ``"drop"``: it misses the oldest
            elements (counted in ``statistics().dropped``); ``"fail"``: it gets
            ``on_error(MissingBackpressureError)`` and leaves (counted in
            ``statistics().failed_consumers``).

    Backpressure:
        With ``"wait"``, upstream is requested only as far as the slowest consumer's
        position plus ``buffer_size``; with ``"drop"``/``"fail"``, as far as the fastest
        consumer's demand, never more than ``buffer_size`` beyond the fastest position.
        Without consumers the buffer fills up to ``buffer_size``, then the source waits.

    Concurrency:
        One drain loop delivers to every consumer; each consumer's signals are serial.
    """

    def __init__(
        self,
        source: Publisher[T],
        buffer_size: int = 256,
        *,
        slow_consumer: SlowConsumer = "wait",
    ) -> None:
        super().__init__()
        if slow_consumer not in ("wait", "drop", "fail"):
            raise ValueError(
                f"slow_consumer must be 'wait', 'drop' or 'fail', got {slow_consumer!r}"
            )
        self._source = source
        self._buffer_size = check_positive("buffer_size", buffer_size)
        self._policy: SlowConsumer = slow_consumer
        self._buffer: deque[Any] = deque()
        self._start = 0  # absolute index of self._buffer[0]
        self._front = 0  # absolute index of the first element no consumer has received
        self._requested_to = 0  # absolute index up to which upstream was requested
        self._readers: list[_Reader] = []
        self._upstream: Subscription | None = None
        self._connected = False
        self._done = False
        self._error: Exception | None = None
        self._terminated = False
        self._dropped = 0
        self._failed = 0
        self._delivered = 0

    # ------------------------------------------------------------------ consumers
    def subscribe(self, subscriber: Subscriber[T]) -> None:
        """Attach a consumer (Rule 1.9); the first one also connects the source."""
        if subscriber is None:
            raise TypeError("Rule 1.9: subscribe() requires a Subscriber, got None")
        with self._lock:
            reader = _Reader(self, subscriber, self._front)
            self._readers.append(reader)
            connect = not self._connected
            self._connected = True
        if not signal_on_subscribe(subscriber, reader):
            reader.cancel()
        if connect:
            self._source.subscribe(_Upstream(self))
        self._schedule()

    def statistics(self) -> HubStatistics:
        """A snapshot: 1 producer while the source runs, consumers, buffered, drops."""
        with self._lock:
            return HubStatistics(
                producers=int(self._connected and not self._done),
                consumers=sum(1 for r in self._readers if not r.cancelled),
                buffered=len(self._buffer),
                dropped=self._dropped,
                failed_consumers=self._failed,
                delivered=self._delivered,
            )

    # ------------------------------------------------------------------ upstream side
    def _on_upstream(self, subscription: Subscription) -> bool:
        with self._lock:
            if self._upstream is not None:
                return False
            self._upstream = subscription
        self._schedule()
        return True

    def _on_element(self, element: Any) -> None:
        with self._lock:
            if self._done:
                return
            self._buffer.append(element)
            if self._policy != "wait":
                self._police_locked()
        self._schedule()

    def _police_locked(self) -> None:
        """Drop for, or fail, consumers more than ``buffer_size`` behind; trim the buffer."""
        end = self._start + len(self._buffer)
        low: int | None = None
        for reader in self._readers:
            if reader.cancelled or reader.error is not None:
                continue
            behind = end - reader.cursor
            if behind > self._buffer_size:
                if self._policy == "drop":
                    self._dropped += behind - self._buffer_size
                    reader.cursor = end - self._buffer_size
                    self._front = max(self._front, reader.cursor)
                else:
                    reader.error = MissingBackpressureError(
                        f"BroadcastHub: consumer fell {behind} elements behind "
                        f"(buffer_size={self._buffer_size}, slow_consumer='fail')"
                    )
                    continue
            low = reader.cursor if low is None else min(low, reader.cursor)
        while low is not None and self._start < low and self._buffer:
            self._buffer.popleft()
            self._start += 1

    def _on_terminal(self, error: Exception | None) -> None:
        with self._lock:
            first = latch_terminal_locked(self, error)
        if first:
            self._schedule()

    # ------------------------------------------------------------------ the drain
    def _drain(self) -> None:
        while True:
            moved = False
            for reader in self._sweep():
                moved |= self._serve(reader)
            request = self._trim_and_plan()
            if request:
                upstream = self._upstream
                assert upstream is not None
                try:
                    upstream.request(request)
                except Exception as exc:  # Rule 3.16 broken: the source is over
                    report_undeliverable(exc)
                    self._on_terminal(exc)
                moved = True
            if not moved:
                return

    def _sweep(self) -> list[_Reader]:
        """Handle cancelled, failed (Rule 3.9) and too-slow consumers; return the live ones."""
        failures: list[tuple[_Reader, Exception]] = []
        with self._lock:
            end = self._start + len(self._buffer)
            live: list[_Reader] = []
            for reader in self._readers:
                if reader.cancelled:
                    reader.subscriber = None  # Rule 3.13
                    continue
                if reader.error is not None:
                    reader.cancelled = True
                    failures.append((reader, reader.error))
                    self._failed += 1
                    continue
                behind = end - reader.cursor
                if behind > self._buffer_size and self._policy != "wait":
                    if self._policy == "drop":
                        self._dropped += behind - self._buffer_size
                        reader.cursor = end - self._buffer_size
                        self._front = max(self._front, reader.cursor)
                    else:
                        reader.cancelled = True
                        self._failed += 1
                        failures.append(
                            (
                                reader,
                                MissingBackpressureError(
                                    f"BroadcastHub: consumer fell {behind} elements behind "
                                    f"(buffer_size={self._buffer_size}, slow_consumer='fail')"
                                ),
                            )
                        )
                        continue
                live.append(reader)
            self._readers = live
        for reader, error in failures:
            subscriber, reader.subscriber = reader.subscriber, None
            if subscriber is not None:
                signal_on_error(subscriber, error)
        return live

    def _serve(self, reader: _Reader) -> bool:
        """Deliver what ``reader`` may take, then its terminal signal; whether it moved."""
        with self._lock:
            offset = reader.cursor - self._start
            available = len(self._buffer) - offset
            count = reader.take_locked(available)
            batch = [self._buffer[offset + i] for i in range(count)] if count > 0 else []
            reader.cursor += count
            self._front = max(self._front, reader.cursor)
            finished = self._done and reader.cursor >= self._start + len(self._buffer)
            error = self._error
        subscriber = reader.subscriber
        if subscriber is None:
            return bool(count)
        sent, ok = signal_each(subscriber, batch, reader.is_cancelled)
        with self._lock:
            self._delivered += sent
        if not ok:  # Rule 2.13
            reader.cancel()
            return True
        if finished:
            with self._lock:
                cut_short = reader.cancelled  # cancelled from inside on_next
                reader.cancelled = True
            reader.subscriber = None
            if not cut_short:
                signal_terminal(subscriber, error)
            return True
        return bool(count)

    def _trim_and_plan(self) -> int:
        """Drop elements every consumer has passed; return how much to request upstream."""
        with self._lock:
            readers = [r for r in self._readers if not r.cancelled]
            end = self._start + len(self._buffer)
            low = min(r.cursor for r in readers) if readers else self._front
            while self._start < low and self._buffer:
                self._buffer.popleft()
                self._start += 1
            if self._upstream is None or self._done:
                return 0
            if not readers:
                target = self._start + self._buffer_size
            elif self._policy == "wait":
                target = min(r.cursor for r in readers) + self._buffer_size
            else:
                target = max(
                    min(r.cursor + r.demand, r.cursor + self._buffer_size) for r in readers
                )
            target = max(target, end)
            extra = target - self._requested_to
            if extra <= 0:
                return 0
            self._requested_to = target
            return extra

    def _fail_hub(self, error: Exception) -> None:
        with self._lock:
            self._terminated = True
            self._done = True
            readers, self._readers = self._readers, []
            upstream = self._upstream
        if upstream is not None:
            cancel_quietly(upstream)
        if not readers:
            report_undeliverable(error)
        for reader in readers:
            subscriber, reader.subscriber = reader.subscriber, None
            if subscriber is not None:
                signal_on_error(subscriber, error)


class _Upstream(Subscriber[Any]):
    __slots__ = ("_hub",)

    def __init__(self, hub: BroadcastHub[Any]) -> None:
        self._hub = hub

    def on_subscribe(self, subscription: Subscription) -> None:
        accept_subscription(subscription, self._hub._on_upstream)

    def on_next(self, element: Any) -> None:
        if element is None:
            raise TypeError("Rule 2.13: on_next(None)")
        self._hub._on_element(element)

    def on_error(self, error: Exception) -> None:
        if error is None:
            raise TypeError("Rule 2.13: on_error(None)")
        self._hub._on_terminal(error)

    def on_complete(self) -> None:
        self._hub._on_terminal(None)
