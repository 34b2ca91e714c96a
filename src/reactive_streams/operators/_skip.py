"""``skip``: drop the first ``count`` elements."""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

from ._fusion import CountedOp

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["SkipOp"]


class SkipOp(CountedOp):
    """Drop the first ``count`` elements; each dropped element is re-requested upstream.

    Marble::

        source:   -1-2-3-4-|
        skip(2)   -----3-4-|
    """

    __slots__ = ()
    name = "skip"

    def code(self, index: int, skip: str, position: str) -> list[str]:
        counter = f"c{index}"
        return [f"if {counter} < n{index}:", f"    {counter} += 1", f"    {skip}"]

    def wrap(self, iterator: Iterator[Any]) -> Iterator[Any]:
        return itertools.islice(iterator, self.count, None)
