"""``set_public_module``: the public module, not the private file, in reprs and tracebacks."""

from __future__ import annotations

import types
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["set_public_module"]

_PACKAGE = __name__.split(".", 1)[0]


def set_public_module(module_name: str, namespace: Mapping[str, object]) -> None:
    """Set ``__module__`` to ``module_name`` on what a public module re-exports (as trio does).

    A public module (``reactive_streams.operators``) calls it last, with its ``__name__``
    and ``globals()``: every class and function named in ``__all__`` that is defined in a
    private module of this package (``reactive_streams.operators._flow``) then shows the
    public name in reprs, tracebacks and pickles. A name that already has a public module
    (``reactive_streams.api.Publisher``, a name re-exported from another public module),
    constants and type aliases are left as they are.

    Args:
        module_name: the public module's ``__name__``.
        namespace: its ``globals()``; names in ``__all__`` that it lacks (a lazy
            ``__version__``) are skipped.
    """
    for name in namespace.get("__all__", ()):  # type: ignore[attr-defined]
        obj = namespace.get(name)
        if isinstance(obj, type | types.FunctionType) and _is_private(obj.__module__):
            obj.__module__ = module_name


def _is_private(module: str) -> bool:
    parts = module.split(".")
    return parts[0] == _PACKAGE and any(part.startswith("_") for part in parts[1:])
