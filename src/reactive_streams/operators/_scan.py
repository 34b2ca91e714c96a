"""``scan``: emit every intermediate accumulation."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._fusion import UNSET, FusedOp, none_check

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["ScanOp"]


class ScanOp(FusedOp):
    """One output per input: ``acc = fn(acc, x)``, emitting ``acc``.

    Without ``initial`` the first element is emitted as is and seeds the accumulator (as
    ``itertools.accumulate`` does); with ``initial`` the seed itself is not emitted, so
    the stage stays one-in, one-out.

    Marble::

        source:        -1-2-3-|
        scan(add)      -1-3-6-|
        scan(add, 10)  -11-13-16-|
    """

    __slots__ = ("fn", "initial")
    name = "scan"

    def __init__(self, fn: Callable[[Any, Any], Any], initial: object = UNSET) -> None:
        self.fn = fn
        self.initial = initial

    def env(self, index: int) -> dict[str, Any]:
        return {
            f"f{index}": self.fn,
            f"seed{index}": self.initial,
            f"what{index}": "the function given to scan()",
        }

    def state(self, index: int) -> dict[str, str]:
        return {f"acc{index}": f"seed{index}"}

    def code(self, index: int, skip: str, position: str) -> list[str]:
        acc = f"acc{index}"
        return [
            f"if {acc} is UNSET:",
            f"    {acc} = x",
            "else:",
            f"    {acc} = f{index}({acc}, x)",
            *(f"    {line}" for line in none_check(index, position, acc)),
            f"x = {acc}",
        ]
