"""Deliberately broken subscribers, each breaking one rule of ``BatchSubscriber``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tests.tck.tck_samples import BatchSubscriber

if TYPE_CHECKING:
    from reactive_streams import Subscription


class RequestsFromOnCompleteSubscriber(BatchSubscriber):
    """Rule 2.3: requests more from inside on_complete."""

    def on_complete(self) -> None:
        super().on_complete()
        if self.subscription is not None:
            self.subscription.request(1)


class IgnoresSecondSubscriptionSubscriber(BatchSubscriber):
    """Rule 2.5: a second on_subscribe is silently ignored, never cancelled."""

    def on_subscribe(self, subscription: Subscription) -> None:
        if self.subscription is not None:
            return
        super().on_subscribe(subscription)


class AcceptsOnNextNoneSubscriber(BatchSubscriber):
    """Rule 2.13: on_next(None) returns normally."""

    def on_next(self, element: Any) -> None:
        if element is None:
            return
        super().on_next(element)


class NeverRequestsSubscriber(BatchSubscriber):
    """Rule 2.1: never signals demand."""

    def on_subscribe(self, subscription: Subscription) -> None:
        if subscription is None:
            raise TypeError("Rule 2.13: on_subscribe(None)")
        self.subscription = subscription


class RaisesOnEarlyCompletionSubscriber(BatchSubscriber):
    """Rule 2.9: on_complete before any element raises."""

    def on_complete(self) -> None:
        if not self.received:
            raise RuntimeError("completed before any element")
        super().on_complete()


class RaisesOnEarlyErrorSubscriber(BatchSubscriber):
    """Rule 2.10: on_error before any element raises."""

    def on_error(self, error: Exception) -> None:
        if error is not None and not self.received:
            raise RuntimeError("failed before any element") from error
        super().on_error(error)


class RaisesAfterCancelSubscriber(BatchSubscriber):
    """Rule 2.8: an element that arrives after cancel() raises."""

    cancelled = False

    def on_next(self, element: Any) -> None:
        if self.cancelled:
            raise RuntimeError("element after cancel")
        super().on_next(element)

    def cancel(self) -> None:
        self.cancelled = True
        if self.subscription is not None:
            self.subscription.cancel()
