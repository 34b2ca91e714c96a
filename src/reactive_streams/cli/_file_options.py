"""The options for reading files, shared by ``pipeline`` and ``serve``, and their parsing."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

import click

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

__all__ = [
    "character",
    "file_options",
    "follow_options",
    "null_value_list",
    "option_group",
    "quote_character",
]

F = TypeVar("F", bound="Callable[..., object]")


def character(text: str | None) -> str | None:
    r"""An option's character: ``\t`` and ``tab`` mean a tab."""
    if text is None:
        return None
    return "\t" if text in ("\\t", "tab", "TAB") else text


def quote_character(text: str) -> str | None:
    """``--quote``: one character, or ``None`` for ``none`` (values are never quoted)."""
    return None if text.lower() == "none" else character(text)


def null_value_list(values: Iterable[str]) -> tuple[str, ...]:
    """``--null-value``, repeatable and comma-separated: every text given, in order."""
    return tuple(part for value in values for part in value.split(","))


def file_options(command: F) -> F:
    """Add the file-reading options to a click command, named as its parameters.

    Encoding, CSV dialect, null markers, timestamp format, schema and symbolic links: the
    same options, with the same help, on every command that reads files.
    """
    for option in reversed(_OPTIONS):
        command = option(command)
    return command


def option_group(options: list[Callable[[F], F]]) -> Callable[[F], F]:
    """One decorator that adds ``options`` to a click command, in the order given."""

    def add(command: F) -> F:
        for option in reversed(options):
            command = option(command)
        return command

    return add


def follow_options(what: str) -> Callable[[F], F]:
    """Add ``--follow`` and ``--poll-interval`` (parameters ``follow``, ``poll_interval``).

    ``what`` says what the command does with the files that land later.
    """
    options = [
        click.option(
            "--follow",
            is_flag=True,
            help=f"{what} A file is taken once its size held still for one --poll-interval "
            "and no process has it open for writing (in listing order); names starting "
            "with . or _ and ending in .tmp, .part or .crdownload wait until renamed, so "
            "write a file, then rename it into the directory. Files are known by device, "
            "inode, size and mtime: a read file may be moved or deleted, and is never "
            "read twice. An empty directory needs --schema.",
        ),
        click.option(
            "--poll-interval",
            type=click.FloatRange(min=0.01),
            default=1.0,
            show_default=True,
            help="Seconds between looks for new files (with --follow).",
        ),
    ]

    return option_group(options)


_OPTIONS = [
    click.option(
        "--encoding",
        default="utf-8",
        show_default=True,
        help="Text encoding of CSV and JSON Lines inputs (a record that does not decode is a "
        "dead letter).",
    ),
    click.option(
        "--delimiter",
        default=None,
        help="Field delimiter of CSV inputs, one character ('\\t' or 'tab' for a tab).  "
        "[default: a tab for .tsv files, else a comma]",
    ),
    click.option(
        "--follow-symlinks",
        is_flag=True,
        help="Read the symbolic links in an input directory that point outside it (left out "
        "by default).",
    ),
    click.option(
        "--quote",
        default='"',
        show_default=True,
        help="Quote character of CSV inputs, one character; 'none': values are never quoted.",
    ),
    click.option(
        "--schema",
        metavar="DDL",
        default=None,
        help="The input's schema as Spark DDL instead of inferring it, e.g. \"id BIGINT, "
        'rating DOUBLE, ts TIMESTAMP, user STRUCT<name: STRING>" (read without Spark).',
    ),
    click.option(
        "--null-value",
        "null_values",
        multiple=True,
        metavar="TEXT[,TEXT...]",
        help="Text read as null in every column, text columns too (repeatable or "
        "comma-separated). It adds to the defaults ('', NA, N/A, n/a, NULL, null, None, NaN, "
        "#N/A, ...), which are null in the columns that are not text.",
    ),
    click.option(
        "--timestamp-format",
        metavar="FORMAT",
        default=None,
        help="strptime format of timestamp text, e.g. '%d.%m.%Y %H:%M' (%z: with an offset, "
        "else UTC); tried before ISO 8601 and YYYY/MM/DD[ HH:MM[:SS]], which are read "
        "without it.",
    ),
]
