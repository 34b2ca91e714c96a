"""The TCK's inventory: same tests and classification as the reference TCK, plus ours."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from reactive_streams.tck import (
    IdentityProcessorVerification,
    Kind,
    PublisherVerification,
    SubscriberBlackboxVerification,
    SubscriberWhiteboxVerification,
    VerificationBase,
    iter_cases,
)

NAME = re.compile(r"^test_(required|optional|stochastic|untested)_(.+)$")
SPEC = re.compile(r"spec(\d)(\d\d)")

# (reference TCK counts by class) + (tests beyond the reference TCK)
EXPECTED = {
    PublisherVerification: {"required": 22 + 13, "optional": 8 + 1, "stochastic": 1, "untested": 7},
    SubscriberWhiteboxVerification: {"required": 14 + 1, "untested": 13},
    SubscriberBlackboxVerification: {"required": 11, "untested": 15},
    IdentityProcessorVerification: {
        "required": 22 + 13 + 14 + 1 + 3,
        "optional": 9,
        "stochastic": 1,
        "untested": 7 + 13,
    },
}


@pytest.mark.parametrize("verification", list(EXPECTED), ids=lambda cls: cls.__name__)
def test_classification_counts_match_the_inventory(verification: type[VerificationBase]) -> None:
    counts = Counter(str(case.kind) for case in iter_cases(verification))
    assert dict(counts) == EXPECTED[verification]


@pytest.mark.parametrize("verification", list(EXPECTED), ids=lambda cls: cls.__name__)
def test_every_name_carries_its_class_and_rule(verification: type[VerificationBase]) -> None:
    for case in iter_cases(verification):
        match = NAME.match(case.name)
        assert match is not None, case.name
        assert Kind(match.group(1)) is case.kind, case.name
        spec = SPEC.search(case.name)
        if spec is None:
            assert case.rule in {"setup", "config"}, case.name
        else:
            assert case.rule == f"{spec.group(1)}.{int(spec.group(2))}", case.name
        if case.kind is Kind.UNTESTED:
            assert case.reason, case.name
