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
