"""``distinct_until_changed`` (drop consecutive repeats) and ``distinct`` (drop repeats)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._fusion import FusedOp

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["DistinctOp", "DistinctUntilChangedOp"]


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


class DistinctOp(FusedOp):
    """Drop an element whose key was seen before, remembering at most ``max_keys`` keys.

    The keys live in a dict per subscription, in the order they were last seen; when it
    holds ``max_keys`` keys and a new one arrives, the key seen least recently is
    forgotten (and would pass again), so memory stays bounded on an endless stream.

    Marble::

        source:      -1-2-1-3-2-|
        distinct()   -1-2---3---|
    """

    __slots__ = ("key", "max_keys")
    name = "distinct"

    def __init__(self, key: Callable[[Any], object] | None, max_keys: int) -> None:
        self.key = key
        self.max_keys = max_keys

    def env(self, index: int) -> dict[str, Any]:
        return {f"f{index}": self.key, f"m{index}": self.max_keys}

    def state(self, index: int) -> dict[str, str]:
        return {f"seen{index}": "{}"}

    def code(self, index: int, skip: str, position: str) -> list[str]:
        seen = f"seen{index}"
        key = f"k{index}"
        return [
            f"{key} = {'x' if self.key is None else f'f{index}(x)'}",
            f"if {key} in {seen}:",
            f"    del {seen}[{key}]",  # seen again: it becomes the most recent key
            f"    {seen}[{key}] = None",
            f"    {skip}",
            f"{seen}[{key}] = None",
            f"if len({seen}) > m{index}:",
            f"    del {seen}[next(iter({seen}))]",  # forget the least recently seen key
        ]
