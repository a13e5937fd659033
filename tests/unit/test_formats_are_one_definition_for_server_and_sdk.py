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


def test_a_postgres_table_slice_keeps_its_table_and_snapshot_in_the_path():
    work = "postgresql://warehouse?table=public.events&key=a,b"
    pinned = formats.table_slice_path(work, "100:105:101,103")
    item = formats.slice_item(pinned, 10, 20)
    assert item == f"{pinned}&start=10&end=20"
    assert formats.parse(item) == formats.Slice(pinned, 10, 20, formats.POSTGRES)
    assert formats.parse(work) == formats.Slice(work, None, None, formats.POSTGRES)


@pytest.mark.parametrize(
    "work, kind",
    [
        ("postgresql://h/db?table=t", "postgres"),
        ("postgres://h/db?table=t", "postgres"),
        ("delta:///data/events", "delta"),
        ("delta+s3://bucket/events", "delta"),
        ("iceberg://lake/db.events", "iceberg"),
        ("/data/events.parquet", None),
        ("s3://bucket/events.parquet", None),
    ],
)
def test_a_table_is_known_by_its_scheme(work, kind):
    assert formats.table_kind(work) == kind


@pytest.mark.parametrize(
    "work, problem",
    [
        ("postgresql://u:hunter2@h/db?table=t", "must not carry a password"),
        ("postgresql://u@h/db?table=t&password=hunter2", "must not carry a password"),
        ("postgresql://h", "name the table"),
        ("postgresql://h?table=t&statement=drop", "parameter(s) statement refused"),
        ("postgresql://h?table=t&dbname=shardline", "parameter(s) dbname refused"),
        ("postgresql://u@h/db?table=t", "names a connection, never a host, port, database or user"),
        ("delta:///d?version=latest", "version must be a number"),
        ("delta:///d?where=nothing", "where takes column=value conditions"),
        ("iceberg://lake/events", "name the catalog and the table"),
    ],
)
def test_a_table_work_that_carries_a_secret_or_lacks_its_name_is_refused(work, problem):
    with pytest.raises(formats.FormatError, match=re.escape(problem)) as refused:
        formats.check_table(work)
    assert "hunter2" not in str(refused.value)


def test_the_item_name_function_spells_a_pieces_range_as_slice_item_does(db):
    from django.db import connection

    pinned = formats.table_slice_path("postgresql://h/db?table=t", "5:9:6")
    for unit in (formats.slice_item("/d/a.csv", 0, 100), formats.slice_item(pinned, 0, 100)):
        with connection.cursor() as cursor:
            cursor.execute("SELECT shardline_item_name(%s, 40, 60)", [unit])
            assert cursor.fetchone()[0] == unit.replace("start=0&end=100", "start=40&end=60")
