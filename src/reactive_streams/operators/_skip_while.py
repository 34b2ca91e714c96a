"""``skip_while``: drop elements while a predicate holds, then pass everything."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._fusion import FusedOp

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["SkipWhileOp"]


class SkipWhileOp(FusedOp):
    """Drop elements while ``predicate(x)`` is truthy; from the first failing one, pass all.

    The predicate is not called again once it failed. Dropped elements are re-requested
    upstream (as ``filter``'s are).

    Marble::

            source:          -1-2-5-1-|
            skip_while(<3)   -----5-1-|
    """

    __slots__ = ("predicate",)
    name = "skip_while"

    def __init__(self, predicate: Callable[[Any], object]) -> None:
        self.predicate = predicate

    def env(self, index: int) -> dict[str, Any]:
        return {f"f{index}": self.predicate}

    def state(self, index: int) -> dict[str, str]:
        return {f"skipping{index}": "True"}

    def code(self, index: int, skip: str, position: str) -> list[str]:
        skipping = f"skipping{index}"
        return [
            f"if {skipping}:",
            f"    if f{index}(x):",
            f"        {skip}",
            f"    {skipping} = False",
        ]
