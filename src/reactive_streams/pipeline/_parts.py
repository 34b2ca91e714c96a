"""Part files that executors write and the driver reads: named by content, written whole."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

__all__ = ["write_part"]


def write_part(directory: str | Path, text: str, suffix: str) -> Path:
    """Write ``text`` to ``directory`` as a file named by a hash of it; return its path.

    Written whole (a temporary file renamed), so a reader never sees half a file, and
    named by its content, so a retried task or a replayed micro-batch that writes the
    same text writes the same file (once). The directory is created if missing.

    Raises:
        OSError: the directory or the file cannot be written.
    """
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    final = folder / f"{digest}{suffix}"
    if not final.exists():
        temporary = folder / f".{digest}.{os.getpid()}.tmp"
        temporary.write_text(text, encoding="utf-8")
        temporary.replace(final)
    return final
