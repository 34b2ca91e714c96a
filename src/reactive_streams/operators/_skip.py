"""``skip``: drop the first ``count`` elements."""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

from ._fusion import FusedOp

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["SkipOp"]


class SkipOp(FusedOp):
    """Drop the first ``count`` elements; each dropped element is re-requested upstream.

    Marble::

        source:   -1-2-3-4-|
        skip(2)   -----3-4-|
    """

    __slots__ = ("count",)
    name = "skip"
    pull_inline = False

    def __init__(self, count: int) -> None:
        self.count = count

    def env(self, index: int) -> dict[str, Any]:
        return {f"n{index}": self.count}

    def state(self, index: int) -> dict[str, str]:
        return {f"c{index}": "0"}

    def code(self, index: int, skip: str) -> list[str]:
        counter = f"c{index}"
        return [f"if {counter} < n{index}:", f"    {counter} += 1", f"    {skip}"]

    def wrap(self, iterator: Iterator[Any]) -> Iterator[Any]:
        return itertools.islice(iterator, self.count, None)
