"""Every ```python block of README.md and docs/*.md runs as written, each on its own.

A block whose first line starts with ``>>>`` runs as a doctest (ELLIPSIS), any other block
with ``exec``; each gets fresh globals, so a block must import what it uses. Blocks that
use Spark (they import ``reactive_streams.spark`` or ``pyspark``) carry the ``spark``
marker and run on one shared local session: their ``local_session()`` calls get it back
(``getOrCreate``) instead of starting another.
"""

from __future__ import annotations

import doctest
import importlib.util
import os
import re
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from collections.abc import Iterator

    from pyspark.sql import SparkSession

ROOT = Path(__file__).resolve().parent.parent
FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)
_SPARK = re.compile(r"\b(reactive_streams\.spark|pyspark)\b")


def _blocks() -> list[tuple[str, str]]:
    found = []
    for path in FILES:
        text = path.read_text(encoding="utf-8")
        for index, block in enumerate(_BLOCK.findall(text)):
            found.append((f"{path.relative_to(ROOT).as_posix()}:{index}", block))
    return found


BLOCKS = _blocks()
_SPARK_READY = (
    importlib.util.find_spec("pyspark") is not None
    and importlib.util.find_spec("pyarrow") is not None
    and (shutil.which("java") is not None or bool(os.environ.get("JAVA_HOME")))
)


def _param(name: str, block: str) -> object:
    if not _SPARK.search(block):
        return pytest.param(name, block, id=name)
    marks = [
        pytest.mark.spark,
        pytest.mark.timeout(300),
        pytest.mark.skipif(not _SPARK_READY, reason="needs pyspark, pyarrow and Java 17+"),
    ]
    return pytest.param(name, block, id=name, marks=marks)


@pytest.fixture(scope="module")
def docs_spark() -> Iterator[SparkSession]:
    """The session the Spark blocks share (the suite's own, if tests/spark started it)."""
    from reactive_streams.spark.session import local_session

    session = local_session("local[2]", app_name="reactive-streams-tests")
    try:
        yield session
    finally:
        for query in session.streams.active:
            query.stop()


def test_the_docs_have_examples() -> None:
    files = {name.split(":")[0] for name, _ in BLOCKS}
    assert {"README.md", "docs/operators.md", "docs/spark.md", "docs/tck.md"} <= files
    assert len(files) >= 8
    assert len(BLOCKS) >= 30


@pytest.mark.parametrize(("name", "block"), [_param(name, block) for name, block in BLOCKS])
def test_doc_block_runs(
    name: str, block: str, request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str]
) -> None:
    if _SPARK.search(block):
        request.getfixturevalue("docs_spark")  # started here, not by the block
    if block.lstrip().startswith(">>>"):
        test = doctest.DocTestParser().get_doctest(
            block, {"__name__": "doc_example"}, name, name, 0
        )
        runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
        report: list[str] = []
        runner.run(test, out=report.append)
        assert runner.failures == 0, "".join(report)
        assert runner.tries > 0
    else:
        exec(compile(block, name, "exec"), {"__name__": "doc_example"})
    capsys.readouterr()


def _documented_options(text: str) -> set[str]:
    """``--options`` in code spans that start with one, and on ``reactive-streams pipeline``
    command lines."""
    found = set(re.findall(r"`(--[a-z][a-z-]*)[^`]*`", text))
    for line in text.splitlines():
        if "reactive-streams pipeline" in line:
            found |= set(re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", line))
    return found


def test_the_pipeline_docs_name_only_options_that_exist_and_table_them_all() -> None:
    pytest.importorskip("click")
    from reactive_streams.cli import main

    command = main.commands["pipeline"]
    options = {name for param in command.params for name in param.opts if name.startswith("--")}
    options.discard("--help")
    pipeline_md = (ROOT / "docs" / "pipeline.md").read_text(encoding="utf-8")
    for text in (pipeline_md, (ROOT / "README.md").read_text(encoding="utf-8")):
        # Before: docs/pipeline.md documented a --chunk-rows the command did not have.
        assert _documented_options(text) <= options
    first_cells = re.findall(r"^\| (`--[^|]*)\|", pipeline_md, re.MULTILINE)
    table = {name for cell in first_cells for name in re.findall(r"`(--[a-z][a-z-]*)", cell)}
    assert options - table == set()  # every option has a row in the Options table


def _shell_blocks(text: str) -> list[str]:
    """The fenced blocks of ``text`` marked ``bash`` or not marked at all."""
    blocks: list[str] = []
    lines: list[str] | None = None
    shell = False
    for line in text.splitlines():
        if not line.startswith("```"):
            if lines is not None:
                lines.append(line)
        elif lines is None:
            lines, shell = [], line.strip() in ("```", "```bash")
        else:
            if shell:
                blocks.append("\n".join(lines))
            lines = None
    return blocks


_COMMAND = re.compile(r"reactive-streams (\w+)(.*)$", re.MULTILINE)


def test_the_shell_examples_make_the_files_they_read() -> None:
    """A ``serve`` or ``pipeline`` example that reads a directory must say how to make it.

    Before: the README's two-terminal example served ``flights/``, which nothing wrote.
    Each block's local ``--input`` paths must be an earlier command's ``--output``.
    """
    for path in (ROOT / "README.md", ROOT / "docs" / "pipeline.md"):
        for block in _shell_blocks(path.read_text(encoding="utf-8")):
            written: set[str] = set()
            for name, arguments in _COMMAND.findall(block):
                read = re.findall(r"--input (\S+)", arguments)
                if name == "serve":
                    for given in read:
                        assert given in written, f"{path.name}: {given} is served unmade"
                written |= set(re.findall(r"--output (\S+)", arguments))


def test_the_readme_names_every_command() -> None:
    pytest.importorskip("click")
    from reactive_streams.cli import main

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    listed = readme.split("`reactive-streams --help` lists the commands:", 1)[1].split("\n\n")[0]
    assert {f"`{name}`" for name in main.commands} <= set(re.findall(r"`\w+`", listed))


def test_the_docs_do_not_deny_options_that_exist() -> None:
    """Before: docs/rsocket.md said ``--follow`` was "not part of this version" above the
    section documenting ``serve --follow``."""
    pytest.importorskip("click")
    from reactive_streams.cli import main

    options = {
        name
        for command in main.commands.values()
        for param in command.params
        for name in getattr(param, "opts", ())
    }
    for path in FILES:
        text = " ".join(path.read_text(encoding="utf-8").split())
        for sentence in re.findall(r"[^.]*not part of this version[^.]*", text):
            denied = set(re.findall(r"`(--[a-z][a-z-]*)`", sentence))
            assert not denied & options, f"{path.name}: {sentence.strip()}"
