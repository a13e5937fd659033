"""worker_sdk.formats: the one definition of formats and slices that the server writes and the readers parse."""

import re

import pytest

from worker_sdk import formats, readers


@pytest.mark.parametrize(
    "path, expected",
    [
        ("/d/a.csv", "lines"),
        ("/d/A.JSONL", "lines"),
        ("s3://b/x.tfrecords", "tfrecord"),
        ("/d/p.pq", "parquet"),
        ("/d/blob.bin", None),
        ("/d/csv", None),
    ],
)
def test_the_format_comes_from_the_extension(path, expected):
    assert formats.format_of(path) == expected


def test_a_suffix_names_the_format_and_an_unknown_one_is_refused():
    assert formats.split_format("/d/blob.bin#format=tfrecord") == ("/d/blob.bin", "tfrecord")
    assert formats.split_format("/d/a.csv") == ("/d/a.csv", None)
    with pytest.raises(formats.FormatError, match="unknown format 'xml'; use one of lines, tfrecord, parquet"):
        formats.split_format("/d/a#format=xml")


@pytest.mark.parametrize(
    "path, start, end, forced",
    [
        ("/d/a.csv", 0, 10, None),
        ("s3://b/k/part-1.tfrecord", 250, 500, None),
        ("/d/blob.bin", 3, 3, "tfrecord"),
        ("/d/a?b.csv", 1, 2, None),
    ],
)
def test_a_slice_item_parses_back_to_what_made_it(path, start, end, forced):
    item = formats.slice_item(path, start, end, forced)
    assert formats.parse(item) == formats.Slice(path, start, end, forced or formats.format_of(path))


@pytest.mark.parametrize(
    "item, problem",
    [
        ("/d.csv?start=5&end=2", "need 0 <= start <= end"),
        ("/d.csv?start=x&end=3", "start and end must be integers"),
        ("/d.csv?start=-1&end=3", "need 0 <= start <= end"),
        ("/d.csv?start=1", "a slice needs both start and end"),
        ("/d.csv?end=1", "a slice needs both start and end"),
    ],
)
def test_malformed_slices_are_refused_naming_the_problem(item, problem):
    with pytest.raises(formats.FormatError, match=re.escape(f"malformed slice {item!r}: {problem}")):
        formats.parse(item)


def test_a_query_that_is_not_a_slice_is_part_of_the_path():
    assert formats.parse("s3://b/a.csv?versionId=7") == formats.Slice("s3://b/a.csv?versionId=7", None, None, None)


def test_readers_read_a_work_of_unknown_format_as_lines(tmp_path):
    path = tmp_path / "notes"
    path.write_bytes(b"one\ntwo\n")
    assert readers.parse(str(path)).format == formats.READ_UNKNOWN_AS == "lines"
    assert list(readers.records(str(path))) == [b"one", b"two"]
