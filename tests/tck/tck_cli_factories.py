"""Factories the CLI tests name as MODULE:FACTORY."""

from __future__ import annotations

from typing import Any

from reactive_streams import Processor, Publisher, Subscriber
from reactive_streams.reference import RangePublisher
from tests.tck.broken.tck_broken_publishers import IgnoresDemandPublisher
from tests.tck.tck_samples import BatchSubscriber, FailedPublisher, PassThroughProcessor


def range_publisher(elements: int) -> Publisher[Any]:
    return RangePublisher(0, elements)


def failed_publisher() -> Publisher[Any]:
    return FailedPublisher()


def ignores_demand(elements: int) -> Publisher[Any]:
    return IgnoresDemandPublisher(elements)


def batch_subscriber() -> Subscriber[Any]:
    return BatchSubscriber()


def pass_through(buffer_size: int) -> Processor[Any, Any]:
    return PassThroughProcessor(buffer_size)


NOT_CALLABLE = 42
