"""Public modules show public names: ``set_public_module`` on every public ``__init__``."""

from __future__ import annotations

import importlib
import pickle
import types

import pytest

from reactive_streams._core import set_public_module

PUBLIC_MODULES = [
    "reactive_streams",
    "reactive_streams.adapters.anyio",
    "reactive_streams.adapters.asyncio",
    "reactive_streams.adapters.reactivex",
    "reactive_streams.hubs",
    "reactive_streams.metrics",
    "reactive_streams.operators",
    "reactive_streams.reference",
    "reactive_streams.rsocket",
    "reactive_streams.schedulers",
    "reactive_streams.stages",
    "reactive_streams.tck",
    "reactive_streams.testing",
    pytest.param(
        "reactive_streams.files",
        marks=pytest.mark.skipif(
            importlib.util.find_spec("pyarrow") is None, reason="needs pyarrow"
        ),
    ),
    "reactive_streams.pipeline",
]


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_every_exported_class_and_function_names_a_public_module(name: str) -> None:
    module = importlib.import_module(name)
    for exported in module.__all__:
        obj = getattr(module, exported)
        if not isinstance(obj, type | types.FunctionType):
            continue
        public = obj.__module__
        assert not any(part.startswith("_") for part in public.split(".")), (name, exported)
        # the name it shows is importable from there: reprs are true and pickles load
        assert getattr(importlib.import_module(public), obj.__qualname__) is obj


def test_a_name_defined_in_another_public_module_keeps_its_module() -> None:
    import reactive_streams

    assert reactive_streams.Publisher.__module__ == "reactive_streams.api"
    assert reactive_streams.Flow.__module__ == "reactive_streams.operators"
    assert reactive_streams.StreamStatistics.__module__ == "reactive_streams"


def test_set_public_module_changes_only_private_classes_and_functions() -> None:
    def private() -> None: ...

    def public() -> None: ...

    private.__module__ = "reactive_streams.operators._somewhere"
    public.__module__ = "reactive_streams.api"
    constant = 3
    namespace = {
        "__all__": ["private", "public", "constant", "missing"],
        "private": private,
        "public": public,
        "constant": constant,
    }
    set_public_module("reactive_streams.example", namespace)
    assert private.__module__ == "reactive_streams.example"
    assert public.__module__ == "reactive_streams.api"


def test_a_public_class_pickles_by_its_public_name() -> None:
    from reactive_streams import StreamStatistics

    snapshot = StreamStatistics(
        requested=1, delivered=1, buffered=0, cancelled=False, terminated=False
    )
    assert pickle.loads(pickle.dumps(snapshot)) == snapshot
