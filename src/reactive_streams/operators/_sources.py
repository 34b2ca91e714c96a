"""Sources that are not iterables: ``error``, ``defer`` and ``from_publisher``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from .._core import Operator, StageStatistics, check_subscriber, signal_error_only
from ..api import Publisher, Subscriber

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["DeferPublisher", "ErrorPublisher", "WrappedPublisher"]

T = TypeVar("T")


class ErrorPublisher(Operator[T]):
    """Signals ``on_subscribe`` then ``on_error(error)`` to every subscriber, without demand.

    Marble::

        error(E)  -X
    """

    __slots__ = ("_error",)

    def __init__(self, error: Exception) -> None:
        super().__init__()
        if not isinstance(error, Exception):
            raise TypeError(f"Flow.error() needs an Exception instance, got {error!r}")
        self._error = error

    @property
    def name(self) -> str:
        return "error"

    def subscribe(self, subscriber: Subscriber[T]) -> None:
        """Fail ``subscriber`` at once (Rules 1.4, 1.9)."""
        check_subscriber(subscriber)
        signal_error_only(subscriber, self._error)


class DeferPublisher(Operator[T]):
    """Calls ``factory()`` for each subscriber and subscribes it to the result.

    A factory that raises (or returns something that is not a publisher) fails that
    subscriber with ``on_subscribe`` + ``on_error`` (Rule 1.9).
    """

    __slots__ = ("_factory",)

    def __init__(self, factory: Callable[[], Publisher[T]]) -> None:
        super().__init__()
        self._factory = factory

    @property
    def name(self) -> str:
        return "defer"

    def subscribe(self, subscriber: Subscriber[T]) -> None:
        """Build a fresh publisher and subscribe ``subscriber`` to it."""
        check_subscriber(subscriber)
        try:
            publisher = self._factory()
            if not isinstance(publisher, Publisher):
                raise TypeError(f"defer(): the factory returned {publisher!r}, not a Publisher")
        except Exception as exc:
            signal_error_only(subscriber, exc)
            return
        publisher.subscribe(subscriber)


class WrappedPublisher(Operator[T]):
    """Any publisher (a third-party one too) inside a ``Flow``; adds no stage of its own."""

    __slots__ = ("_publisher",)

    def __init__(self, publisher: Publisher[T]) -> None:
        super().__init__()
        if not isinstance(publisher, Publisher):
            raise TypeError(
                f"from_publisher() needs a Publisher (or a class registered with "
                f"Publisher.register), got {type(publisher).__qualname__}"
            )
        self._publisher = publisher

    @property
    def name(self) -> str:
        return type(self._publisher).__qualname__

    @property
    def upstreams(self) -> tuple[Publisher[Any], ...]:
        return (self._publisher,)

    def subscribe(self, subscriber: Subscriber[T]) -> None:
        """Subscribe directly to the wrapped publisher."""
        check_subscriber(subscriber)
        self._publisher.subscribe(subscriber)

    def last_statistics(self) -> StageStatistics | None:
        """Whatever the wrapped publisher reports, if it has ``statistics()``."""
        return None
