"""The ``reactive-streams`` command.

Each subcommand lives in its own private module and is registered here; heavy imports
(pyspark, the TCK) happen inside the subcommand, so ``reactive-streams --help`` stays fast.
"""

from __future__ import annotations

import click

from .. import __version__

__all__ = ["main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="reactive-streams")
def main() -> None:
    """Reactive Streams for Python: demand-driven streams with bounded memory."""


from ._pipeline import pipeline as _pipeline_command  # noqa: E402

main.add_command(_pipeline_command)
