"""Followed files under housekeeping: moved, deleted, replaced, swapped for links, slow writers.

Each case is exact (a consumer that reads from its committed offsets gets every record
once) or refused for that file alone, with a one-line error naming it.
"""

from __future__ import annotations

import os
import shutil
import time
from typing import TYPE_CHECKING

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
import pytest

from reactive_streams.files import (
    FileChangedError,
    FileFollower,
    FilePartitions,
    InputFile,
    list_files,
    plan_splits,
)
from reactive_streams.testing import RecordingSubscriber

if TYPE_CHECKING:
    from pathlib import Path

SCHEMA = pa.schema([("id", pa.int64())])
TIMEOUT = 10.0
PARTITIONS = 2


def write_csv(path: Path, first: int, count: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("id\n" + "".join(f"{i}\n" for i in range(first, first + count)))


def ids(batches: list[pa.RecordBatch]) -> list[int]:
    return [value for b in batches for value in b.column("id").to_pylist()]


def read(source: FilePartitions, partition: int, start: int) -> RecordingSubscriber[pa.RecordBatch]:
    """A reader of what ``partition`` has now from ``start`` (delivered on this thread)."""
    reader = RecordingSubscriber[pa.RecordBatch](initial_request=1_000)
    source.open(partition, start).subscribe(reader)
    if not reader.terminated:
        assert reader.subscription is not None
        reader.subscription.cancel()
    return reader


class Consumer:
    """Reads every partition from its committed offset, then commits what it read."""

    def __init__(self, source: FilePartitions) -> None:
        self.source = source
        self.offsets = [0] * source.partitions
        self.rows: list[int] = []

    def consume(self) -> list[int]:
        new: list[int] = []
        for partition in range(self.source.partitions):
            reader = read(self.source, partition, self.offsets[partition])
            assert reader.error is None, reader.error
            got = ids(reader.elements)
            self.offsets[partition] += len(got)
            self.source.commit(partition, self.offsets[partition])
            new += got
        self.rows += new
        return sorted(new)

    def offsets_answer(self) -> list[int]:
        """What the route's ``.offsets`` answers: every partition's high water."""
        return [self.source.high_water(p) for p in range(self.source.partitions)]


def follow(directory: Path, **listing: object) -> tuple[FilePartitions, FileFollower]:
    def list_now() -> list[InputFile]:
        try:
            return list_files(directory, **listing)  # type: ignore[arg-type]
        except FileNotFoundError:
            return []  # no data file now (as the commands list a followed directory)

    files = list_now()
    source = FilePartitions.plan(
        files, schema=SCHEMA, partitions=PARTITIONS, batch_rows=4, live=True
    )
    follower = FileFollower(
        source,
        list_now,
        known=[item.path for item in files],
        interval=60,
    )
    return source, follower


def read_a_first(directory: Path) -> tuple[FileFollower, Consumer]:
    """A followed ``directory`` whose a.csv (ids 0 to 3) was read and committed."""
    write_csv(directory / "a.csv", 0, 4)
    source, follower = follow(directory)
    consumer = Consumer(source)
    assert consumer.consume() == [0, 1, 2, 3]
    return follower, consumer


def take(follower: FileFollower) -> int:
    """Two looks: a file whose identity held still between them is taken."""
    return follower.poll() + follower.poll()


@pytest.mark.parametrize("where", ["done/a.csv", "elsewhere.csv", "deleted"])
def test_a_read_and_committed_file_may_be_moved_or_deleted(tmp_path: Path, where: str) -> None:
    write_csv(tmp_path / "a.csv", 0, 100)
    source, follower = follow(tmp_path)
    consumer = Consumer(source)
    assert consumer.consume() == list(range(100))
    if where == "deleted":
        (tmp_path / "a.csv").unlink()
    else:
        (tmp_path / where).parent.mkdir(exist_ok=True)
        (tmp_path / "a.csv").rename(tmp_path / where)
    assert take(follower) == 0  # known by identity wherever it lands: never read twice
    assert consumer.offsets_answer() == [50, 50]  # the offsets do not fail
    write_csv(tmp_path / "b.csv", 100, 10)
    assert take(follower) == 10
    assert consumer.consume() == list(range(100, 110))
    assert sorted(consumer.rows) == list(range(110))  # exact: no duplicate, none lost
    assert follower.files == 1


def test_a_file_moved_before_it_was_read_is_read_where_it_lands(tmp_path: Path) -> None:
    write_csv(tmp_path / "a.csv", 0, 10)
    source, follower = follow(tmp_path)
    write_csv(tmp_path / "b.csv", 10, 10)
    assert take(follower) == 10
    consumer = Consumer(source)
    (tmp_path / "done").mkdir()
    (tmp_path / "b.csv").rename(tmp_path / "done" / "b.csv")
    (tmp_path / "a.csv").rename(tmp_path / "done" / "a.csv")
    assert take(follower) == 0
    assert consumer.consume() == list(range(20))


def test_a_file_swapped_for_a_link_with_its_size_and_mtime_is_refused(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    directory = tmp_path / "in"
    write_csv(directory / "a.csv", 0, 8)
    write_csv(directory / "decoy.csv", 8, 8)
    secret = tmp_path / "secret.csv"
    secret.write_text((directory / "decoy.csv").read_text().replace("1", "7"))
    secret.chmod(0o600)
    source, _ = follow(directory)
    decoy = directory / "decoy.csv"
    planned = decoy.stat()
    decoy.unlink()
    decoy.symlink_to(secret)
    os.utime(secret, ns=(planned.st_atime_ns, planned.st_mtime_ns))
    assert decoy.stat().st_size == planned.st_size  # the same size and mtime, read through
    # Partition 0 holds a.csv's records, partition 1 the decoy's.
    good = read(source, 0, 0)
    assert ids(good.elements) == list(range(8)) and good.error is None
    refused = read(source, 1, 0)
    assert isinstance(refused.error, FileChangedError)
    assert str(refused.error).startswith(f"input file {decoy} is a symbolic link now")
    assert "\n" not in str(refused.error)
    assert refused.elements == []  # nothing of the secret file
    assert f"partition 1 refused: input file {decoy} is a symbolic link now" in caplog.text
    assert [source.high_water(p) for p in range(PARTITIONS)] == [8, 8]


def test_a_link_put_in_place_of_a_listed_file_before_planning_is_refused(tmp_path: Path) -> None:
    write_csv(tmp_path / "in" / "a.csv", 0, 3)
    write_csv(tmp_path / "secret.csv", 100, 3)
    (listed,) = list_files(tmp_path / "in")
    assert not listed.follow_symlink
    listed.path.unlink()
    listed.path.symlink_to(tmp_path / "secret.csv")
    with pytest.raises(FileChangedError, match=r"a\.csv is a symbolic link now"):
        plan_splits([listed])
    fifo = tmp_path / "in" / "b.csv"
    os.mkfifo(fifo)  # would block a reader forever
    with pytest.raises(FileChangedError, match=r"b\.csv is not a regular file"):
        plan_splits([InputFile.of(fifo)])


def _after_the_clock_tick(status: os.stat_result, directory: Path) -> None:
    """Wait until a change now gets a later ctime than ``status`` (a coarse clock)."""
    probe = directory / "_probe"
    deadline = time.monotonic() + TIMEOUT
    probe.touch()
    while probe.stat().st_ctime_ns <= status.st_ctime_ns:
        assert time.monotonic() < deadline
        time.sleep(0.001)
        probe.chmod(0o644)
    probe.unlink()


@pytest.mark.parametrize("how", ["cp -p", "rsync -t"])
def test_a_file_replaced_with_its_size_and_mtime_is_never_read_on(tmp_path: Path, how: str) -> None:
    directory = tmp_path / "in"
    write_csv(directory / "a.csv", 10, 20)
    source, follower = follow(directory)
    path = directory / "a.csv"
    before = path.stat()
    reader = RecordingSubscriber[pa.RecordBatch](initial_request=1)
    source.open(0, 0).subscribe(reader)
    assert ids(reader.elements) == [10, 11, 12, 13]
    write_csv(tmp_path / "new.csv", 50, 20)  # the same size: two digits each
    new = tmp_path / "new.csv"
    os.utime(new, ns=(before.st_atime_ns, before.st_mtime_ns))
    _after_the_clock_tick(before, tmp_path)
    if how == "cp -p":
        shutil.copy2(new, path)  # rewrites the same inode, then puts the mtime back
        assert path.stat().st_ino == before.st_ino
    else:
        shutil.copy2(new, directory / ".a.csv.tmp")
        os.replace(directory / ".a.csv.tmp", path)
    assert (path.stat().st_size, path.stat().st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    for partition, start in ((0, 4), (1, 0)):
        failed = read(source, partition, start)
        assert isinstance(failed.error, FileChangedError), failed.elements
        assert str(failed.error).startswith(f"input file {path} changed after it was planned")
        assert failed.elements == []
    reader.request(1)  # the reader that had the file open refuses it too
    assert reader.wait_terminated(TIMEOUT)
    assert isinstance(reader.error, FileChangedError)
    assert ids(reader.elements) == [10, 11, 12, 13]
    # Known by identity: the same inode is the file taken already; another inode is a new
    # file, taken whole, and read from its own first record.
    assert take(follower) == (0 if how == "cp -p" else 20)


def test_a_writer_that_pauses_delays_only_its_own_file(tmp_path: Path) -> None:
    follower, consumer = read_a_first(tmp_path)
    with (tmp_path / "slow.csv").open("w") as writer:
        writer.write("id\n4\n5\n")
        writer.flush()
        assert take(follower) == 0  # its size held still, but it is open for writing
        write_csv(tmp_path / "quick.csv", 100, 4)
        assert take(follower) == 4  # the route goes on
        assert consumer.consume() == [100, 101, 102, 103]
        assert consumer.offsets_answer() == [4, 4]
        writer.write("6\n7\n")
    assert take(follower) == 4  # closed: taken whole
    assert consumer.consume() == [4, 5, 6, 7]
    assert sorted(consumer.rows) == [0, 1, 2, 3, 4, 5, 6, 7, 100, 101, 102, 103]


def test_a_file_kept_open_for_writing_is_not_taken_until_closed(tmp_path: Path) -> None:
    write_csv(tmp_path / "in" / "a.csv", 0, 2)
    source, follower = follow(tmp_path / "in")
    consumer = Consumer(source)
    path = tmp_path / "in" / "b.csv"
    write_csv(path, 2, 6)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        for _ in range(3):
            assert take(follower) == 0
        assert consumer.consume() == [0, 1]
    finally:
        os.close(fd)
    assert take(follower) == 6
    assert consumer.consume() == list(range(2, 8))


def test_hidden_and_temporary_names_wait_until_they_are_renamed(tmp_path: Path) -> None:
    write_csv(tmp_path / "a.csv", 0, 2)
    source, follower = follow(tmp_path, format="csv")
    for name in ("b.csv.tmp", "b.csv.part", "b.csv.crdownload", ".b.csv", "_b.csv"):
        write_csv(tmp_path / name, 2, 3)
    assert take(follower) == 0
    (tmp_path / "b.csv.part").rename(tmp_path / "b.csv")
    assert take(follower) == 3
    consumer = Consumer(source)
    assert consumer.consume() == [0, 1, 2, 3, 4]


def test_a_taken_file_that_grows_is_left_out_and_the_route_goes_on(tmp_path: Path) -> None:
    follower, consumer = read_a_first(tmp_path)
    with (tmp_path / "a.csv").open("a") as out:
        out.write("4\n")
    assert take(follower) == 0  # appended to after it was taken: not read again
    write_csv(tmp_path / "b.csv", 10, 2)
    assert take(follower) == 2
    assert consumer.consume() == [10, 11]
