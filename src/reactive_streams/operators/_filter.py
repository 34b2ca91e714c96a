"""``filter``: keep the elements a predicate accepts."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._fusion import FusedOp

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["FilterOp"]


class FilterOp(FusedOp):
    """Keep ``x`` when ``predicate(x)`` is truthy.

    A dropped element is replaced by fresh demand upstream, so the downstream demand is
    honoured exactly.

    Marble::

        source:      -1-2-3-4-|
        filter(even) ---2---4-|
    """

    __slots__ = ("predicate",)
    name = "filter"

    def __init__(self, predicate: Callable[[Any], object]) -> None:
        self.predicate = predicate

    def env(self, index: int) -> dict[str, Any]:
        return {f"f{index}": self.predicate}

    def code(self, index: int, skip: str, position: str) -> list[str]:
        return [f"if not f{index}(x):", f"    {skip}"]
