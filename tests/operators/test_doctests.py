"""The examples in the operator docstrings run as doctests."""

from __future__ import annotations

import doctest

from reactive_streams import operators
from reactive_streams.operators import Flow


def test_docstring_examples() -> None:
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    tests = finder.find(operators, "operators") + finder.find(
        Flow, "Flow", module=False, globs={"Flow": Flow}
    )
    for test in tests:
        runner.run(test)
    results = runner.summarize(verbose=False)
    assert results.attempted >= 6  # the module, Flow and several methods have examples
    assert results.failed == 0
