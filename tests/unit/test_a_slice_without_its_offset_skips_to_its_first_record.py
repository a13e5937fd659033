"""A slice read without its byte offset (one named in a job's works) skips to its first record and reads exactly its own.

The skip counts line ends a chunk at a time (worker_sdk.readers): these
cases hold it to reading line by line, across every boundary a chunk or a
block can fall on (sizes patched down to a few bytes), with CRLF ends,
empty lines, lines longer than a chunk and a last line without an end; and
to TFRecords of uneven lengths, skipped by their headers.
"""

import random
import struct

import pytest

from worker_sdk import readers

pytestmark = pytest.mark.timeout(60)

SIZES = [(64 * 1024, 4 * 1024), (16, 4), (5, 2), (1, 1)]


@pytest.fixture(params=SIZES, ids=lambda size: f"chunk{size[0]}-block{size[1]}")
def skip_sizes(request, monkeypatch):
    chunk, block = request.param
    monkeypatch.setattr(readers, "SKIP_CHUNK", chunk)
    monkeypatch.setattr(readers, "SKIP_BLOCK", block)


def uneven_lines(count: int) -> list[bytes]:
    rng = random.Random(7)
    lines = []
    for i in range(count):
        length = rng.choice([0, 1, 3, 20, 70, 5000]) if i % 97 else 100_000  # some longer than a chunk
        lines.append(bytes(rng.choice(b"abcdefgh,;") for _ in range(length)))
    return lines


def write_lines(path, lines: list[bytes]) -> list[int]:
    """Writes ``lines`` (CRLF every third, no end after the last); returns each line's byte."""
    starts, data = [], bytearray()
    for i, line in enumerate(lines):
        starts.append(len(data))
        data += line
        if i < len(lines) - 1:
            data += b"\r\n" if i % 3 == 0 else b"\n"
    path.write_bytes(bytes(data))
    return starts


def test_a_csv_slice_reads_its_own_records_from_any_start(tmp_path, skip_sizes):
    lines = uneven_lines(400)
    path = tmp_path / "uneven.csv"
    starts = write_lines(path, lines)
    for start in [0, 1, 2, 3, 50, 96, 97, 98, 200, 398, 399]:
        for end in sorted({start + 1, min(start + 37, 400), 400}):
            item = f"{path}?start={start}&end={end}"
            assert list(readers.records(item)) == lines[start:end], (start, end)
            assert list(readers.records(item, starts[start])) == lines[start:end]
            for known in {0, start // 2, start}:  # a split's remainder: seek to a record at or before its start
                assert list(readers.records(item, seek=(known, starts[known]))) == lines[start:end]


def test_a_slice_past_the_files_end_is_refused(tmp_path, skip_sizes):
    lines = uneven_lines(30)
    path = tmp_path / "short.csv"
    write_lines(path, lines)
    with pytest.raises(ValueError, match="the file ended after 0 of the slice's 5 records"):
        list(readers.records(f"{path}?start=40&end=45"))
    with pytest.raises(ValueError, match="the file ended after 2 of the slice's 5 records"):
        list(readers.records(f"{path}?start=28&end=33"))


def write_tfrecords(path, records: list[bytes]) -> None:
    with open(path, "wb") as handle:
        for record in records:
            handle.write(struct.pack("<Q", len(record)) + b"\0" * 4 + record + b"\0" * 4)


def test_a_tfrecord_slice_reads_its_own_records_from_any_start(tmp_path):
    rng = random.Random(3)
    records = [bytes(rng.randrange(256) for _ in range(rng.choice([0, 1, 9, 300, 4000]))) for _ in range(120)]
    path = tmp_path / "uneven.tfrecord"
    write_tfrecords(path, records)
    for start in [0, 1, 59, 118, 119]:
        for end in sorted({start + 1, 120}):
            assert list(readers.records(f"{path}?start={start}&end={end}")) == records[start:end]
    with pytest.raises(ValueError, match="the file ended after 0 of the slice's 2 records"):
        list(readers.records(f"{path}?start=125&end=127"))
