"""Files known by identity: device, inode, size and modification time, checked on the descriptor.

A path names a file only until someone renames, replaces or links over it. So the readers
never trust a path twice: a file is opened once (``open_file``), without following a
symbolic link unless the listing accepted that link, and what the *opened descriptor*
is (``os.fstat``) is what was planned, or the file is refused. ``FileIdentity`` is what
recognises a file wherever it is moved to; the status-change time (``ctime``) is checked
as well when a planned file is opened again, because ``cp -p`` over a file keeps its
inode, size and mtime and only the ctime shows that its bytes were rewritten.

``writers_of`` tells which of some files another process holds open for writing (Linux:
``/proc/*/fd``), so a follower does not take a file still being written.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Iterable
    from pathlib import Path

__all__ = [
    "TEMPORARY_SUFFIXES",
    "FileChangedError",
    "FileIdentity",
    "check_status",
    "open_file",
    "writers_of",
]

TEMPORARY_SUFFIXES: Final = (".tmp", ".part", ".crdownload")
"""Names ending in these are files still being written: a directory listing skips them."""


class FileChangedError(ValueError):
    """A file changed after it was planned (it is read as planned, or not at all)."""


@dataclass(frozen=True, slots=True)
class FileIdentity:
    """Which file a path named when it was looked at: the same file keeps it when moved.

    Attributes:
        device: the file system's device number (``st_dev``).
        inode: the file's inode number on it (``st_ino``).
        size: its size in bytes.
        mtime_ns: its modification time, in nanoseconds.
    """

    device: int
    inode: int
    size: int
    mtime_ns: int

    @classmethod
    def of(cls, status: os.stat_result) -> FileIdentity:
        """The identity a ``stat`` (or ``fstat``) result gives."""
        return cls(status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns)

    @property
    def key(self) -> tuple[int, int]:
        """``(device, inode)``: the file, whatever its size and times."""
        return self.device, self.inode


def _refuse_kind(path: Path, status: os.stat_result) -> None:
    if not stat.S_ISREG(status.st_mode):
        raise FileChangedError(f"input file {path} is not a regular file now: refused")


def open_file(path: Path, *, follow_symlink: bool) -> tuple[int, os.stat_result]:
    """Open ``path`` for reading: a descriptor and its ``fstat``.

    Without ``follow_symlink`` the path is opened with ``O_NOFOLLOW``: a symbolic link put
    in its place is refused, never read through. Only a regular file is opened (a FIFO
    planted in its place would block a reader forever).

    Raises:
        FileNotFoundError: nothing is there.
        FileChangedError: a symbolic link (without ``follow_symlink``), or not a regular file.
        OSError: it cannot be opened.
    """
    flags = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)
    if not follow_symlink:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EMLINK) and not follow_symlink:
            raise FileChangedError(
                f"input file {path} is a symbolic link now: refused (a link put in a "
                "listed file's place is never read through)"
            ) from None
        raise
    try:
        status = os.fstat(fd)
        _refuse_kind(path, status)
    except BaseException:
        os.close(fd)
        raise
    return fd, status


def check_status(
    path: Path,
    status: os.stat_result,
    planned: FileIdentity,
    ctime_ns: int | None,
) -> None:
    """Raise a one-line error naming ``path`` unless ``status`` is the file planned.

    Args:
        path: how the error names the file.
        status: the opened descriptor's ``fstat`` (or a ``stat`` of the path).
        planned: the identity the planner saw.
        ctime_ns: the status-change time the planner saw; ``None``: not checked.

    Raises:
        FileChangedError: another file, or the same one with other bytes.
    """
    _refuse_kind(path, status)
    found = FileIdentity.of(status)
    if found.key != planned.key:
        raise FileChangedError(
            f"input file {path} changed after it was planned (another file is there now: "
            f"inode {planned.inode} -> {found.inode}): files are read as planned; plan "
            "them again to read the new version"
        )
    if found.size != planned.size or found.mtime_ns != planned.mtime_ns:
        raise FileChangedError(
            f"input file {path} changed after it was planned ({planned.size:,} -> "
            f"{found.size:,} bytes): files are read as planned; plan them again to read "
            "the new version"
        )
    if ctime_ns is not None and status.st_ctime_ns != ctime_ns:
        raise FileChangedError(
            f"input file {path} changed after it was planned (rewritten in place with the "
            "same size and modification time): files are read as planned; plan them "
            "again to read the new version"
        )


_PROC: Final = "/proc"


def writers_of(keys: Iterable[tuple[int, int]]) -> set[tuple[int, int]]:
    """Which of the files ``keys`` (``FileIdentity.key``) some process has open for writing.

    Linux: every descriptor under ``/proc/*/fd`` this process may inspect (its own
    user's processes; every process with root or ``CAP_SYS_PTRACE``) is looked at, and
    ``/proc/PID/fdinfo`` tells whether it was opened for writing. Elsewhere, and for
    writers it cannot inspect, nothing is found (an empty set).
    """
    wanted = set(keys)
    found: set[tuple[int, int]] = set()
    if not wanted:
        return found
    try:
        pids = [name for name in os.listdir(_PROC) if name.isdigit()]
    except OSError:
        return found
    for pid in pids:
        base = f"{_PROC}/{pid}"
        try:
            descriptors = os.listdir(f"{base}/fd")
        except OSError:
            continue  # gone, or not ours to inspect
        for fd in descriptors:
            try:
                status = os.stat(f"{base}/fd/{fd}")
            except OSError:
                continue
            key = (status.st_dev, status.st_ino)
            if key not in wanted or key in found:
                continue
            if _writing(f"{base}/fdinfo/{fd}"):
                found.add(key)
        if found == wanted:
            break
    return found


def _writing(fdinfo: str) -> bool:
    """Whether the descriptor ``fdinfo`` describes was opened for writing."""
    try:
        with open(fdinfo, encoding="ascii") as handle:
            for line in handle:
                if line.startswith("flags:"):
                    mode = int(line.split()[1], 8) & os.O_ACCMODE
                    return mode in (os.O_WRONLY, os.O_RDWR)
    except (OSError, ValueError, IndexError):
        return False
    return False
