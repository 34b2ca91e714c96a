"""Followed files: a directory whose later files are appended, as a live partitioned route.

Two commands follow files: ``reactive-streams serve --follow`` serves them to other hosts,
and ``reactive-streams pipeline --input DIR --follow`` reads them itself. Both plan the
files here (``plan_file_partitions``: the files there now, cut into live
``FilePartitions``, and how to list them again). The pipeline then serves them on
loopback for the run (``FollowedFiles``), with a token of its own, and reads that route as
it reads any other (``RemoteRead``): Spark's executors ask for each partition from the
offset the query reached, with the micro-batch's budget as the demand, and a file that
lands later is one more range of every partition.
"""

from __future__ import annotations

import logging
import secrets
from typing import TYPE_CHECKING

from ..files import FileFollower, FilePartitions, list_files
from ..rsocket import partitioned_routes, serve
from ._errors import PipelineUsageError
from ._inputs import plan_inputs

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from pathlib import Path

    import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]

    from ..files import ConversionOptions, InputFile
    from ..rsocket import RSocketServer

__all__ = ["FollowedFiles", "plan_file_partitions"]

logger = logging.getLogger("reactive_streams.pipeline")

ROUTE = "followed"
"""The route name the pipeline serves its followed files under, on loopback."""


def plan_file_partitions(
    inputs: Sequence[Path],
    *,
    encoding: str,
    delimiter: str | None,
    quote: str | None,
    follow_symlinks: bool,
    schema: pa.Schema | None,
    options: ConversionOptions,
    partitions: int,
    batch_rows: int,
    follow: bool,
) -> tuple[FilePartitions, Callable[[], list[InputFile]], list[InputFile]]:
    """The files of ``inputs`` as partitions; with ``follow``, live ones.

    Args:
        inputs: files or directories (as ``plan_inputs`` takes them).
        encoding: the text encoding of CSV and JSON Lines files.
        delimiter: the CSV files' delimiter (``None``: a tab for ``.tsv``, else a comma).
        quote: the CSV files' quote character (``None``: never quoted).
        follow_symlinks: read symbolic links that point outside an input directory.
        schema: the records' schema; ``None``: inferred from the files.
        options: null text and timestamp forms.
        partitions: how many partitions (``>= 1``); later files are cut into as many.
        batch_rows: records per batch at most (``>= 1``).
        follow: more files may land (``FilePartitions(live=True)``); followed directories
            may then be empty at the start, if ``schema`` is given.

    Returns:
        ``(partitions, list_inputs, files)``: the partitions, a function listing the
        input's files now (for ``FileFollower``; ``[]`` while a followed directory has
        none), and the files planned now.

    Raises:
        PipelineUsageError: no file and no ``schema`` while following, or the input cannot
            be planned (``plan_inputs``' errors).
        FormatError, OSError, pyarrow.ArrowException: a file cannot be read.
        ValueError: ``partitions`` or ``batch_rows`` below 1.
    """

    def list_inputs() -> list[InputFile]:
        try:
            return list_files(
                inputs,
                encoding=encoding,
                delimiter=delimiter,
                quote=quote,
                follow_symlinks=follow_symlinks,
            )
        except FileNotFoundError:
            if not follow or not all(path.is_dir() for path in inputs):
                raise
            return []  # followed directories with no data file yet

    if follow and not list_inputs():
        if schema is None:
            raise PipelineUsageError(
                "--follow on directories with no data file yet needs --schema "
                "(there is nothing to infer it from)"
            )
        files: list[InputFile] = []
        planned_schema = schema  # nothing yet: the files will come
    else:
        plan = plan_inputs(
            inputs,
            encoding=encoding,
            delimiter=delimiter,
            quote=quote,
            follow_symlinks=follow_symlinks,
            schema=schema,
            options=options,
        )
        files, planned_schema = list(plan.files), plan.schema
    source = FilePartitions.plan(
        files,
        schema=planned_schema,
        partitions=partitions,
        batch_rows=batch_rows,
        options=options,
        live=follow,
    )
    return source, list_inputs, files


class FollowedFiles:
    """Followed files served on loopback for one run of the pipeline (``--follow``).

    Starts an RSocket server on ``127.0.0.1`` (a free port, a random bearer token) serving
    ``partitions`` as the live route ``ROUTE``, and a ``FileFollower`` that appends the
    files that land later. ``close`` stops both; the pipeline closes it at its end.

    Args:
        partitions: live partitions (``plan_file_partitions(..., follow=True)``).
        list_inputs: lists the input's files now.
        known: the files already planned into ``partitions``.
        interval: seconds between two looks for new files (``> 0``).

    Raises:
        OSError: the loopback server cannot listen.
        ValueError: ``partitions`` is not live, or ``interval`` is not positive.
    """

    def __init__(
        self,
        partitions: FilePartitions,
        list_inputs: Callable[[], Sequence[InputFile]],
        *,
        known: Sequence[InputFile],
        interval: float,
    ) -> None:
        self.token = secrets.token_urlsafe(24)
        self.partitions = partitions
        self._follower = FileFollower(
            partitions, list_inputs, interval=interval, known=[item.path for item in known]
        )
        self._server: RSocketServer = serve(
            partitioned_routes(ROUTE, partitions), "127.0.0.1", 0, token=self.token
        )
        self._follower.start()
        logger.info("following the input, served on loopback port %d", self._server.port)

    @property
    def url(self) -> str:
        """``rsocket://127.0.0.1:PORT/ROUTE``: the route, for ``--input``."""
        return f"rsocket://127.0.0.1:{self._server.port}/{ROUTE}"

    def close(self, timeout: float = 5.0) -> None:
        """Stop following and close the server (streams under way end); idempotent."""
        self._follower.stop()
        self._server.close(timeout)
