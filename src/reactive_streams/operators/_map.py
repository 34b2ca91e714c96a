"""``map``: apply a function to every element."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._fusion import FusedOp, none_check

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["MapOp"]


class MapOp(FusedOp):
    """``x -> fn(x)``; a ``None`` result is a ``NoneResultError`` (Rule 2.13).

    Marble::

        source:   -1-2-3-|
        map(x*10) -10-20-30-|
    """

    __slots__ = ("fn",)
    name = "map"

    def __init__(self, fn: Callable[[Any], Any]) -> None:
        self.fn = fn

    def env(self, index: int) -> dict[str, Any]:
        return {f"f{index}": self.fn, f"what{index}": "the function given to map()"}

    def code(self, index: int, skip: str, position: str) -> list[str]:
        return [f"x = f{index}(x)", *none_check(index, position)]
