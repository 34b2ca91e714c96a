"""Reconnecting: a client's connection dialled again with a ``Backoff`` when it drops.

``connect(url, reconnect=Backoff(...))`` gives the client a ``Redialer``. It owns the
current connection; when that connection ends (the server went away, the network
dropped, keepalives stopped), it dials again on the client's loop, each attempt after the
policy's delay, within its bound. Meanwhile new requests wait (the publishers they return
subscribe once a connection is up); streams that were open on the lost connection have
already failed with ``RSocketConnectionError``, and their callers resume from their
offsets. When the bound passes, the redialer gives up with one error naming the URL and
the attempts, and every waiting and later request fails with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from .._core import Backoff, check_subscriber, signal_error_only
from ..api import Publisher, Subscriber
from ._errors import RSocketConnectionError
from ._frames import ErrorCode

if TYPE_CHECKING:
    from collections.abc import Awaitable
    from concurrent.futures import Executor

    from ._client_connection import ClientConnection
    from ._connection import Connection

__all__ = [
    "ConnectionCallback",
    "RedialingPublisher",
    "Redialer",
    "bound_seconds",
    "check_bounded",
    "dial_with_backoff",
]

T = TypeVar("T")

ConnectionCallback = Callable[["ClientConnection | None", "RSocketConnectionError | None"], None]
"""Told the connection to use, or the error that ends the wait."""


def _reason(error: BaseException) -> str:
    text = str(error) or type(error).__name__
    cause = error.__cause__
    if isinstance(cause, OSError | TimeoutError) and str(cause):
        text = str(cause)
    return text


def check_bounded(backoff: object) -> Backoff:
    """``backoff`` if it is a ``Backoff`` with a bound (attempts or a deadline).

    Raises:
        TypeError: not a ``Backoff``.
        ValueError: neither ``max_attempts`` nor ``deadline``: waiting requests could
            wait for ever.
    """
    if not isinstance(backoff, Backoff):
        raise TypeError(f"reconnect must be a Backoff, got {type(backoff).__qualname__}")
    if backoff.max_attempts is None and backoff.deadline is None:
        raise ValueError(
            "reconnect needs a bounded Backoff (max_attempts or deadline): requests wait "
            "for the reconnection"
        )
    return backoff


def bound_seconds(backoff: Backoff, timeout: float) -> float:
    """An upper bound of the seconds a series of dials takes, each up to ``timeout``.

    For a caller's own wait around ``dial_with_backoff``.
    """
    bounds = []
    if backoff.deadline is not None:
        bounds.append(backoff.deadline + timeout)
    if backoff.max_attempts is not None:
        waits = sum(backoff.bounds(attempt)[1] for attempt in range(backoff.max_attempts))
        bounds.append(waits + (backoff.max_attempts + 1) * timeout)
    return min(bounds) + 1.0


async def dial_with_backoff(
    url: str,
    dial: Callable[[], Awaitable[ClientConnection]],
    backoff: Backoff,
    *,
    attempt: int = 0,
    started: float | None = None,
    first_delay: bool,
    last_error: BaseException | None = None,
) -> tuple[ClientConnection, int]:
    """Dial until a connection is up, within ``backoff``'s bound; on the client's loop.

    Args:
        url: for the error message.
        dial: one connection attempt (it applies its own timeout).
        backoff: the policy.
        attempt: retries already made in this series.
        started: the series' first failure (loop time); now by default.
        first_delay: wait ``backoff.delay(attempt)`` before the first dial (a drop); else
            dial at once (the first connection).
        last_error: the failure that started the series, for the message.

    Returns:
        The connection, and the attempts made in the series so far.

    Raises:
        RSocketConnectionError: the bound passed; the message names ``url``, the
            attempts, the time spent and the last failure.
    """
    loop = asyncio.get_running_loop()
    start = loop.time() if started is None else started
    dials = 0
    wait = first_delay
    while True:
        if wait:
            delay = backoff.delay(attempt)
            if not backoff.allows(attempt, loop.time() - start, delay):
                reason = "" if last_error is None else f"; the last failure: {_reason(last_error)}"
                verb = "reconnect" if first_delay else "connect"
                raise RSocketConnectionError(
                    f"could not {verb} to {url}: gave up after {dials} attempts in "
                    f"{loop.time() - start:.1f} s (bound: {backoff.describe()}){reason}"
                )
            await asyncio.sleep(delay)
            attempt += 1
        wait = True
        dials += 1
        try:
            return await dial(), attempt
        except (OSError, TimeoutError, RSocketConnectionError) as exc:
            last_error = exc


class Redialer:
    """The current connection of a reconnecting client, and the redialling when it drops.

    States: ``connected`` (requests go to the connection), ``redialing`` (requests wait),
    ``failed`` (the bound passed; requests fail with ``error``), ``closed`` (the client
    was closed). Every change of state happens under one lock; the dialling runs on the
    client's loop; waiting requests are resumed on the client's executor, never on the
    loop.
    """

    __slots__ = (
        "_attempt",
        "_backoff",
        "_connection",
        "_dial",
        "_error",
        "_executor",
        "_lock",
        "_loop",
        "_reconnects",
        "_started",
        "_state",
        "_task",
        "_url",
        "_waiting",
    )

    def __init__(
        self,
        url: str,
        *,
        backoff: Backoff,
        loop: asyncio.AbstractEventLoop,
        dial: Callable[[], Awaitable[ClientConnection]],
        executor: Executor,
        connection: ClientConnection,
    ) -> None:
        self._url = url
        self._backoff = backoff
        self._loop = loop
        self._dial = dial
        self._executor = executor
        self._lock = threading.Lock()
        self._state = "connected"
        self._connection = connection
        self._error: RSocketConnectionError | None = None
        self._waiting: list[ConnectionCallback] = []
        self._task: asyncio.Task[None] | None = None
        self._reconnects = 0
        self._attempt = 0  # retries in the current series (kept across drops without reset)
        self._started: float | None = None  # the series' first failure, loop time
        self._watch(connection)

    # -- what the client asks -------------------------------------------------------------

    @property
    def connection(self) -> ClientConnection:
        """The current (or last) connection."""
        with self._lock:
            return self._connection

    @property
    def closed(self) -> bool:
        """Whether the client is closed or gave up reconnecting."""
        with self._lock:
            return self._state in ("failed", "closed")

    @property
    def error(self) -> RSocketConnectionError | None:
        """The error the redialer gave up with, if it did."""
        with self._lock:
            return self._error

    @property
    def reconnects(self) -> int:
        """Connections made again after a drop."""
        with self._lock:
            return self._reconnects

    def when_connected(self, callback: ConnectionCallback) -> None:
        """Call ``callback(connection, None)`` once connected, or ``(None, error)``.

        At once, on this thread, if the connection is up (or the client is over);
        otherwise on the client's executor once the redialling succeeds or gives up.
        """
        dropped: ClientConnection | None = None
        with self._lock:
            state = self._state
            connection = self._connection
            if state == "connected" and connection.is_closed:
                dropped = connection  # closed, and its on_closed has not run yet
            elif state == "redialing":
                self._waiting.append(callback)
                return
        if dropped is not None:
            self._dropped(dropped, dropped.error)
            self.when_connected(callback)
            return
        if state == "connected":
            callback(connection, None)
        else:
            callback(None, self._error or RSocketConnectionError("the client is closed"))

    def close(self) -> list[ConnectionCallback]:
        """Stop for good; return the waiting callbacks (the client fails them)."""
        with self._lock:
            if self._state != "failed":
                self._state = "closed"
            waiting, self._waiting = self._waiting, []
            task, self._task = self._task, None
        if task is not None:
            with contextlib.suppress(RuntimeError):  # the loop is closed already
                self._loop.call_soon_threadsafe(task.cancel)
        return waiting

    # -- the connection's end, and the redialling -----------------------------------------

    def _watch(self, connection: ClientConnection) -> None:
        connection.on_closed = self._on_closed
        if connection.is_closed:  # it ended before it was watched
            self._dropped(connection, connection.error)

    def _on_closed(self, connection: Connection, error: RSocketConnectionError) -> None:
        self._dropped(connection, error)

    def _dropped(self, connection: Connection, error: RSocketConnectionError | None) -> None:
        with self._lock:
            if connection is not self._connection or self._state != "connected":
                return
            waiting = []
            if error is not None and error.code == ErrorCode.REJECTED_SETUP:
                self._state = "failed"  # a refusal is not a network failure: no retry
                self._error = RSocketConnectionError(
                    f"{self._url} refused the connection (a wrong or missing token?): {error}",
                    code=error.code,
                )
                waiting, self._waiting = self._waiting, []
            else:
                self._state = "redialing"
                if self._backoff.reset_on_success or self._started is None:
                    self._attempt = 0
                    self._started = None
            redial = self._state == "redialing"
        if waiting:
            self._resume(waiting, None)
            return
        if redial:
            with contextlib.suppress(RuntimeError):  # the loop is closed: the client too
                self._loop.call_soon_threadsafe(self._start_redial, error)

    def _start_redial(self, error: RSocketConnectionError | None) -> None:
        with self._lock:
            if self._state != "redialing" or self._task is not None:
                return
            self._task = self._loop.create_task(self._redial(error))

    async def _redial(self, error: RSocketConnectionError | None) -> None:
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._started is None:
                self._started = loop.time()
            attempt, started = self._attempt, self._started
        try:
            connection, attempt = await dial_with_backoff(
                self._url,
                self._dial,
                self._backoff,
                attempt=attempt,
                started=started,
                first_delay=True,
                last_error=error,
            )
        except RSocketConnectionError as exc:
            with self._lock:
                self._task = None
                if self._state != "redialing":
                    return
                self._state = "failed"
                self._error = exc
                waiting, self._waiting = self._waiting, []
            self._resume(waiting, None)
            return
        with self._lock:
            self._task = None
            if self._state != "redialing":  # closed meanwhile
                stale: ClientConnection | None = connection
            else:
                stale = None
                self._state = "connected"
                self._connection = connection
                self._reconnects += 1
                self._attempt = attempt
                waiting, self._waiting = self._waiting, []
        if stale is not None:
            stale.close(RSocketConnectionError("the client closed the connection"))
            return
        self._watch(connection)
        self._resume(waiting, connection)

    def _resume(
        self,
        waiting: list[ConnectionCallback],
        connection: ClientConnection | None,
    ) -> None:
        error = None if connection is not None else self.error
        for callback in waiting:
            try:
                self._executor.submit(callback, connection, error)
            except RuntimeError:  # the executor is shut down: the client closed
                callback(None, error or RSocketConnectionError("the client is closed"))


class RedialingPublisher(Publisher[T]):
    """A request on a reconnecting client: subscribes on the connection up at the time.

    ``subscribe`` builds the request's publisher on the current connection with
    ``factory``; during a reconnection the subscription waits (within the client's
    bound) and is made on the new connection, on the client's executor. When the client
    gave up or was closed, the subscriber gets ``on_subscribe`` then ``on_error`` with
    the reason (Rule 1.9).
    """

    __slots__ = ("_factory", "_redialer")

    def __init__(
        self, redialer: Redialer, factory: Callable[[ClientConnection], Publisher[Any]]
    ) -> None:
        self._redialer = redialer
        self._factory = factory

    def subscribe(self, subscriber: Subscriber[T]) -> None:
        """Subscribe on the current connection, or once there is one (Rule 1.9)."""
        check_subscriber(subscriber)
        factory = self._factory

        def connected(
            connection: ClientConnection | None, error: RSocketConnectionError | None
        ) -> None:
            if connection is None:
                signal_error_only(
                    subscriber, error or RSocketConnectionError("the client is closed")
                )
                return
            factory(connection).subscribe(subscriber)

        self._redialer.when_connected(connected)
