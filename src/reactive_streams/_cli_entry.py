"""The console-script entry point: the command line, or an install hint without its extra.

``click`` and ``rich`` serve only the command line, so they live in the ``cli`` extra (the
``pipeline`` extra, for the main job, includes it). A base install still has the
``reactive-streams`` script; run without the extra, it says what to install instead of
printing a ``ModuleNotFoundError``. It lives outside the ``cli`` package because that
package imports click.
"""

from __future__ import annotations

import sys

__all__ = ["INSTALL_HINT", "run"]

INSTALL_HINT = (
    "the reactive-streams command needs the 'cli' extra: "
    "pip install 'reactive-streams-py[cli]' (or '[pipeline]' for the main job)"
)
_CLI_MODULES = frozenset({"click", "rich"})


def run() -> None:
    """Run the ``reactive-streams`` command; exit 2 with an install hint if the extra is missing."""
    try:
        from .cli import main  # noqa: PLC0415  (the import is what may fail)
    except ModuleNotFoundError as error:
        if (error.name or "").split(".")[0] not in _CLI_MODULES:
            raise
        print(f"Error: {INSTALL_HINT} (missing module: {error.name})", file=sys.stderr)
        raise SystemExit(2) from None
    main()
