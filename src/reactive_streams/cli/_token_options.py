"""``--token``, ``--token-file`` and ``REACTIVE_STREAMS_TOKEN``: one bearer token, three ways in.

A token given as ``--token`` sits in the process's argv, which every local user can read
(``ps``, ``/proc/PID/cmdline``); the command then warns on stderr once its options were
checked (``warn_token_in_argv``). ``--token-file`` and
the environment variable keep it out of argv. ``serve`` and ``pipeline`` take the same
options, defined here once.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import click
from click.core import ParameterSource

from ._file_options import option_group

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = [
    "TOKEN_ENV",
    "resolve_token",
    "token_from_environment",
    "token_options",
    "warn_token_in_argv",
]

F = TypeVar("F", bound="Callable[..., object]")

TOKEN_ENV = "REACTIVE_STREAMS_TOKEN"
"""The environment variable a token may be given in."""

_MAX_TOKEN_FILE = 64 * 1024


def token_options(what: str) -> Callable[[F], F]:
    """Add ``--token`` and ``--token-file`` (parameters ``token``, ``token_file``).

    ``what`` says what the token is for, in the options' help. ``--token`` also reads
    ``REACTIVE_STREAMS_TOKEN``.
    """
    options = [
        click.option(
            "--token",
            envvar=TOKEN_ENV,
            default=None,
            help=f"{what} Given here it is visible to every local user (ps): prefer "
            f"--token-file or the {TOKEN_ENV} environment variable.",
        ),
        click.option(
            "--token-file",
            type=click.Path(path_type=Path, dir_okay=False),
            default=None,
            help="Read the token from this file (its first line; keep it mode 0600).",
        ),
    ]

    return option_group(options)


def resolve_token(token: str | None, token_file: Path | None) -> str | None:
    """The token the options give, or ``None`` (``warn_token_in_argv`` warns of argv).

    ``--token-file`` wins over ``REACTIVE_STREAMS_TOKEN``; ``--token`` with
    ``--token-file`` is refused.

    Raises:
        ValueError: both ``--token`` (or the variable) and ``--token-file`` are given, the
            token is empty, or the file cannot be read or holds no token (one line).
    """
    context = click.get_current_context(silent=True)
    source = context.get_parameter_source("token") if context is not None else None
    if token_file is not None:
        if token is not None and source is ParameterSource.COMMANDLINE:
            raise ValueError("give the token once: --token or --token-file, not both")
        return _read_token_file(token_file)  # over REACTIVE_STREAMS_TOKEN
    if token is not None and not token:
        raise ValueError("the token is empty")
    return token


def warn_token_in_argv() -> None:
    """Warn on stderr, in one line, when this command's token was given as ``--token``."""
    context = click.get_current_context(silent=True)
    if context is not None and context.get_parameter_source("token") is ParameterSource.COMMANDLINE:
        click.echo(
            f"Warning: --token is visible to every local user (ps); use --token-file or "
            f"{TOKEN_ENV} instead",
            err=True,
        )


def token_from_environment() -> bool:
    """Whether this command's ``--token`` came from ``REACTIVE_STREAMS_TOKEN``."""
    context = click.get_current_context(silent=True)
    return (
        context is not None and context.get_parameter_source("token") is ParameterSource.ENVIRONMENT
    )


def _read_token_file(path: Path) -> str:
    try:
        with path.open("rb") as file:
            mode = os.fstat(file.fileno()).st_mode
            data = file.read(_MAX_TOKEN_FILE + 1)
    except OSError as exc:
        raise ValueError(f"--token-file {path}: cannot read it: {exc.strerror or exc}") from None
    if len(data) > _MAX_TOKEN_FILE:
        raise ValueError(f"--token-file {path}: over {_MAX_TOKEN_FILE:,} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"--token-file {path}: not UTF-8 text") from None
    lines = text.splitlines()
    token = lines[0].strip() if lines else ""
    if not token:
        raise ValueError(f"--token-file {path}: the file holds no token")
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        click.echo(
            f"Warning: --token-file {path} can be read by other users "
            f"(mode {stat.S_IMODE(mode):04o}); chmod 600 it",
            err=True,
        )
    return token
