"""``MemberSubscription``: one subscriber of a stage that serves several from one drain loop.

``group_by``'s groups, a multicast's subscribers and a hub's consumers are each one
subscriber's ``Subscription``, yet none of them signals its subscriber by itself: the
owning stage's single drain loop does, for all of them, because they share its buffer and
its upstream. What each keeps is written here once: the demand (capped, Rule 3.17), a
parked Rule 3.9 error for the drain to signal, and the cancel flag. ``request`` and
``cancel`` only update that state under the owner's lock and then run the owner's drain
loop (``_schedule``); after a cancel, ``request`` is a no-op (Rule 3.6).

A source with a subscriber of its own (a range, a timer, a file) uses
``EmitLoopSubscription`` instead, which also runs the emit loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from ..api import Subscription
from ._demand import MAX_DEMAND, add_demand, validate_request
from ._exceptions import ProtocolViolationError

if TYPE_CHECKING:
    import threading

    from ..api import Subscriber

__all__ = ["MemberSubscription", "SharedDrainOwner"]


class SharedDrainOwner(Protocol):
    """The stage a ``MemberSubscription`` belongs to: its lock and its drain loop's entry."""

    _lock: threading.Lock

    def _schedule(self) -> None:
        """Run the drain loop, or make the running pass go round once more."""


class MemberSubscription(Subscription):
    """One subscriber's demand, parked error and cancel, served by the owner's drain loop.

    Attributes, guarded by ``owner._lock`` and read by the owner's drain:
        subscriber: the subscriber the drain signals; the drain drops it when the member
            ends (Rule 3.13).
        demand: outstanding demand, at most ``MAX_DEMAND`` (Rules 3.8, 3.17); the drain
            takes from it with ``take_locked``.
        requested: total demand ever requested, capped (for ``statistics()``).
        error: a Rule 3.9 error parked by ``request`` (or an error the owner assigns to
            this member alone), for the drain to signal after it stops delivering.
        cancelled: the member is over: cancelled by its subscriber, or ended by the owner.
            The drain checks it before every ``on_next`` (``is_cancelled``).

    Concurrency: ``request`` and ``cancel`` may come from any thread and never call the
    subscriber; only the owner's drain does.
    """

    __slots__ = ("cancelled", "demand", "error", "owner", "requested", "subscriber")

    def __init__(self, owner: SharedDrainOwner, subscriber: Subscriber[Any] | None) -> None:
        self.owner = owner
        self.subscriber = subscriber
        self.demand = 0
        self.requested = 0
        self.error: Exception | None = None
        self.cancelled = False

    def request(self, n: int) -> None:
        """Add ``n`` to the demand and run the owner's drain (Rules 3.8, 3.9, 3.17).

        Never raises (Rule 3.16): a bad ``n`` is parked for the drain to signal as
        ``on_error``. A no-op once the member is cancelled or ended (Rule 3.6).
        """
        owner = self.owner
        try:
            count = validate_request(n)
        except ProtocolViolationError as error:
            with owner._lock:
                if self.cancelled:
                    return
                if self.error is None:
                    self.error = error
        else:
            with owner._lock:
                if self.cancelled:
                    return
                self.demand = add_demand(self.demand, count)
                self.requested = add_demand(self.requested, count)
            self._drain_after_request()
            return
        owner._schedule()

    def _drain_after_request(self) -> None:
        """Run the owner's drain for new demand (the caller's thread).

        An owner whose drain can hand a long run over to a relay overrides this to take a
        bounded run on the caller's thread (``DrainLoop.start_borrowed``, Rule 3.4).
        """
        self.owner._schedule()

    def cancel(self) -> None:
        """Leave the owner (Rules 3.5, 3.7: idempotent); its drain forgets the member."""
        owner = self.owner
        with owner._lock:
            if self.cancelled:
                return
            self.cancelled = True
            self._cancelled_locked()
        owner._schedule()

    def _cancelled_locked(self) -> None:
        """Hook run by the first ``cancel``, with the owner's lock held."""

    def is_cancelled(self) -> bool:
        """Whether the member is over; the drain's check before each ``on_next``.

        An unlocked read of a flag that only goes ``False -> True``: a cancel from inside
        ``on_next`` is seen at once (same thread), one from another thread soon after.
        """
        return self.cancelled

    def take_locked(self, available: int) -> int:
        """Owner's drain, lock held: take up to ``available`` from the demand; return it.

        Unbounded demand (``MAX_DEMAND``) is not decremented (Rule 3.17).
        """
        count = min(available, self.demand)
        if count and self.demand != MAX_DEMAND:
            self.demand -= count
        return count
