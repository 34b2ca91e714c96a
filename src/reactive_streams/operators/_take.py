"""``take``: the first ``count`` elements, then complete and cancel upstream."""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

from ._fusion import CountedOp

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["LimitingTakeOp", "TakeOp"]


class TakeOp(CountedOp):
    """Pass the first ``count`` elements, then complete; upstream is cancelled.

    Pull form: ``itertools.islice``, which never reads past the last element it needs.

    Marble::

        source:   -1-2-3-4-|
        take(2)   -1-2|
    """

    __slots__ = ()
    name = "take"

    def code(self, index: int, skip: str, position: str) -> list[str]:
        counter = f"c{index}"
        return [
            f"{counter} += 1",
            f"if {counter} >= n{index}:",
            "    _control.done = True",
            f"    if {counter} > n{index}:",
            f"        {skip}",
        ]

    def wrap(self, iterator: Iterator[Any]) -> Iterator[Any]:
        return itertools.islice(iterator, self.count)


class LimitingTakeOp(TakeOp):
    """The first ``take`` of a push chain: also counts the elements that reach it.

    The push chain's subscriber reads ``_control.reached`` to tell an element dropped
    before the take (which the take never saw, so upstream may be asked for one more)
    from one the take counted: the chain's upstream demand is capped at ``count`` plus
    the drops before the take (Reactor's ``limitRequest``).
    """

    __slots__ = ()

    def code(self, index: int, skip: str, position: str) -> list[str]:
        lines = super().code(index, skip, position)
        return [lines[0], f"_control.reached = c{index}", *lines[1:]]
