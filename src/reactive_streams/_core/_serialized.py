"""``SerializedSubscription``: serial ``request``/``cancel`` from any thread (Rule 2.7).

A subscriber must make its calls on its subscription serially (Rule 2.7), yet a subscriber
is often asked to request from its ``on_next`` (one thread) and to cancel from a user's
thread at the same moment. Holding a lock across ``upstream.request(n)`` is not an option:
a synchronous publisher may call ``on_next`` from inside it (Rule 3.10), which would call
``request`` again and deadlock or recurse. This wrapper queues the calls instead (pending
demand summed with the cap of Rule 3.17, a pending cancel) and forwards them from a
``DrainLoop``: one caller at a time, others leave their call behind and return at once.
"""

from __future__ import annotations

import threading
from typing import Final

from ..api import Subscription
from ._demand import DrainLoop, add_demand
from ._exceptions import ProtocolViolationError
from ._hooks import report_undeliverable

__all__ = ["SerializedSubscription"]

_NO_ARGUMENT: Final = object()


class SerializedSubscription(Subscription):
    """Wraps an upstream subscription so that calls from any thread reach it serially.

    ``request(n)`` adds ``n`` to the pending demand; ``cancel()`` marks a pending cancel;
    either then forwards what is pending unless another thread is forwarding already, in
    which case that thread forwards it before it returns. A cancel wins over pending demand
    and drops the reference to the upstream subscription (Rule 3.13). An invalid ``n`` is
    forwarded unchanged so that the publisher signals the Rule 3.9 error itself.

    Args:
        upstream: the subscription received in ``on_subscribe``.

    Concurrency: thread-safe; calls may be re-entrant (a ``request`` that makes the publisher
    call ``on_next``, which calls ``request`` again, returns at once and the outer call
    forwards the new demand afterwards: recursion depth 1, Rule 3.3).
    """

    __slots__ = (
        "_cancel",
        "_forwarded_cancel",
        "_invalid",
        "_lock",
        "_loop",
        "_pending",
        "_upstream",
    )

    def __init__(self, upstream: Subscription) -> None:
        self._upstream: Subscription | None = upstream
        self._lock = threading.Lock()
        self._pending = 0
        self._invalid: object = _NO_ARGUMENT
        self._cancel = False
        self._forwarded_cancel = False
        self._loop = DrainLoop(self._forward)

    def request(self, n: int) -> None:
        """Queue ``n`` more elements of demand and forward it (Rules 2.7, 3.8, 3.16)."""
        with self._lock:
            if self._cancel:
                return
            if type(n) is int and n > 0:
                self._pending = add_demand(self._pending, n)
            elif self._invalid is _NO_ARGUMENT:
                self._invalid = n
        self._loop.schedule()

    def cancel(self) -> None:
        """Queue a cancel and forward it; idempotent and thread-safe (Rules 3.5, 3.7)."""
        with self._lock:
            if self._cancel:
                return
            self._cancel = True
        self._loop.schedule()

    @property
    def cancelled(self) -> bool:
        """Whether ``cancel`` was called."""
        return self._cancel

    def _forward(self) -> None:
        with self._lock:
            if self._forwarded_cancel:
                return
            upstream = self._upstream
            cancel = self._cancel
            invalid, self._invalid = self._invalid, _NO_ARGUMENT
            pending, self._pending = self._pending, 0
            if cancel:
                self._forwarded_cancel = True
                self._upstream = None
        if upstream is None:
            return
        try:
            if cancel:
                upstream.cancel()
                return
            if invalid is not _NO_ARGUMENT:
                upstream.request(invalid)  # type: ignore[arg-type]
            if pending:
                upstream.request(pending)
        except Exception as exc:  # the upstream broke Rule 3.15 or 3.16: make it known
            rule = "3.15" if cancel else "3.16"
            method = "cancel" if cancel else "request"
            violation = ProtocolViolationError(
                f"Rule {rule}: {type(upstream).__qualname__}.{method} raised {exc!r}", rule=rule
            )
            violation.__cause__ = exc
            report_undeliverable(violation)
