"""server.sources on its own: URLs, format overrides, indexes."""

import pytest

from server import sources

from .data import write_csv, write_tfrecord


def test_file_urls_and_plain_paths_count_alike(tmp_path):
    path = write_csv(tmp_path / "a.csv", 1234)
    plain, url = sources.expand(str(path))[0], sources.expand(f"file://{path}")[0]
    for work in (plain, url):
        sources.count(work)
    assert plain.records == url.records == 1234
    assert url.path == f"file://{path}"


def test_a_format_suffix_overrides_the_extension(tmp_path):
    path = write_tfrecord(tmp_path / "records.bin", 40)
    work = sources.expand(f"{path}#format=tfrecord")[0]
    sources.count(work)
    assert (work.format, work.records, work.path) == ("tfrecord", 40, str(path))
    with pytest.raises(sources.SourceError, match="unknown format 'xml'"):
        sources.expand(f"{path}#format=xml")


@pytest.mark.parametrize("records", [1, 255, 256, 257, 1000])
def test_every_slice_start_offset_points_at_its_record(tmp_path, records):
    path = write_csv(tmp_path / "lines.csv", records)
    work = sources.expand(str(path))[0]
    sources.count(work)
    lines = path.read_bytes().splitlines(keepends=True)
    starts = list(range(records))
    expected = [sum(len(line) for line in lines[:i]) for i in starts]
    assert sources.offsets_of(work, starts) == expected


def test_a_last_line_without_newline_counts(tmp_path):
    path = tmp_path / "x.txt"
    path.write_bytes(b"a\nb\nc")
    work = sources.expand(str(path))[0]
    sources.count(work)
    assert work.records == 3 and sources.offsets_of(work, [2]) == [4]
