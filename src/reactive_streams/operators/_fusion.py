"""Fusion: a chain of synchronous operators compiled into one stage.

Adjacent synchronous operators (``map``, ``filter``, ``scan``, ``take``, ``skip``,
``take_while``, ``distinct_until_changed``, ``reduce``) never pay one signal round trip per
element per operator. A ``Flow`` keeps them as a tuple of ``FusedOp`` and compiles the tuple
once, in one of two shapes:

* **pull** (the source is an iterable or a range): element-wise operators are generated
  into ONE Python generator function (``for x in source: x = f0(x); if not f1(x): continue;
  yield x``), limits become ``itertools.islice`` / ``takewhile`` and ``reduce`` becomes
  ``functools.reduce``, all running in C. The emitter election of ``PullSubscription``
  drives the resulting iterator, so the per-element cost is close to a plain loop.
* **push** (the source is any publisher): the same operators are generated into ONE
  function ``push(x) -> x | SKIP`` called from a single fused subscriber.

Seen from outside, the fused stage is one spec-conforming publisher.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any, Final

from ._base import NoneResultError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

__all__ = ["SKIP", "UNSET", "FusedOp", "PushControl", "compile_pull", "compile_push"]


class _Marker:
    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return self._name


SKIP: Final = _Marker("SKIP")
"""Returned by a push chain for an element that produces no output."""
UNSET: Final[Any] = _Marker("UNSET")
"""The value of an accumulator or a "previous element" before the first element."""


class PushControl:
    """Per-subscription flags a push chain sets: ``done`` means complete after this element."""

    __slots__ = ("done",)

    def __init__(self) -> None:
        self.done = False


class FusedOp:
    """One synchronous operator that can be fused with its neighbours.

    Subclasses provide code templates. ``{i}`` in a template is the operator's index in the
    chain; ``{skip}`` is the statement that drops the current element (``continue`` in pull
    mode, ``return SKIP`` in push mode). The element is the local ``x``, its position in the
    fused stage's input is ``_pos``.
    """

    __slots__ = ()
    name = "op"
    pull_inline = True
    """True: the pull form is inlined into the generated generator; False: ``wrap``."""
    push_capable = True
    """False for operators that end a push chain (``reduce`` runs as its own stage)."""

    def env(self, index: int) -> dict[str, Any]:
        """Names the templates use, suffixed by ``index``."""
        return {}

    def state(self, index: int) -> dict[str, str]:
        """Per-subscription local variables and their initial value expressions."""
        return {}

    def code(self, index: int, skip: str) -> list[str]:
        """The statements applied to ``x``, one per line, indented by the caller."""
        raise NotImplementedError

    def wrap(self, iterator: Iterator[Any]) -> Iterator[Any]:
        """Pull form of a non-inline operator: wrap the upstream iterator."""
        raise NotImplementedError


def none_check(index: int, var: str = "x") -> list[str]:
    """Template lines raising ``NoneResultError`` when ``var`` is ``None`` (Rule 2.13)."""
    return [f"if {var} is None:", f"    raise _NoneResultError(what{index}, _pos)"]


def _base_env() -> dict[str, Any]:
    return {"_NoneResultError": NoneResultError, "SKIP": SKIP, "UNSET": UNSET}


def compile_pull(ops: tuple[FusedOp, ...]) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """Compile ``ops`` into a function that wraps a source iterator with the whole chain."""
    steps: list[Callable[[Iterator[Any]], Iterator[Any]]] = []
    run: list[tuple[int, FusedOp]] = []

    def flush() -> None:
        if run:
            steps.append(_generate_segment(tuple(run)))
            run.clear()

    for index, op in enumerate(ops):
        if op.pull_inline:
            run.append((index, op))
        else:
            flush()
            steps.append(op.wrap)
    flush()

    def build(source: Iterator[Any]) -> Iterator[Any]:
        iterator = source
        for step in steps:
            iterator = step(iterator)
        return iterator

    return build


def _generate_segment(
    run: tuple[tuple[int, FusedOp], ...],
) -> Callable[[Iterator[Any]], Iterator[Any]]:
    env = _base_env()
    init: list[str] = []
    body: list[str] = []
    for index, op in run:
        env.update(op.env(index))
        init.extend(f"    {name} = {value}" for name, value in op.state(index).items())
        body.extend(f"        {line}" for line in op.code(index, "continue"))
    source = "\n".join(
        [
            "def segment(source):",
            *init,
            "    for _pos, x in enumerate(source):",
            *body,
            "        yield x",
        ]
    )
    exec(compile(source, f"<fused {'|'.join(op.name for _, op in run)}>", "exec"), env)
    segment: Callable[[Iterator[Any]], Iterator[Any]] = env["segment"]
    return segment


def compile_push(
    ops: tuple[FusedOp, ...],
) -> Callable[[PushControl], Callable[[Any], Any]]:
    """Compile ``ops`` into a factory: ``factory(control)`` returns a fresh ``push(x)``.

    ``push(x)`` returns the output element or ``SKIP``, raises whatever a user function
    raises, and sets ``control.done`` when the chain must complete after this element.
    """
    env = _base_env()
    init: list[str] = ["    _pos = -1"]
    names: list[str] = ["_pos"]
    body: list[str] = ["        _pos += 1"]
    for index, op in enumerate(ops):
        if not op.push_capable:
            raise ValueError(f"{op.name} cannot be fused in a push chain")
        env.update(op.env(index))
        for name, value in op.state(index).items():
            init.append(f"    {name} = {value}")
            names.append(name)
        body.extend(f"        {line}" for line in op.code(index, "return SKIP"))
    source = "\n".join(
        [
            "def factory(_control):",
            *init,
            "    def push(x):",
            f"        nonlocal {', '.join(names)}",
            *body,
            "        return x",
            "    return push",
        ]
    )
    label = "|".join(op.name for op in ops) or "identity"
    exec(compile(source, f"<fused push {label}>", "exec"), env)
    factory: Callable[[PushControl], Callable[[Any], Any]] = env["factory"]
    return factory


def cancellable(iterator: Iterator[Any], is_cancelled: Callable[[], bool]) -> Iterator[Any]:
    """Wrap a source iterator so a fused chain notices cancellation every 1024 elements.

    Elements are still pulled one at a time (nothing is read ahead), in C, through
    ``itertools.chain``; the Python-level check runs once per chunk.
    """
    return itertools.chain.from_iterable(_chunks(iterator, is_cancelled))


_CHUNK: Final = 1024


def _chunks(iterator: Iterator[Any], is_cancelled: Callable[[], bool]) -> Iterator[Any]:
    end = UNSET
    while not is_cancelled():
        first = next(iterator, end)
        if first is end:
            return
        yield (first,)
        yield itertools.islice(iterator, _CHUNK - 1)
