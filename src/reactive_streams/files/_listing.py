"""Finding input files: paths and directories to ``InputFile`` objects, in reading order."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING

from ._formats import COMPRESSIONS, DEFAULT_ENCODING, FORMATS, Format, InputFile, format_of
from ._identity import TEMPORARY_SUFFIXES

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
    delimiter: str | None = None,
    quote: str | None = '"',
    follow_symlinks: bool = False,
    left_out: list[Path] | None = None,
) -> list[InputFile]:
    """The files of ``paths``, in reading order.

    A directory is searched recursively for files whose extension is one of ``FORMATS``,
    in sorted order, skipping names that start with ``.`` or ``_`` (as Spark does) and
    names ending in a temporary suffix (``TEMPORARY_SUFFIXES``: ``.tmp``, ``.part``,
    ``.crdownload``): a file still being written is taken once it is renamed.
    Symbolic links to directories are not followed, and a link to a file outside the
    directory is left out unless ``follow_symlinks``: a link planted in an input
    directory must not make the run read (and quote in its messages) a file the user
    never named. A file found as a regular file is opened with ``O_NOFOLLOW``
    (``InputFile.follow_symlink`` is ``False``): a link put in its place later is refused,
    never read. A path given itself is read wherever it points.

    Args:
        paths: files or directories.
        format: every file's format; by default each file's extension says.
        encoding: the text encoding of CSV and JSON Lines files.
        dialect: the CSV dialect, whole; by default from ``delimiter`` and ``quote``.
        delimiter: the CSV delimiter; ``None``: each file's extension says (``.tsv``:
            a tab, else a comma).
        quote: the CSV quote character, or ``None`` for none.
        follow_symlinks: read the links in a directory that point outside it too.
        left_out: if given, the links left out are appended to it.

    Raises:
        FileNotFoundError: a path does not exist, or a directory has no data file.
        ValueError: a file's format cannot be told from its extension, or ``delimiter``
            or ``quote`` is not one ASCII character.
    """
    entries: Sequence[str | os.PathLike[str]] = (
        [paths] if isinstance(paths, str) or hasattr(paths, "__fspath__") else paths
    )
    make = functools.partial(
        InputFile.of,
        format=format,
        encoding=encoding,
        dialect=dialect,
        delimiter=delimiter,
        quote=quote,
    )
    files: list[InputFile] = []
    for entry in entries:
        path = Path(entry)
        if not path.exists():
            raise FileNotFoundError(f"input not found: {path}")
        if path.is_dir():
            inside = path.resolve()
            found = []
            for child in sorted(path.rglob("*")):
                if not child.is_file() or (format is None and format_of(child) is None):
                    continue
                if any(part.startswith((".", "_")) for part in child.relative_to(path).parts):
                    continue
                if child.name.endswith(TEMPORARY_SUFFIXES):
                    continue
                if (
                    child.is_symlink()
                    and not follow_symlinks
                    and not child.resolve().is_relative_to(inside)
                ):
                    if left_out is not None:
                        left_out.append(child)
                    continue
                found.append(child)
            if not found:
                raise FileNotFoundError(
                    f"no CSV, JSON Lines or Parquet files in directory {path} "
                    f"(looked for {', '.join(sorted(FORMATS))}, optionally compressed: "
                    f"{', '.join(sorted(COMPRESSIONS))})"
                )
            files.extend(make(child, follow_symlink=child.is_symlink()) for child in found)
            continue
        if format is None and format_of(path) is None:
            raise ValueError(
                f"unsupported input format: {path} "
                f"(expected a file ending in {', '.join(sorted(FORMATS))}, optionally "
                f"followed by {', '.join(sorted(COMPRESSIONS))})"
            )
        files.append(make(path))
    return files
