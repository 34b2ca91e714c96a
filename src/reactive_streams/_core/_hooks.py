"""The one replaceable hook for errors that cannot be delivered to any subscriber.

Such errors arise when a subscriber breaks Rule 2.13 (one of its methods raised), when a
stream fails after its subscriber cancelled, or when cleanup fails. They must never vanish:
by default they are logged on the ``reactive_streams`` logger at ERROR level with their
traceback. Applications that want them elsewhere (a metrics counter, a test that fails)
install their own hook.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

__all__ = ["UndeliverableHook", "report_undeliverable", "set_undeliverable_hook"]

logger = logging.getLogger("reactive_streams")

UndeliverableHook = Callable[[BaseException], None]
"""A callable that receives each undeliverable error; it must not raise."""


def _log_undeliverable(error: BaseException) -> None:
    logger.error("undeliverable error: %s", error, exc_info=error)


_lock = threading.Lock()
_hook: UndeliverableHook = _log_undeliverable


def set_undeliverable_hook(hook: UndeliverableHook | None) -> UndeliverableHook:
    """Install ``hook`` for undeliverable errors; ``None`` restores the default logger.

    Args:
        hook: called with each error that no subscriber can receive, on the thread where
            the error happened. It should be quick and must not raise; if it does, its
            exception is logged and dropped.

    Returns:
        The hook that was installed before, so tests can restore it.
    """
    global _hook
    with _lock:
        previous = _hook
        _hook = _log_undeliverable if hook is None else hook
    return previous


def report_undeliverable(error: BaseException) -> None:
    """Pass ``error`` to the installed hook. Never raises."""
    hook = _hook
    try:
        hook(error)
    except Exception:  # the hook itself failed: fall back to the logger, never lose it
        logger.exception("the undeliverable-error hook raised while handling %r", error)
        _log_undeliverable(error)
