"""The Reactive Streams TCK for Python: conformance tests any implementation can run.

Subclass a verification class in a pytest module and implement its factory; every
inherited test runs, named after the rule it checks
(``test_required_spec309_request_zero_must_signal_value_error``) and marked
``pytest.mark.rule("3.9")``::

    from reactive_streams.tck import PublisherVerification

    class TestMyPublisher(PublisherVerification):
        def create_publisher(self, elements):
            return MyPublisher(range(elements))

The same tests run without pytest through ``run_verification`` and the
``reactive-streams tck`` command. See ``docs/tck.md``.
"""

from __future__ import annotations

from .._core import set_public_module
from ._base import VerificationBase as VerificationBase
from ._cases import CaseResult as CaseResult
from ._cases import Kind as Kind
from ._cases import Outcome as Outcome
from ._cases import TckCase as TckCase
from ._cases import iter_cases as iter_cases
from ._cases import run_case as run_case
from ._cases import tck_test as tck_test
from ._environment import TckFailure as TckFailure
from ._environment import TckSkip as TckSkip
from ._environment import TestEnvironment as TestEnvironment
from ._helper import HelperPublisher as HelperPublisher
from ._processor import IdentityProcessorVerification as IdentityProcessorVerification
from ._publisher import PublisherVerification as PublisherVerification
from ._runner import Report as Report
from ._runner import run_verification as run_verification
from ._sources import EndlessSource as EndlessSource
from ._sources import TerminatingProbe as TerminatingProbe
from ._subscriber import SubscriberBlackboxVerification as SubscriberBlackboxVerification
from ._subscriber import SubscriberPuppet as SubscriberPuppet
from ._subscriber import SubscriberWhiteboxVerification as SubscriberWhiteboxVerification
from ._subscriber import TckTestError as TckTestError
from ._subscriber import WhiteboxSubscriberProbe as WhiteboxSubscriberProbe
from ._subscriber import probed as probed
from ._support import END_OF_STREAM as END_OF_STREAM
from ._support import Latch as Latch
from ._support import ManualPublisher as ManualPublisher
from ._support import ManualSubscriber as ManualSubscriber

__all__ = [
    "END_OF_STREAM",
    "CaseResult",
    "EndlessSource",
    "HelperPublisher",
    "IdentityProcessorVerification",
    "Kind",
    "Latch",
    "ManualPublisher",
    "ManualSubscriber",
    "Outcome",
    "PublisherVerification",
    "Report",
    "SubscriberBlackboxVerification",
    "SubscriberPuppet",
    "SubscriberWhiteboxVerification",
    "TckCase",
    "TckFailure",
    "TckSkip",
    "TckTestError",
    "TerminatingProbe",
    "TestEnvironment",
    "VerificationBase",
    "WhiteboxSubscriberProbe",
    "iter_cases",
    "run_case",
    "probed",
    "run_verification",
    "tck_test",
]

set_public_module(__name__, globals())
