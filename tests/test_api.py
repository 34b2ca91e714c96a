"""The four interfaces: abstract, registrable, and variant as the mapping says."""

from __future__ import annotations

import doctest
import importlib

import pytest

from reactive_streams import Processor, Publisher, Subscriber, Subscription
from reactive_streams.reference import RangePublisher


def test_interfaces_cannot_be_instantiated_without_their_methods() -> None:
    class Incomplete(Publisher[int]):
        pass

    with pytest.raises(TypeError, match="abstract"):
        Incomplete()  # type: ignore[abstract]
    for interface in (Publisher, Subscriber, Subscription, Processor):
        with pytest.raises(TypeError):
            interface()  # type: ignore[abstract]


def test_third_party_classes_opt_in_with_register() -> None:
    class TheirPublisher:
        def subscribe(self, subscriber: object) -> None:
            pass

    Publisher.register(TheirPublisher)
    assert isinstance(TheirPublisher(), Publisher)


def test_processor_is_both_sides() -> None:
    assert issubclass(Processor, Subscriber)
    assert issubclass(Processor, Publisher)


def _variance_is_checked_by_mypy(bools: Publisher[bool], objects: Subscriber[object]) -> None:
    """Never run: mypy checks that publishers are covariant and subscribers contravariant."""
    ints: Publisher[int] = bools  # a publisher of bools is a publisher of ints
    int_subscriber: Subscriber[int] = objects  # a subscriber of anything takes ints
    ints.subscribe(int_subscriber)


@pytest.mark.parametrize(
    "module",
    [
        "reactive_streams.reference",
        "reactive_streams.adapters.asyncio",
        "reactive_streams.stages",
    ],
)
def test_docstring_examples_run(module: str) -> None:
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0


def test_import_does_not_pull_in_pyspark() -> None:
    import subprocess
    import sys

    code = (
        "import sys, reactive_streams, reactive_streams.reference; print('pyspark' in sys.modules)"
    )
    output = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert output.stdout.strip() == "False"
    assert RangePublisher(0, 1) is not None
