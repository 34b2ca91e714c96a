"""Following an input: files that land later are appended to live ``FilePartitions``."""

from __future__ import annotations

import logging
import os
import stat
import threading
from typing import TYPE_CHECKING

from ._identity import FileIdentity, writers_of
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
    lists the input (``list_inputs``, for example ``list_files(directory, ...)``, which
    skips names starting with ``.`` or ``_`` and temporary names such as ``x.csv.part``)
    and takes each file it does not know yet once

    * its identity (device, inode, size and modification time) held still for one whole
      interval, and
    * no process has it open for writing (Linux: ``/proc/*/fd``, for the processes this
      one may inspect; elsewhere the first rule alone),

    so a writer that pauses delays only its own file. Writing a file elsewhere (or under
    a temporary name) and renaming it into the directory is best. Taken files are planned
    (``plan_splits``: records counted) and appended in listing order with
    ``FilePartitions.extend``.

    Files are known by identity, not by name (``FileIdentity``): a file that is moved,
    anywhere under the input, is the file already taken (never read twice), and the
    partitions read it where it is now (``FilePartitions.relocate``); one that is deleted
    or moved away is forgotten (``FilePartitions.forget``; moved back later, it is a new
    file). A known file whose size or modification time changed where it was taken is
    left out and logged once (append to a new file instead); under another name, its
    inode is taken to be reused by a new file, which is taken. A file that fails to plan
    is logged and left out until it changes. Files already in ``partitions`` are known
    from the start.

    Args:
        partitions: the live partitions to extend.
        list_inputs: returns the input's files now, in reading order.
        interval: seconds between looks, ``> 0``.
        known: paths of files taken already besides those planned into ``partitions``.

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
        # Taken files by (device, inode): their identity when taken, and where they are.
        self._taken: dict[tuple[int, int], tuple[FileIdentity, Path]] = {
            identity.key: (identity, path) for identity, path in partitions.files().items()
        }
        for path in known:
            try:
                identity = FileIdentity.of(path.stat())
            except OSError:
                continue
            self._taken.setdefault(identity.key, (identity, path))
        self._changed: set[tuple[int, int]] = set()  # taken, then changed: logged once
        self._seen: dict[Path, FileIdentity] = {}  # candidates: identity at the last look
        self._refused: dict[Path, FileIdentity] = {}  # failed to plan, as it was then
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
        ready = self._look(listed)
        if ready:
            busy = writers_of(identity.key for _, identity in ready)
            if busy:
                with self._lock:
                    for item, identity in ready:
                        if identity.key in busy:  # still open for writing: not yet
                            self._seen[item.path] = identity
                ready = [(item, identity) for item, identity in ready if identity.key not in busy]
        return self._take(ready)

    def _look(self, listed: Sequence[InputFile]) -> list[tuple[InputFile, FileIdentity]]:
        """Sort the listing: files taken (moved?), changed, candidates, and ready ones."""
        ready: list[tuple[InputFile, FileIdentity]] = []
        moved: list[tuple[FileIdentity, Path, int]] = []
        forgotten: list[FileIdentity] = []
        with self._lock:
            seen: dict[Path, FileIdentity] = {}
            present: set[tuple[int, int]] = set()
            for item in listed:
                path = item.path
                try:
                    status = os.stat(path) if item.follow_symlink else os.lstat(path)
                except OSError:
                    continue  # gone between the listing and now
                if not stat.S_ISREG(status.st_mode):
                    continue
                identity = FileIdentity.of(status)
                key = identity.key
                present.add(key)
                taken = self._taken.get(key)
                if taken is not None:
                    was, where = taken
                    if was == identity:
                        if where != path:
                            self._taken[key] = (was, path)
                            moved.append((was, path, status.st_ctime_ns))
                        continue
                    if where == path:
                        if key not in self._changed:
                            self._changed.add(key)
                            logger.warning(
                                "following the input: %s changed after it was taken (%s -> %s "
                                "bytes): left out; write new records to a new file",
                                path,
                                f"{was.size:,}",
                                f"{identity.size:,}",
                            )
                        continue
                    # Its inode under another name, with other contents: the file taken
                    # was deleted and the inode reused for a new one.
                    del self._taken[key]
                    forgotten.append(was)
                if identity.size == 0 or self._refused.get(path) == identity:
                    continue
                if self._seen.get(path) == identity:
                    ready.append((item, identity))
                else:
                    seen[path] = identity
            self._seen = seen
            gone = [self._taken.pop(key)[0] for key in list(self._taken) if key not in present]
            gone += forgotten
            self._changed &= present
        for identity, path, ctime_ns in moved:
            logger.info("following the input: a file taken already was moved to %s", path)
            self._partitions.relocate(identity, path, ctime_ns)
        for identity in gone:
            self._partitions.forget(identity)
        if gone:
            logger.info("following the input: %d file(s) gone (deleted or moved away)", len(gone))
        return ready

    def _take(self, ready: Sequence[tuple[InputFile, FileIdentity]]) -> int:
        """Plan the ready files and append them; return the records appended."""
        splits: list[FileSplit] = []
        taken: list[tuple[InputFile, FileIdentity]] = []
        for item, identity in ready:
            try:
                planned = plan_splits([item])
                if planned and planned[0].identity != identity:
                    with self._lock:  # changed since the look: a candidate again
                        self._seen[item.path] = planned[0].identity
                    continue
            except Exception as exc:  # one bad file must not stop the others
                logger.warning("following the input: %s is left out: %s", item.path, exc)
                with self._lock:
                    self._refused[item.path] = identity
            else:
                splits.extend(planned)
                taken.append((item, identity))
        added = self._partitions.extend(splits) if splits else 0
        with self._lock:
            for item, identity in taken:
                self._taken[identity.key] = (identity, item.path)
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
