"""The four interfaces of Reactive Streams: Publisher, Subscriber, Subscription, Processor.

These abstract base classes are mostly documentation of the protocol: each method says
which rules bind the implementer and which bind the caller. Subclassing is the explicit
claim "this follows the specification"; a third-party class that has the same methods can
opt in without inheriting through ``Publisher.register(TheirClass)``.

The protocol, for every ``publisher.subscribe(subscriber)``::

    on_subscribe on_next* (on_error | on_complete)?

Elements flow out of a publisher (``T_co``, covariant) and into a subscriber
(``T_contra``, contravariant). ``None`` is never an element (Rule 2.13).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Generic, TypeVar

__all__ = ["Processor", "Publisher", "Subscriber", "Subscription"]

T_co = TypeVar("T_co", covariant=True)
T_contra = TypeVar("T_contra", contravariant=True)
R_co = TypeVar("R_co", covariant=True)


class Subscription(ABC):
    """The one-to-one link between a subscriber and the publisher it subscribed to.

    Only the subscriber that received it in ``on_subscribe`` may call its methods
    (Rule 3.1), and it must call them serially (Rule 2.7). Both methods must return
    normally whatever their argument (Rules 3.15, 3.16) and must be cheap (Rules 3.4, 3.5).
    """

    __slots__ = ()

    @abstractmethod
    def request(self, n: int) -> None:
        """Add ``n`` elements to the subscriber's outstanding demand (Rule 3.8).

        Args:
            n: how many more ``on_next`` signals the subscriber can take; a positive
                ``int``. Demand accumulates and is capped at ``MAX_DEMAND``, which means
                "unbounded" (Rule 3.17).

        Signals:
            ``on_error(ValueError)`` citing Rule 3.9 when ``n <= 0``, and
            ``on_error(TypeError)`` when ``n`` is not an ``int`` (``bool`` included).
            Nothing is ever raised to the caller (Rule 3.16). After cancellation the call
            is a no-op (Rule 3.6). The publisher may call ``on_next`` synchronously from
            inside this call (Rule 3.10), with recursion bounded (Rule 3.3).
        """

    @abstractmethod
    def cancel(self) -> None:
        """Ask the publisher to stop signalling and to drop its reference to the subscriber.

        Idempotent and thread-safe (Rules 3.5, 3.7); returns normally (Rule 3.15). Elements
        already under way may still arrive (Rules 2.8, 3.12); the reference is dropped
        eventually (Rule 3.13).
        """


class Subscriber(ABC, Generic[T_contra]):
    """Receives the signals of one subscription, in order and never overlapping (Rule 1.3).

    Every method must return normally (Rule 2.13): the only legal way for a subscriber to
    fail is to cancel its subscription. A caller that sees one of these methods raise treats
    the subscription as cancelled and reports the violation through the error hook
    (``reactive_streams.set_undeliverable_hook``).
    """

    __slots__ = ()

    @abstractmethod
    def on_subscribe(self, subscription: Subscription) -> None:
        """First signal of every subscription (Rule 1.9); called at most once (Rule 2.12).

        Raises:
            TypeError: if ``subscription`` is ``None`` (Rule 2.13).

        A subscriber that already has an active subscription must cancel the new one
        (Rule 2.5). It may call ``subscription.request`` from here (Rule 3.2).
        """

    @abstractmethod
    def on_next(self, element: T_contra) -> None:
        """One element; never more than the subscriber requested (Rule 1.1).

        Raises:
            TypeError: if ``element`` is ``None`` (Rule 2.13).
        """

    @abstractmethod
    def on_error(self, error: Exception) -> None:
        """Terminal signal: the stream failed with ``error`` (Rules 1.4, 2.10).

        The subscription is cancelled from now on (Rule 2.4) and must not be called from
        here (Rule 2.3).

        Raises:
            TypeError: if ``error`` is ``None`` (Rule 2.13).
        """

    @abstractmethod
    def on_complete(self) -> None:
        """Terminal signal: the stream ended normally (Rules 1.5, 2.9).

        The subscription is cancelled from now on (Rule 2.4) and must not be called from
        here (Rule 2.3).
        """


class Publisher(ABC, Generic[T_co]):
    """A source of a possibly unbounded sequence of elements, emitted only on demand."""

    __slots__ = ()

    @abstractmethod
    def subscribe(self, subscriber: Subscriber[T_co]) -> None:
        """Attach ``subscriber``; it receives ``on_subscribe`` before any other signal.

        Must return normally: a publisher that cannot serve the subscriber signals
        ``on_subscribe`` then ``on_error`` (Rule 1.9). Whether several subscribers are
        supported, and whether they share elements (multicast) or each get their own
        sequence (unicast), is the publisher's choice (Rule 1.11).

        Raises:
            TypeError: if ``subscriber`` is ``None`` (Rule 1.9).
        """


class Processor(Subscriber[T_contra], Publisher[R_co], Generic[T_contra, R_co]):
    """A processing stage: a subscriber upstream and a publisher downstream (Rule 4.1).

    It obeys both contracts. An ``on_error`` from upstream is either recovered (then the
    upstream subscription counts as cancelled) or passed downstream at once (Rule 4.2).
    """

    __slots__ = ()
