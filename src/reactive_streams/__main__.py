"""``python -m reactive_streams``: the same as the ``reactive-streams`` command."""

from __future__ import annotations

from ._cli_entry import run

run()
