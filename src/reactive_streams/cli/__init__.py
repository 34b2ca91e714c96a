"""The ``reactive-streams`` command.

Each subcommand lives in its own private module and is registered here; heavy imports
(pyspark, the TCK) happen inside the subcommand, so ``reactive-streams --help`` stays fast.
"""

from __future__ import annotations

import click

from .. import __version__
from ._demo import demo
from ._pipeline import pipeline
from ._serve import serve
from ._tck import tck

__all__ = ["main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="reactive-streams")
def main() -> None:
    """Reactive Streams for Python: demand-driven streams with bounded memory."""


main.add_command(demo)
main.add_command(tck)
main.add_command(pipeline)
main.add_command(serve)
