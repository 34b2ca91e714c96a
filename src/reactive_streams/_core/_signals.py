"""Calling a subscriber safely: Rule 2.13 on the caller's side.

A subscriber method that raises breaks Rule 2.13. The caller must then treat the
subscription as cancelled and make the failure known, never swallow it. These helpers call
one signal, report a violation through the undeliverable hook as a ``ProtocolViolationError``
(rule ``"2.13"``, the original exception as ``__cause__``) and return whether the call
returned normally, so the caller can cancel.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

from ._exceptions import ProtocolViolationError
from ._hooks import report_undeliverable

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from ..api import Subscriber, Subscription

__all__ = [
    "accept_subscription",
    "cancel_quietly",
    "report_violation",
    "signal_each",
    "signal_on_complete",
    "signal_on_error",
    "signal_on_next",
    "signal_on_subscribe",
    "signal_terminal",
]

T = TypeVar("T")


def report_violation(subscriber: object, method: str, error: Exception) -> ProtocolViolationError:
    """Report that ``subscriber.<method>`` raised ``error`` (Rule 2.13); return the report."""
    violation = ProtocolViolationError(
        f"Rule 2.13: {type(subscriber).__qualname__}.{method} raised "
        f"{type(error).__name__}: {error}; its subscription is treated as cancelled",
        rule="2.13",
    )
    violation.__cause__ = error
    report_undeliverable(violation)
    return violation


def signal_on_subscribe(subscriber: Subscriber[T], subscription: Subscription) -> bool:
    """Call ``on_subscribe``; ``False`` (and a report) if it raised."""
    try:
        subscriber.on_subscribe(subscription)
    except Exception as exc:
        report_violation(subscriber, "on_subscribe", exc)
        return False
    return True


def signal_on_next(subscriber: Subscriber[T], element: T) -> bool:
    """Call ``on_next``; ``False`` (and a report) if it raised."""
    try:
        subscriber.on_next(element)
    except Exception as exc:
        report_violation(subscriber, "on_next", exc)
        return False
    return True


def signal_on_error(subscriber: Subscriber[T], error: Exception) -> None:
    """Call ``on_error``; a raise is reported (the stream is over either way)."""
    try:
        subscriber.on_error(error)
    except Exception as exc:
        report_violation(subscriber, "on_error", exc)


def signal_on_complete(subscriber: Subscriber[T]) -> None:
    """Call ``on_complete``; a raise is reported (the stream is over either way)."""
    try:
        subscriber.on_complete()
    except Exception as exc:
        report_violation(subscriber, "on_complete", exc)


def signal_terminal(subscriber: Subscriber[T], error: Exception | None) -> None:
    """The one terminal signal: ``on_complete`` when ``error`` is ``None``, else ``on_error``.

    A raise is reported (Rule 2.13) and the stream is over either way (Rule 1.7).
    """
    if error is None:
        signal_on_complete(subscriber)
    else:
        signal_on_error(subscriber, error)


def signal_each(
    subscriber: Subscriber[T], elements: Iterable[T], cancelled: Callable[[], bool]
) -> tuple[int, bool]:
    """Call ``on_next`` for each of ``elements`` in order, stopping at once on a cancel.

    ``cancelled()`` is asked before every ``on_next``, so a subscriber that cancels from
    inside ``on_next`` gets no further element (Rules 1.8, 3.12: the thread that signals
    is the one place that can honour the cancel at once).

    Returns:
        ``(sent, ok)``: how many ``on_next`` calls returned normally, and ``False`` when
        one raised. That breaks Rule 2.13: it is reported, the rest is not sent, and the
        caller must treat the subscription as cancelled.
    """
    sent = 0
    on_next = subscriber.on_next
    for element in elements:
        if cancelled():
            break
        try:
            on_next(element)
        except Exception as exc:
            report_violation(subscriber, "on_next", exc)
            return sent, False
        sent += 1
    return sent, True


def cancel_quietly(subscription: Subscription) -> None:
    """Call ``cancel``; a raise breaks Rule 3.15 and is reported, never propagated."""
    try:
        subscription.cancel()
    except Exception as exc:
        violation = ProtocolViolationError(
            f"Rule 3.15: {type(subscription).__qualname__}.cancel raised "
            f"{type(exc).__name__}: {exc}; the subscription is treated as cancelled",
            rule="3.15",
        )
        violation.__cause__ = exc
        report_undeliverable(violation)


def accept_subscription(
    subscription: Subscription | None,
    first: bool | Callable[[Subscription], bool],
) -> bool:
    """The ``on_subscribe`` prologue in one call: refuse ``None``, cancel a second one.

    Every subscriber starts ``on_subscribe`` the same way: ``None`` is refused (Rule 2.13),
    and a subscription that arrives when one is already held is cancelled (Rule 2.5).
    ``first`` says which this one is, in one of two forms:

    * a ``bool``, the caller's own answer (``self._upstream is None``), where nothing else
      can store a subscription concurrently; the caller stores it after this returns;
    * a callable ``claim(subscription) -> bool`` that stores the subscription under the
      caller's lock, with whatever else it sets up there, and returns whether it did;
      returning ``False`` refuses it (a second one, or one that arrives after the stage
      ended or was cancelled).

    A refused subscription is cancelled with ``cancel_quietly`` (a raise breaks Rule 3.15
    and is reported, never propagated), after ``claim`` returned, so outside the
    caller's lock.

    Args:
        subscription: what ``on_subscribe`` was given.
        first: whether it is the one to keep, or a ``claim`` that decides and stores it.

    Returns:
        ``True`` when the caller keeps ``subscription``; ``False`` when it was cancelled
        and ``on_subscribe`` should return.

    Raises:
        TypeError: ``subscription`` is ``None`` (Rule 2.13); nothing else happens.
    """
    if subscription is None:
        raise TypeError("Rule 2.13: on_subscribe(None)")
    if first if isinstance(first, bool) else first(subscription):
        return True
    cancel_quietly(subscription)  # Rule 2.5
    return False
