"""``Flow.using``: a resource per subscriber, cleaned up exactly once when its stream ends."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from .._core import (
    BufferedStage,
    Operator,
    cancel_quietly,
    check_subscriber,
    report_undeliverable,
    signal_error_only,
    signal_terminal,
)
from ..api import Publisher

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from .._core import Cancellable
    from ..api import Subscriber, Subscription

__all__ = ["UsingPublisher"]

S = TypeVar("S")
T = TypeVar("T")


class UsingPublisher(Operator[T], Generic[S, T]):
    """Per subscriber: open a resource, stream from it, clean it up once (Reactor ``using``).

    ``resource_factory()`` runs at ``subscribe``; ``flow_factory(resource)`` gives the
    publisher to stream from; ``cleanup(resource)`` runs exactly once, when the stream
    completes, fails or is cancelled (also after a Rule 3.9 error or a downstream
    ``on_next`` that raised). On completion and error it runs before the terminal signal
    goes downstream (Reactor's eager mode); on cancel, after upstream was cancelled.

    A ``resource_factory`` that raises fails the subscriber (nothing to clean up); a
    ``flow_factory`` that raises cleans up, then fails the subscriber. A ``cleanup`` that
    raises turns a completion into that error; after an error or a cancel it goes to the
    undeliverable hook.

    Backpressure:
        Demand passes through to the resource's publisher.

    Concurrency:
        ``cleanup`` runs on the thread that ends the stream: the one delivering the
        terminal signal, or the one that cancels.
    """

    __slots__ = ("_cleanup", "_flow_factory", "_resource_factory")

    def __init__(
        self,
        resource_factory: Callable[[], S],
        flow_factory: Callable[[S], Publisher[T]],
        cleanup: Callable[[S], object],
    ) -> None:
        super().__init__()
        for what, fn in (
            ("resource_factory", resource_factory),
            ("flow_factory", flow_factory),
            ("cleanup", cleanup),
        ):
            if not callable(fn):
                raise TypeError(f"using() needs a callable {what}, got {type(fn).__qualname__}")
        self._resource_factory = resource_factory
        self._flow_factory = flow_factory
        self._cleanup = cleanup

    @property
    def name(self) -> str:
        return "using"

    def subscribe(self, subscriber: Subscriber[T]) -> None:
        """Open the resource and subscribe through a stage that cleans it up (Rule 1.9)."""
        check_subscriber(subscriber)
        try:
            resource = self._resource_factory()
        except Exception as exc:
            signal_error_only(subscriber, exc)
            return
        release = _Release(self._cleanup, resource)
        try:
            publisher = self._flow_factory(resource)
            if not isinstance(publisher, Publisher):
                raise TypeError(
                    f"using(): the flow_factory returned {type(publisher).__qualname__}, "
                    "not a Publisher"
                )
        except Exception as exc:
            release.cancel()
            if release.error is not None:
                report_undeliverable(release.error)
            signal_error_only(subscriber, exc)
            return
        stage = _Using(subscriber, release)
        self._track(stage)
        try:
            publisher.subscribe(stage)
        except Exception as exc:  # the publisher broke Rule 1.9
            if stage.subscribed:
                stage.fail(exc)
            else:
                release.cancel()
                signal_error_only(subscriber, exc)


class _Release:
    """The cleanup as a ``Cancellable``: runs once; keeps what it raised."""

    __slots__ = ("_cleanup", "_lock", "_resource", "_upstream", "done", "error")

    def __init__(self, cleanup: Callable[[Any], object], resource: Any) -> None:
        self._cleanup = cleanup
        self._resource = resource
        self._lock = threading.Lock()
        self._upstream: Subscription | None = None
        self.done = False
        self.error: Exception | None = None

    def cancel(self, upstream: Subscription | None = None) -> None:
        """Cancel ``upstream`` (if given), then run the cleanup unless it already ran."""
        if upstream is not None:
            cancel_quietly(upstream)  # a no-op after its terminal signal (Rule 3.7)
        with self._lock:
            if self.done:
                return
            self.done = True
            resource, self._resource = self._resource, None
        try:
            self._cleanup(resource)
        except Exception as exc:
            self.error = exc


class _UpstreamThenRelease:
    """The cancel path: cancel upstream, then clean up; a cleanup error is undeliverable."""

    __slots__ = ("_release", "_upstream")

    def __init__(self, release: _Release, upstream: Subscription | None) -> None:
        self._release = release
        self._upstream = upstream

    def cancel(self) -> None:
        self._release.cancel(self._upstream)
        if self._release.error is not None:
            report_undeliverable(self._release.error)  # nobody listens any more


class _Using(BufferedStage):
    """Elements pass through ``_ready``; the stage's end (``_stop_locked``) cleans up."""

    _forwards_demand = True

    __slots__ = ("_release", "subscribed")

    def __init__(self, downstream: Subscriber[Any], release: _Release) -> None:
        super().__init__(downstream)
        self._release = release
        self.subscribed = False

    def on_subscribe(self, subscription: Subscription) -> None:
        self.subscribed = True
        self._accept_upstream(subscription)

    def _stop_locked(self) -> Sequence[Cancellable]:
        super()._stop_locked()
        if self._cancelled:  # cancel upstream first, then clean up (Reactor's order)
            return (_UpstreamThenRelease(self._release, self._upstream),)
        return (self._release,)

    def _signal_terminal(
        self,
        downstream: Subscriber[Any],
        upstream: Subscription | None,
        error: Exception | None,
        urgent: bool,
    ) -> None:
        failure = self._release.error
        if failure is None:
            super()._signal_terminal(downstream, upstream, error, urgent)
            return
        if error is not None:
            report_undeliverable(failure)  # the stream's own error goes downstream
            super()._signal_terminal(downstream, upstream, error, urgent)
            return
        if upstream is not None:
            cancel_quietly(upstream)
        signal_terminal(downstream, failure)  # a failed cleanup fails the completion
