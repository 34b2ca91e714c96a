"""``take_while``: pass elements while a predicate holds, then complete."""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

from ._fusion import FusedOp

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

__all__ = ["TakeWhileOp"]


class TakeWhileOp(FusedOp):
    """Pass elements while ``predicate(x)`` is truthy; the first failing one completes.

    The failing element is not emitted, and upstream is cancelled.

    Marble::

        source:          -1-2-5-1-|
        take_while(<3)   -1-2-|
    """

    __slots__ = ("predicate",)
    name = "take_while"
    pull_inline = False

    def __init__(self, predicate: Callable[[Any], object]) -> None:
        self.predicate = predicate

    def env(self, index: int) -> dict[str, Any]:
        return {f"f{index}": self.predicate}

    def code(self, index: int, skip: str, position: str) -> list[str]:
        return [f"if not f{index}(x):", "    _control.done = True", f"    {skip}"]

    def wrap(self, iterator: Iterator[Any]) -> Iterator[Any]:
        return itertools.takewhile(self.predicate, iterator)
