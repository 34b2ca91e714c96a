"""A subscriber that ignores everything: what a subscription keeps after it ends.

A subscription that has been cancelled or has terminated replaces its subscriber with
``DROPPED`` so that it no longer keeps the subscriber reachable (Rule 3.13). Signals still
in flight at that moment go nowhere, which Rules 2.8 and 3.12 allow after a cancel.
"""

from __future__ import annotations

from typing import Any, Final

from ..api import Subscriber, Subscription

__all__ = ["DROPPED"]


class _DroppedSubscriber(Subscriber[Any]):
    """Ignores every signal."""

    def on_subscribe(self, subscription: Subscription) -> None:
        """Ignored: nothing subscribes through the placeholder."""

    def on_next(self, element: Any) -> None:
        """Ignored: the subscriber cancelled or the stream ended (Rule 2.8)."""

    def on_error(self, error: Exception) -> None:
        """Ignored: the stream already ended for its subscriber."""

    def on_complete(self) -> None:
        """Ignored: the stream already ended for its subscriber."""


DROPPED: Final[Subscriber[Any]] = _DroppedSubscriber()
"""The placeholder subscriber of a subscription that has ended (Rule 3.13)."""
