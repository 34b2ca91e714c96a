"""The session helpers: Java detection, Spark Connect checks, the lazy import."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from reactive_streams import ReactiveStreamsError
from reactive_streams.spark import JavaNotFoundError, JavaVersionError, SparkConnectUnsupportedError
from reactive_streams.spark.session import (
    bridge_support,
    is_connect_session,
    parse_java_version,
    require_classic,
    require_java,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.mark.parametrize(
    ("output", "major", "version"),
    [
        ('openjdk version "17.0.15" 2025-04-15\nOpenJDK Runtime', 17, "17.0.15"),
        ('java version "1.8.0_292"\nJava(TM) SE Runtime', 8, "1.8.0_292"),
        ('openjdk version "21" 2023-09-19', 21, "21"),
        ('Picked up JAVA_TOOL_OPTIONS: -Xmx1g\nopenjdk version "11.0.2"', 11, "11.0.2"),
    ],
)
def test_parse_java_version(output: str, major: int, version: str) -> None:
    assert parse_java_version(output) == (major, version)


def test_parse_java_version_refuses_garbage() -> None:
    with pytest.raises(ValueError, match="no version found"):
        parse_java_version("command not found")


def _fake_java(tmp_path: Path, banner: str) -> Path:
    home = tmp_path / "jdk"
    (home / "bin").mkdir(parents=True)
    java = home / "bin" / "java"
    java.write_text(f"#!/bin/sh\necho '{banner}' >&2\n")
    java.chmod(java.stat().st_mode | stat.S_IXUSR)
    return home


@pytest.mark.spark
@pytest.mark.skipif(
    shutil.which("java") is None and not os.environ.get("JAVA_HOME"), reason="no Java here"
)
def test_require_java_finds_the_real_one() -> None:
    info = require_java(17)
    assert info.major >= 17
    assert os.path.isabs(info.path)


def test_require_java_too_old(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JAVA_HOME", str(_fake_java(tmp_path, 'java version "1.8.0_292"')))
    with pytest.raises(JavaVersionError, match=r"needs Java 17\+ .* is Java 1\.8\.0_292") as info:
        require_java(17)
    assert info.value.found == 8
    assert info.value.minimum == 17
    assert "apt-get install openjdk-17-jre-headless" in str(info.value)
    assert isinstance(info.value, ReactiveStreamsError)


def test_require_java_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(JavaNotFoundError, match="no `java` was found") as info:
        require_java()
    assert "openjdk-17-jre-headless" in str(info.value)


class _ConnectLike:
    """Stands in for pyspark.sql.connect.session.SparkSession (grpc is not installed here)."""


_ConnectLike.__module__ = "pyspark.sql.connect.session"


def test_connect_support_table() -> None:
    remote = _ConnectLike()
    assert is_connect_session(remote)
    assert bridge_support(remote) == {
        "from_dataframe": True,
        "from_splits": False,
        "from_streaming_query": False,
        "spark_processor": True,
        "to_spark_stream": False,
    }
    with pytest.raises(
        SparkConnectUnsupportedError,
        match=r"^from_streaming_query needs a classic",
    ):
        require_classic(remote, "from_streaming_query")
    require_classic(remote, "from_dataframe")  # supported: no error
    require_classic(object(), "to_spark_stream")  # classic: no error


def test_import_without_pyspark_gives_the_install_hint(tmp_path: Path) -> None:
    blocker = tmp_path / "pyspark"
    blocker.mkdir()
    (blocker / "__init__.py").write_text("raise ImportError('blocked for the test')\n")
    src = Path(__file__).resolve().parents[2] / "src"
    code = (
        "import sys, reactive_streams\n"
        "assert 'pyspark' not in sys.modules, 'import reactive_streams imported pyspark'\n"
        "try:\n"
        "    import reactive_streams.spark\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{src}"}
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=True,
    )
    assert "pip install 'reactive-streams-py[spark]'" in result.stdout


@pytest.mark.spark
def test_python_workers_import_the_installed_pyspark_not_the_zip(spark: SparkSession) -> None:
    import pyspark

    # A Python UDF runs in a worker Spark starts; it reports where it found pyspark.
    files = spark.sparkContext.parallelize([0], 1).map(lambda _: __import__("pyspark").__file__)
    (where,) = files.collect()
    assert isinstance(where, str)
    assert "pyspark.zip" not in where
    assert Path(where).resolve() == Path(pyspark.__file__).resolve()


def test_fast_worker_home_links_everything_but_the_zip(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from reactive_streams.spark._worker_home import fast_worker_home

    monkeypatch.delenv("SPARK_HOME", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    home = fast_worker_home()
    assert home is not None
    assert Path(home).parent == tmp_path / "reactive-streams"
    lib = Path(home) / "python" / "lib"
    assert not (lib / "pyspark.zip").exists()
    assert any(path.name.startswith("py4j") for path in lib.iterdir())
    assert (Path(home) / "bin" / "spark-submit").resolve().is_file()
    assert fast_worker_home() == home  # built once, then reused
    monkeypatch.setenv("SPARK_HOME", "/opt/spark")
    assert fast_worker_home() is None  # the user's SPARK_HOME wins
