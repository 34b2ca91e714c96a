"""``distinct_until_changed``: drop consecutive repeats."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._fusion import FusedOp

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["DistinctUntilChangedOp"]


class DistinctUntilChangedOp(FusedOp):
    """Drop an element whose key equals (``==``) the previous element's key.

    Marble::

        source:                  -1-1-2-2-1-|
        distinct_until_changed() -1---2---1-|
    """

    __slots__ = ("key",)
    name = "distinct_until_changed"

    def __init__(self, key: Callable[[Any], object] | None = None) -> None:
        self.key = key

    def env(self, index: int) -> dict[str, Any]:
        return {f"f{index}": self.key}

    def state(self, index: int) -> dict[str, str]:
        return {f"last{index}": "UNSET"}

    def code(self, index: int, skip: str, position: str) -> list[str]:
        last = f"last{index}"
        key = "x" if self.key is None else f"f{index}(x)"
        return [
            f"k{index} = {key}",
            f"if {last} is not UNSET and {last} == k{index}:",
            f"    {skip}",
            f"{last} = k{index}",
        ]
