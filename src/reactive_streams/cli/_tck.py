"""``reactive-streams tck``: run the TCK against an implementation from the command line.

``MODULE:FACTORY`` names a callable the way ``uvicorn`` and ``gunicorn`` do: a module
importable from the current directory (or ``PYTHONPATH``) and an attribute path in it.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..tck import CaseResult, Report, VerificationBase

__all__ = ["tck"]


def load_factory(spec: str) -> Callable[..., Any]:
    """Import ``MODULE:ATTR[.ATTR...]`` and return the callable it names.

    Raises:
        click.BadParameter: the spec is malformed, the import fails, or the object is not
            callable.
    """
    module_name, sep, attr_path = spec.partition(":")
    if not sep or not module_name or not attr_path:
        raise click.BadParameter(f"{spec!r} is not of the form MODULE:FACTORY")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        target: Any = importlib.import_module(module_name)
    except Exception as exc:
        raise click.BadParameter(f"cannot import {module_name!r}: {exc}") from exc
    for part in attr_path.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise click.BadParameter(f"{module_name!r} has no attribute {attr_path!r}") from None
    if not callable(target):
        raise click.BadParameter(f"{spec!r} is not callable")
    return target  # type: ignore[no-any-return]


def _rule_key(result: CaseResult) -> tuple[int, int, str]:
    rule = result.case.rule
    major, _, minor = rule.partition(".")
    if major.isdigit() and minor.isdigit():
        return (int(major), int(minor), result.case.name)
    return (0, 0, result.case.name)


def _print_report(report: Report, *, title: str) -> None:
    from rich.console import Console  # noqa: PLC0415
    from rich.table import Table  # noqa: PLC0415

    from ..tck import Outcome  # noqa: PLC0415

    console = Console()
    if not console.is_terminal:  # a log or a pipe: keep each test on one line
        console = Console(width=240)
    table = Table(title=title, show_lines=False)
    table.add_column("rule", no_wrap=True)
    table.add_column("test", overflow="fold")
    table.add_column("class", no_wrap=True)
    table.add_column("outcome", no_wrap=True)
    table.add_column("reason", overflow="fold")
    styles = {Outcome.PASSED: "green", Outcome.FAILED: "bold red", Outcome.SKIPPED: "yellow"}
    for result in sorted(report.results, key=_rule_key):
        style = styles[result.outcome]
        table.add_row(
            result.case.rule,
            result.case.name.removeprefix("test_"),
            str(result.case.kind),
            f"[{style}]{result.outcome}[/{style}]",
            result.message,
        )
    console.print(table)
    click.echo(f"{report.summary_line} in {report.duration:.2f} s")


def _run(
    verification: type[VerificationBase],
    *,
    title: str,
    timeout: float | None,
    case_timeout: float | None,
    json_path: str | None,
    select: str | None,
    debug: bool,
) -> None:
    from ..tck import TestEnvironment, run_verification  # noqa: PLC0415

    overrides: dict[str, Any] = {}
    if timeout is not None:
        overrides["timeout"] = timeout
    if case_timeout is not None:
        overrides["case_timeout"] = case_timeout
    if debug:
        overrides["debug"] = True
    try:
        env = TestEnvironment.from_env(**overrides)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from exc
    report = run_verification(
        verification,
        env=env,
        select=None if select is None else (lambda name: select in name),
    )
    _print_report(report, title=title)
    if json_path is not None:
        with open(json_path, "w", encoding="utf-8") as handle:
            json.dump(report.to_json(), handle, indent=2)
            handle.write("\n")
    sys.exit(0 if report.ok else 1)


def _common(func: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        click.option(
            "--timeout",
            type=click.FloatRange(min=0, min_open=True),
            help="Seconds to wait for an expected signal (default 0.5, or RS_TCK_TIMEOUT).",
        ),
        click.option(
            "--case-timeout",
            type=click.FloatRange(min=0, min_open=True),
            help="Seconds after which one hanging test fails (default 10).",
        ),
        click.option(
            "--json",
            "json_path",
            type=click.Path(dir_okay=False, writable=True),
            help="Also write the results as JSON to this file.",
        ),
        click.option("-k", "--select", help="Run only the tests whose name contains this."),
        click.option("--debug", is_flag=True, help="Print [TCK-DEBUG] lines to stderr."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


@click.group("tck")
def tck() -> None:
    """Run the Reactive Streams TCK against an implementation.

    Prints one row per test (rule, test, class, outcome, reason) and the closing line
    "N passed, N failed, N skipped". Exits with 1 when a required test failed.
    """


@tck.command("publisher")
@click.argument("factory")
@click.option(
    "--failed",
    "failed_factory",
    metavar="MODULE:FACTORY",
    help="A zero-argument factory of a publisher that fails (runs the Rule 1.4/1.9 tests).",
)
@click.option(
    "--max-elements",
    type=click.IntRange(min=0),
    help="The most elements FACTORY can produce (max_elements_from_publisher).",
)
@click.option(
    "--recursion-depth",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="bounded_depth_of_on_next_and_request_recursion (Rule 3.3).",
)
@click.option("--skip-stochastic", is_flag=True, help="Skip the stochastic tests.")
@_common
def publisher_command(
    factory: str,
    failed_factory: str | None,
    max_elements: int | None,
    recursion_depth: int,
    skip_stochastic: bool,
    **common: Any,
) -> None:
    """Verify a publisher; FACTORY is MODULE:NAME of f(elements: int) -> Publisher.

    elements == MAX_DEMAND asks for an infinite stream.
    """
    from ..tck import PublisherVerification  # noqa: PLC0415

    create = load_factory(factory)
    create_failed = None if failed_factory is None else load_factory(failed_factory)
    attributes: dict[str, Any] = {
        "create_publisher": lambda self, elements: create(elements),
        "create_failed_publisher": lambda self: None if create_failed is None else create_failed(),
        "bounded_depth_of_on_next_and_request_recursion": recursion_depth,
        "skip_stochastic_tests": skip_stochastic,
    }
    if max_elements is not None:
        attributes["max_elements_from_publisher"] = max_elements
    verification = type("CliPublisherVerification", (PublisherVerification,), attributes)
    _run(verification, title=f"TCK: publisher {factory}", **common)


@tck.command("subscriber")
@click.argument("factory")
@_common
def subscriber_command(factory: str, **common: Any) -> None:
    """Verify a subscriber (blackbox); FACTORY is MODULE:NAME of f() -> Subscriber."""
    from ..tck import SubscriberBlackboxVerification  # noqa: PLC0415

    create = load_factory(factory)
    verification = type(
        "CliSubscriberVerification",
        (SubscriberBlackboxVerification,),
        {"create_subscriber": lambda self: create()},
    )
    _run(verification, title=f"TCK: subscriber {factory}", **common)


@tck.command("processor")
@click.argument("factory")
@click.option(
    "--max-subscribers",
    type=click.IntRange(min=1),
    help="The most subscribers the processor supports (max_supported_subscribers).",
)
@_common
def processor_command(factory: str, max_subscribers: int | None, **common: Any) -> None:
    """Verify an identity processor; FACTORY is MODULE:NAME of f(buffer_size: int) -> Processor."""
    from ..tck import IdentityProcessorVerification  # noqa: PLC0415

    create = load_factory(factory)
    attributes: dict[str, Any] = {
        "create_identity_processor": lambda self, buffer_size: create(buffer_size),
    }
    if max_subscribers is not None:
        attributes["max_supported_subscribers"] = max_subscribers
    verification = type("CliProcessorVerification", (IdentityProcessorVerification,), attributes)
    _run(verification, title=f"TCK: processor {factory}", **common)
