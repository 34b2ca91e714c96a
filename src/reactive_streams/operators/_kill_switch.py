"""``KillSwitch``: stop any number of running flows from outside (Akka ``KillSwitches.shared``)."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from .._core import (
    BufferedStage,
    EmptySubscription,
    ProtocolViolationError,
    accept_subscription,
    cancel_quietly,
    check_subscriber,
    signal_error_only,
)
from ..api import Processor

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from .._core import Cancellable
    from ..api import Subscriber, Subscription

__all__ = ["KillSwitch"]

T = TypeVar("T")


class KillSwitch:
    """One switch for many flows: ``shutdown()`` completes them, ``abort(error)`` fails them.

    Attach a flow with ``flow.via(switch.flow())``; every subscription of it is one
    attached stream. ``shutdown()`` cancels the upstream of every attached stream and
    completes it downstream (after the elements it already received); ``abort(error)``
    cancels their upstream and signals ``error`` at once. The first of the two wins and
    the switch stays in that state: streams attached afterwards end the same way as soon
    as they start. Akka's ``KillSwitches.shared``.

    >>> from reactive_streams import Flow
    >>> from reactive_streams.testing import RecordingSubscriber
    >>> switch = KillSwitch()
    >>> seen = RecordingSubscriber(initial_request=2)
    >>> Flow.range(0, 1_000).via(switch.flow()).subscribe(seen)
    >>> switch.shutdown()
    >>> seen.elements, seen.completed
    ([0, 1], True)

    Concurrency: ``shutdown`` and ``abort`` may be called from any thread; each stream ends
    through its own drain loop, so its signals stay serial (Rule 1.3).
    """

    __slots__ = ("_attached", "_lock", "_name", "_state")

    def __init__(self, name: str = "kill_switch") -> None:
        self._name = name
        self._lock = threading.Lock()
        self._attached: set[_Killable] = set()
        self._state: tuple[Exception | None] | None = None  # (error or None,) once triggered

    def __repr__(self) -> str:
        state = (
            "open" if self._state is None else "shut down" if self._state[0] is None else "aborted"
        )
        return f"KillSwitch({self._name!r}, {state}, attached={self.attached})"

    @property
    def attached(self) -> int:
        """How many streams are running through the switch right now."""
        with self._lock:
            return len(self._attached)

    @property
    def triggered(self) -> bool:
        """Whether ``shutdown`` or ``abort`` was called."""
        with self._lock:
            return self._state is not None

    def flow(self) -> Callable[[], Processor[Any, Any]]:
        """A factory of processors for ``Flow.via``: one processor per stream.

        Backpressure:
            Demand passes through unchanged.
        """
        return lambda: _KillSwitchProcessor(self)

    def shutdown(self) -> None:
        """Complete every attached stream and cancel its upstream; later ones too."""
        self._trigger((None,))

    def abort(self, error: Exception) -> None:
        """Fail every attached stream with ``error`` and cancel its upstream; later ones too.

        Raises:
            TypeError: ``error`` is not an ``Exception``.
        """
        if not isinstance(error, Exception):
            raise TypeError(f"abort() needs an Exception, got {type(error).__qualname__}")
        self._trigger((error,))

    def _trigger(self, state: tuple[Exception | None]) -> None:
        with self._lock:
            if self._state is not None:
                return  # the first trigger wins
            self._state = state
            streams = list(self._attached)
        for stream in streams:  # never under the switch's lock: each takes its own
            stream.kill(state[0])

    def _attach(self, stream: _Killable) -> tuple[Exception | None] | None:
        """Register a starting stream; the state if the switch was already triggered."""
        with self._lock:
            if self._state is None:
                self._attached.add(stream)
            return self._state

    def _detach(self, stream: _Killable) -> None:
        with self._lock:
            self._attached.discard(stream)


class _Killable(BufferedStage):
    """One stream through the switch: elements pass through ``_ready``."""

    _forwards_demand = True

    __slots__ = ("_switch",)

    def __init__(self, downstream: Subscriber[Any], switch: KillSwitch) -> None:
        super().__init__(downstream)
        self._switch = switch

    def on_subscribe(self, subscription: Subscription) -> None:
        if self._upstream is None:
            state = self._switch._attach(self)
            if state is not None:  # triggered already: end before anything is requested
                with self._lock:
                    self._done = True
                    self._error = state[0]
                    self._urgent = state[0] is not None
        if not self._accept_upstream(subscription):
            return
        with self._lock:
            ended = self._done
        if ended:
            cancel_quietly(subscription)
            self._schedule()

    def kill(self, error: Exception | None) -> None:
        """End the stream: upstream cancelled; completion after ``_ready``, or ``error`` now."""
        if error is not None:
            self._fail_urgently(error)  # the drain cancels upstream, then signals it
            self._schedule()
            return
        with self._lock:
            if self._done:
                return
            self._done = True
            upstream = self._upstream
        if upstream is not None:
            cancel_quietly(upstream)
        self._schedule()

    def _stop_locked(self) -> Sequence[Cancellable]:
        super()._stop_locked()
        return (_Detach(self._switch, self),)


class _Detach:
    __slots__ = ("_stream", "_switch")

    def __init__(self, switch: KillSwitch, stream: _Killable) -> None:
        self._switch = switch
        self._stream = stream

    def cancel(self) -> None:
        self._switch._detach(self._stream)


class _KillSwitchProcessor(Processor[T, T], Generic[T]):
    """The processor ``via`` plugs in: one downstream subscriber, then one upstream.

    Upstream signals that arrive before the downstream subscriber (a processor used
    outside ``via``) wait for it: the subscription and a terminal signal are kept.
    """

    __slots__ = ("_lock", "_pending", "_pending_end", "_stage", "_switch")

    def __init__(self, switch: KillSwitch) -> None:
        self._switch = switch
        self._lock = threading.Lock()
        self._stage: _Killable | None = None
        self._pending: Subscription | None = None
        self._pending_end: tuple[Exception | None] | None = None

    def subscribe(self, subscriber: Subscriber[T]) -> None:
        """Serve ``subscriber``; a processor serves one (a second gets ``on_error``)."""
        check_subscriber(subscriber)
        with self._lock:
            second = self._stage is not None
            if not second:
                self._stage = _Killable(subscriber, self._switch)
            stage = self._stage
            pending, self._pending = self._pending, None
            end, self._pending_end = self._pending_end, None
        if second:
            signal_error_only(
                subscriber, RuntimeError("a kill switch's processor serves one subscriber")
            )
            return
        assert stage is not None
        if pending is None and end is not None:
            pending = EmptySubscription()  # upstream is over already (Rule 1.9 first)
        if pending is not None:
            stage.on_subscribe(pending)
        if end is not None:
            if end[0] is None:
                stage.on_complete()
            else:
                stage.on_error(end[0])

    def _stage_or_keep(self, subscription: Subscription | None = None) -> _Killable | None:
        with self._lock:
            stage = self._stage
            if stage is None and subscription is not None:
                self._pending = subscription
        return stage

    def on_subscribe(self, subscription: Subscription) -> None:
        accept_subscription(subscription, True)  # the stage it reaches keeps Rule 2.5
        stage = self._stage_or_keep(subscription)
        if stage is not None:
            stage.on_subscribe(subscription)

    def on_next(self, element: T) -> None:
        with self._lock:
            stage = self._stage
            if stage is None:  # nobody could have requested it: upstream broke Rule 1.1
                pending, self._pending = self._pending, None
                self._pending_end = self._pending_end or (
                    ProtocolViolationError(
                        "Rule 1.1: on_next reached a kill switch's processor before its "
                        "subscriber could request anything",
                        rule="1.1",
                    ),
                )
        if stage is None:
            if pending is not None:
                cancel_quietly(pending)
            return
        stage.on_next(element)

    def on_error(self, error: Exception) -> None:
        if error is None:
            raise TypeError("Rule 2.13: on_error(None)")
        with self._lock:
            stage = self._stage
            if stage is None:
                self._pending_end = (error,)
        if stage is not None:
            stage.on_error(error)

    def on_complete(self) -> None:
        with self._lock:
            stage = self._stage
            if stage is None:
                self._pending_end = (None,)
        if stage is not None:
            stage.on_complete()
