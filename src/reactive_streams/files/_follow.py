"""Following an input: files that land later are appended to live ``FilePartitions``."""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from ._splits import plan_splits

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence
    from pathlib import Path

    from ._formats import InputFile
    from ._partitions import FilePartitions
    from ._splits import FileSplit

__all__ = ["FileFollower"]

logger = logging.getLogger("reactive_streams.files")


class FileFollower:
    """Polls for files that land later and appends them to live ``FilePartitions``.

    Every ``interval`` seconds (on a daemon thread, between ``start`` and ``stop``) it
    lists the input (``list_inputs``, for example ``list_files(directory, ...)``) and takes
    each file it has not taken yet once the file's size held still for one whole interval
    (a file being copied in is not read half-written; writing it elsewhere and renaming it
    into the directory is better still). Taken files are planned (``plan_splits``: records
    counted) and appended in listing order with ``FilePartitions.extend``. Files already
    there when it starts are the ones in ``known``. A file that disappears or fails to
    plan is logged and left out; it is tried again only if its size changes.

    Args:
        partitions: the live partitions to extend.
        list_inputs: returns the input's files now, in reading order.
        interval: seconds between looks, ``> 0``.
        known: paths already planned into ``partitions``.

    Raises:
        ValueError: ``partitions`` is not live, or ``interval`` is not positive.
    """

    def __init__(
        self,
        partitions: FilePartitions,
        list_inputs: Callable[[], Sequence[InputFile]],
        *,
        interval: float = 1.0,
        known: Iterable[Path] = (),
    ) -> None:
        if not partitions.live:
            raise ValueError("FileFollower needs FilePartitions made with live=True")
        if not interval > 0:
            raise ValueError(f"interval must be > 0 seconds, got {interval!r}")
        self._partitions = partitions
        self._list = list_inputs
        self._interval = float(interval)
        self._lock = threading.Lock()
        self._taken: set[Path] = set(known)
        self._sizes: dict[Path, int] = {}  # candidates: the size seen at the last look
        self._refused: dict[Path, int] = {}  # failed to plan, at this size
        self._files = 0
        self._records = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def files(self) -> int:
        """Files appended so far."""
        with self._lock:
            return self._files

    @property
    def records(self) -> int:
        """Records appended so far."""
        with self._lock:
            return self._records

    def start(self) -> FileFollower:
        """Start polling on a daemon thread; returns ``self``."""
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="reactive-streams-follow", daemon=True
                )
                self._thread.start()
        return self

    def stop(self, *, finish: bool = False, timeout: float = 10.0) -> None:
        """Stop polling (waiting at most ``timeout`` seconds for a look in progress).

        With ``finish``, the partitions are finished too: readers complete at their end.
        """
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
        if finish:
            self._partitions.finish()

    def poll(self) -> int:
        """Look once now; return the records appended by this look."""
        try:
            listed = list(self._list())
        except OSError as exc:
            logger.warning("following the input: cannot list it: %s", exc)
            return 0
        ready: list[tuple[InputFile, int]] = []
        with self._lock:
            seen: dict[Path, int] = {}
            for item in listed:
                path = item.path
                if path in self._taken:
                    continue
                try:
                    size = path.stat().st_size
                except OSError:
                    continue  # gone between the listing and now
                if size == 0 or self._refused.get(path) == size:
                    continue
                if self._sizes.get(path) == size:
                    ready.append((item, size))
                else:
                    seen[path] = size
            self._sizes = seen
        splits: list[FileSplit] = []
        taken: list[InputFile] = []
        for item, size in ready:
            try:
                splits.extend(plan_splits([item]))
            except Exception as exc:  # one bad file must not stop the others
                logger.warning("following the input: %s is left out: %s", item.path, exc)
                with self._lock:
                    self._refused[item.path] = size
            else:
                taken.append(item)
        added = self._partitions.extend(splits) if splits else 0
        with self._lock:
            self._taken.update(item.path for item in taken)
            self._files += len(taken)
            self._records += added
        if taken:
            logger.info("following the input: %d file(s), %d records appended", len(taken), added)
        return added

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self.poll()
            except Exception as exc:  # never let the thread die silently
                logger.warning("following the input: a look failed: %s", exc)
