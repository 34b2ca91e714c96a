"""``via``: plug any ``Processor`` into a flow."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

from .._core import SingleUpstreamOperator, check_subscriber, signal_error_only
from ..api import Processor, Publisher, Subscriber

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["ViaOperator"]

T = TypeVar("T")
R = TypeVar("R")


class ViaOperator(SingleUpstreamOperator[R]):
    """Route the flow through a processor: ``upstream -> processor -> subscriber``.

    Args:
        processor: a ``Processor`` instance (used by one subscription, as processors
            usually serve one), or a zero-argument callable returning a fresh one per
            subscriber.

    Backpressure:
        Whatever the processor does; a spec-conforming processor carries demand upstream.

    Concurrency:
        Whatever the processor does.
    """

    __slots__ = ("_factory",)

    def __init__(
        self,
        upstream: Publisher[T],
        processor: Processor[T, R] | Callable[[], Processor[T, R]],
    ) -> None:
        super().__init__(upstream)
        if isinstance(processor, Processor):
            instance = processor
            self._factory: Callable[[], Processor[T, R]] = lambda: instance
        elif callable(processor):
            self._factory = processor
        else:
            raise TypeError(
                f"via() needs a Processor or a factory of processors, got {processor!r}"
            )

    @property
    def name(self) -> str:
        return "via"

    def subscribe(self, subscriber: Subscriber[R]) -> None:
        """Subscribe ``subscriber`` to the processor and the processor upstream."""
        check_subscriber(subscriber)
        try:
            processor = self._factory()
            if not isinstance(processor, Processor):
                raise TypeError(f"via(): the factory returned {processor!r}, not a Processor")
        except Exception as exc:
            signal_error_only(subscriber, exc)
            return
        statistics = getattr(processor, "statistics", None)
        if callable(statistics):
            self._track(processor)  # type: ignore[arg-type]
        processor.subscribe(subscriber)
        self._upstream.subscribe(processor)
