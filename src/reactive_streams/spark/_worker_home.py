"""A ``SPARK_HOME`` for pip-installed PySpark whose Python workers start fast.

Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` first on the ``PYTHONPATH`` of every
Python process it starts (data source planners, the streaming source runner, UDF workers).
In the pip package that zip holds only ``.py`` sources, and Python cannot cache bytecode
for zip imports, so each of those processes compiles PySpark again, several times the
cost of importing it from the installed package (``benchmarks/README.md`` has the
figures). A streaming query with a Python data source starts five such processes before
its first micro-batch.

``fast_worker_home`` builds (once, in the user's cache directory) a ``SPARK_HOME`` made of
symbolic links to the installed package, with ``python/lib`` holding every entry but
``pyspark.zip``. Workers then import the very same PySpark from the interpreter's
site-packages, with its bytecode cache. Nothing is copied or changed in the installation.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import tempfile
from pathlib import Path

__all__ = ["fast_worker_home"]

logger = logging.getLogger("reactive_streams.spark")


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "reactive-streams"


def fast_worker_home() -> str | None:
    """The fast ``SPARK_HOME`` for the installed PySpark, or ``None`` where it does not apply.

    ``None`` when ``SPARK_HOME`` is already set (the user's choice wins), on a platform
    without symbolic links, for a Spark distribution that is not the pip package, or when
    no cache directory is writable.
    """
    if os.name != "posix" or os.environ.get("SPARK_HOME"):
        return None
    import pyspark  # noqa: PLC0415

    home = Path(pyspark.__file__).resolve().parent
    lib = home / "python" / "lib"
    if not (lib / "pyspark.zip").is_file() or not (home / "bin" / "spark-submit").is_file():
        return None
    key = hashlib.sha256(f"{home}|{pyspark.__version__}".encode()).hexdigest()[:12]
    target = _cache_dir() / f"spark-home-{pyspark.__version__}-{key}"
    if (target / "bin" / "spark-submit").exists():
        return str(target)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".spark-home-", dir=target.parent))
        for entry in home.iterdir():
            if entry.name != "python":
                (staging / entry.name).symlink_to(entry)
        (staging / "python" / "lib").mkdir(parents=True)
        for entry in (home / "python").iterdir():
            if entry.name != "lib":
                (staging / "python" / entry.name).symlink_to(entry)
        for entry in lib.iterdir():
            if entry.name != "pyspark.zip":
                (staging / "python" / "lib" / entry.name).symlink_to(entry)
        try:
            staging.rename(target)
        except OSError:  # another process made it first
            shutil.rmtree(staging, ignore_errors=True)
    except OSError as exc:
        logger.debug("no fast SPARK_HOME for Python workers: %s", exc)
        return None
    return str(target) if (target / "bin" / "spark-submit").exists() else None
