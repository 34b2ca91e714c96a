"""``on_error_return``, ``on_error_map``, ``on_error_complete`` (Reactor's semantics)."""

from __future__ import annotations

import pytest

from reactive_streams.operators import Flow

from .helpers import ManualPublisher, Recorder


def _failing() -> Flow[int]:
    return Flow.concat(Flow.just(1, 2), Flow.error(KeyError("lost")))


def test_on_error_return_emits_the_value_then_completes() -> None:
    assert _failing().on_error_return(0).to_list() == [1, 2, 0]


def test_on_error_return_calls_a_function_with_the_error() -> None:
    errors: list[Exception] = []

    def recover(error: Exception) -> int:
        errors.append(error)
        return -1

    assert _failing().on_error_return(recover).to_list() == [1, 2, -1]
    assert isinstance(errors[0], KeyError)


def test_on_error_return_waits_for_demand() -> None:
    source = ManualPublisher[int]()
    recorder: Recorder[int] = Recorder(1)
    Flow.from_publisher(source).on_error_return(9).subscribe(recorder)
    source.next(1)
    source.error(RuntimeError("x"))
    assert recorder.elements == [1]
    assert not recorder.terminated.is_set()
    recorder.request(2)  # one for the element, one to find the end of the fallback
    recorder.wait()
    assert recorder.elements == [1, 9]
    assert recorder.completed == 1


def test_on_error_return_with_a_raising_function_signals_that_error() -> None:
    failure = ValueError("no fallback")

    def recover(error: Exception) -> int:
        raise failure

    with pytest.raises(ValueError, match="no fallback") as caught:
        _failing().on_error_return(recover).to_list()
    assert isinstance(caught.value.__context__, KeyError)


def test_on_error_return_passes_completion_unchanged() -> None:
    assert Flow.just(1).on_error_return(0).to_list() == [1]


def test_on_error_map_replaces_the_error() -> None:
    with pytest.raises(LookupError, match="mapped") as caught:
        _failing().on_error_map(lambda error: LookupError("mapped")).to_list()
    assert caught.type is LookupError


def test_on_error_map_needs_an_exception() -> None:
    with pytest.raises(TypeError, match="must return an Exception"):
        _failing().on_error_map(lambda error: "oops").to_list()  # type: ignore[arg-type,return-value]


def test_on_error_complete_drops_the_error() -> None:
    assert _failing().on_error_complete().to_list() == [1, 2]
