"""Finding input files: paths and directories to ``InputFile`` objects, in reading order."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ._formats import DEFAULT_ENCODING, FORMATS, Format, InputFile

if TYPE_CHECKING:
    import os
    from collections.abc import Sequence

    from ._records import CsvDialect

__all__ = ["list_files"]


def list_files(
    paths: Sequence[str | os.PathLike[str]] | str | os.PathLike[str],
    *,
    format: Format | None = None,
    encoding: str = DEFAULT_ENCODING,
    dialect: CsvDialect | None = None,
) -> list[InputFile]:
    """The files of ``paths``, in reading order.

    A directory is searched recursively for files whose extension is one of ``FORMATS``,
    in sorted order, skipping names that start with ``.`` or ``_`` (as Spark does).

    Args:
        paths: files or directories.
        format: every file's format; by default each file's extension says.
        encoding: the text encoding of CSV and JSON Lines files.
        dialect: the CSV dialect; by default each file's extension says (``.tsv``: tabs).

    Raises:
        FileNotFoundError: a path does not exist, or a directory has no data file.
        ValueError: a file's format cannot be told from its extension.
    """
    entries: Sequence[str | os.PathLike[str]] = (
        [paths] if isinstance(paths, str) or hasattr(paths, "__fspath__") else paths
    )
    files: list[InputFile] = []
    for entry in entries:
        path = Path(entry)
        if not path.exists():
            raise FileNotFoundError(f"input not found: {path}")
        if path.is_dir():
            found = sorted(
                child
                for child in path.rglob("*")
                if child.is_file()
                and (format is not None or child.suffix.lower() in FORMATS)
                and not any(part.startswith((".", "_")) for part in child.relative_to(path).parts)
            )
            if not found:
                raise FileNotFoundError(
                    f"no CSV, JSON Lines or Parquet files in directory {path} "
                    f"(looked for {', '.join(sorted(FORMATS))})"
                )
            files.extend(
                InputFile.of(child, format=format, encoding=encoding, dialect=dialect)
                for child in found
            )
            continue
        if format is None and path.suffix.lower() not in FORMATS:
            raise ValueError(
                f"unsupported input format: {path} "
                f"(expected a file ending in {', '.join(sorted(FORMATS))})"
            )
        files.append(InputFile.of(path, format=format, encoding=encoding, dialect=dialect))
    return files
