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
import operator
from typing import TYPE_CHECKING, Any, Final

from .._core import NoneResultError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator

__all__ = [
    "SKIP",
    "UNSET",
    "CountedOp",
    "FusedOp",
    "PushControl",
    "compile_pull",
    "compile_push",
]


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
    """Per-subscription flags a push chain sets.

    ``done`` means complete after this element; ``reached`` counts the elements that
    reached the chain's first ``take`` (its upstream demand is capped by that take).
    """

    __slots__ = ("done", "reached")

    def __init__(self) -> None:
        self.done = False
        self.reached = 0


class FusedOp:
    """One synchronous operator that can be fused with its neighbours.

    Subclasses provide code templates, filled in by the compiler through ``code``'s
    arguments, never by editing the text afterwards: ``index`` is the operator's index in
    the chain (suffix it to every name, ``f{index}``); ``skip`` is the statement that drops
    the current element (``continue`` in pull mode, ``return SKIP`` in push mode);
    ``position`` is the expression for the element's position in the fused stage's input
    (a counter, or a call that computes it only when an error needs it). The element is
    the local ``x``.
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

    def code(self, index: int, skip: str, position: str) -> list[str]:
        """The statements applied to ``x``, one per line, indented by the caller."""
        raise NotImplementedError

    def wrap(self, iterator: Iterator[Any]) -> Iterator[Any]:
        """Pull form of a non-inline operator: wrap the upstream iterator."""
        raise NotImplementedError


class CountedOp(FusedOp):
    """A fused operator counting elements against ``count`` (``skip``, ``take``).

    The templates see ``count`` as ``n{i}`` and a per-subscription counter ``c{i}`` that
    starts at 0; the pull form is a ``wrap`` (``itertools.islice``), not inlined.
    """

    __slots__ = ("count",)
    pull_inline = False

    def __init__(self, count: int) -> None:
        self.count = count

    def env(self, index: int) -> dict[str, Any]:
        return {f"n{index}": self.count}

    def state(self, index: int) -> dict[str, str]:
        return {f"c{index}": "0"}


def none_check(index: int, position: str, var: str = "x") -> list[str]:
    """Template lines raising ``NoneResultError`` when ``var`` is ``None`` (Rule 2.13).

    ``position`` is the expression ``code`` was given for the element's position.
    """
    return [f"if {var} is None:", f"    raise _NoneResultError(what{index}, {position})"]


def _base_env() -> dict[str, Any]:
    return {"_NoneResultError": NoneResultError, "SKIP": SKIP, "UNSET": UNSET}


def compile_pull(
    ops: tuple[FusedOp, ...],
) -> Callable[[Iterator[Any], Callable[[], int] | None], Iterator[Any]]:
    """Compile ``ops`` into ``build(source, position)`` wrapping a source iterator.

    ``position`` (optional) returns the 0-based position of the element last read from
    ``source``; when given, the first segment does not count elements itself, which keeps
    its loop as tight as a plain ``for`` loop.
    """
    steps: list[tuple[bool, Any]] = []  # (inline segment?, step)
    run: list[tuple[int, FusedOp]] = []

    def flush() -> None:
        if run:
            segment = tuple(run)
            steps.append((True, (_generate_segment(segment, counted=True), segment)))
            run.clear()

    for index, op in enumerate(ops):
        if op.pull_inline:
            run.append((index, op))
        else:
            flush()
            steps.append((False, op.wrap))
    flush()
    uncounted: dict[int, Callable[..., Iterator[Any]]] = {}

    def build(source: Iterator[Any], position: Callable[[], int] | None) -> Iterator[Any]:
        iterator = source
        for number, (inline, step) in enumerate(steps):
            if not inline:
                iterator = step(iterator)
            elif number == 0 and position is not None:
                generated = uncounted.get(number)
                if generated is None:
                    generated = uncounted[number] = _generate_segment(step[1], counted=False)
                iterator = generated(iterator, position)
            else:
                iterator = step[0](iterator, None)
        return iterator

    return build


def _generate_segment(
    run: tuple[tuple[int, FusedOp], ...], *, counted: bool
) -> Callable[[Iterator[Any], Callable[[], int] | None], Iterator[Any]]:
    env = _base_env()
    init: list[str] = []
    body: list[str] = []
    if counted:
        loop, position = "    for _pos, x in enumerate(source):", "_pos"
    else:  # the position is asked for only when an error needs it
        loop, position = "    for x in source:", "_position()"
    for index, op in run:
        env.update(op.env(index))
        init.extend(f"    {name} = {value}" for name, value in op.state(index).items())
        body.extend(f"        {line}" for line in op.code(index, "continue", position))
    source = "\n".join(["def segment(source, _position):", *init, loop, *body, "        yield x"])
    label = "|".join(op.name for _, op in run)
    exec(compile(source, f"<fused {label}>", "exec"), env)
    segment: Callable[[Iterator[Any], Callable[[], int] | None], Iterator[Any]] = env["segment"]
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
        body.extend(f"        {line}" for line in op.code(index, "return SKIP", "_pos"))
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


class _SizedChunks:
    """Chunks of a ``range``/``list``/``tuple`` source, and the position of the last read.

    Each chunk is a slice iterator, so ``operator.length_hint`` says how much of it is
    left: the position of the element being processed costs nothing per element.
    """

    __slots__ = ("_base", "_chunk", "_size")

    def __init__(self) -> None:
        self._base = 0
        self._size = 0
        self._chunk: Iterator[Any] = iter(())

    def chunks(
        self, sequence: range | list[Any] | tuple[Any, ...], is_cancelled: Callable[[], bool]
    ) -> Iterator[Iterator[Any]]:
        length = len(sequence)
        for base in range(0, length, _SIZED_CHUNK):
            if is_cancelled():
                return
            piece = sequence[base : base + _SIZED_CHUNK]
            self._base = base
            self._size = len(piece)
            self._chunk = chunk = iter(piece)
            yield chunk

    def position(self) -> int:
        return self._base + self._size - operator.length_hint(self._chunk) - 1


def cancellable(
    source: Iterable[Any], is_cancelled: Callable[[], bool]
) -> tuple[Iterator[Any], Iterator[Any], Callable[[], int] | None]:
    """Wrap a source so a fused chain notices cancellation between chunks.

    Returns ``(iterator, raw, position)``: the wrapped iterator, the raw source iterator
    (to ``close()`` a generator), and for sized sources a function giving the position of
    the last element read. Elements are still read one at a time, in C, through
    ``itertools.chain``; nothing is read ahead of demand.
    """
    if type(source) in (range, list, tuple):
        sized = _SizedChunks()
        chunks = sized.chunks(source, is_cancelled)  # type: ignore[arg-type]
        return itertools.chain.from_iterable(chunks), iter(()), sized.position
    raw = iter(source)
    return itertools.chain.from_iterable(_chunks(raw, is_cancelled)), raw, None


_CHUNK: Final = 1024
_SIZED_CHUNK: Final = 65536


def _chunks(iterator: Iterator[Any], is_cancelled: Callable[[], bool]) -> Iterator[Any]:
    end = UNSET
    while not is_cancelled():
        first = next(iterator, end)
        if first is end:
            return
        yield (first,)
        yield itertools.islice(iterator, _CHUNK - 1)
