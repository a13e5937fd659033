"""A slice reader seeks to its offset and reads about its share of the file, not the whole file."""

import pytest

from server import sources
from server.services.slicing import plan
from worker_sdk import readers

from .data import write_csv, write_tfrecord


class CountingFile:
    def __init__(self, handle, counter):
        self.handle, self.counter = handle, counter

    def read(self, size=-1):
        data = self.handle.read(size)
        self.counter["bytes"] += len(data)
        return data

    def readline(self, size=-1):
        data = self.handle.readline(size)
        self.counter["bytes"] += len(data)
        return data

    def __iter__(self):
        for line in self.handle:
            self.counter["bytes"] += len(line)
            yield line

    def seek(self, *args):
        return self.handle.seek(*args)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.handle.close()


@pytest.fixture
def counted(monkeypatch):
    counter = {"bytes": 0}
    real_open = readers._open
    monkeypatch.setattr(readers, "_open", lambda path: CountingFile(real_open(path), counter))
    return counter


def sliced(path, slices):
    work = sources.expand(str(path))[0]
    sources.count(work)
    return plan([work], slices)


@pytest.mark.parametrize("writer, size", [(write_csv, 200_000), (write_tfrecord, 100_000)])
def test_one_slice_of_a_thousand_reads_about_a_thousandth_of_the_file(tmp_path, counted, writer, size):
    path = writer(tmp_path / ("data.csv" if writer is write_csv else "data.tfrecord"), size)
    units = sliced(path, 1000)
    assert len(units) == 1000
    item, offset, _start, _end, _source = units[500]
    records = list(readers.records(item, offset))
    assert len(records) == size // 1000
    file_size = path.stat().st_size
    # The share plus one read-ahead buffer; nowhere near the whole file.
    assert counted["bytes"] < file_size / 1000 + 64 * 1024
    assert counted["bytes"] < file_size / 20


def test_without_the_offset_a_reader_still_finds_its_records(tmp_path):
    path = write_csv(tmp_path / "data.csv", 1000)
    item, offset, _start, _end, _source = sliced(path, 10)[3]
    assert list(readers.records(item)) == list(readers.records(item, offset))
    assert readers.parse(item).start == 300


def test_malformed_slice_strings_are_refused():
    for item in ("/d.csv?start=5&end=2", "/d.csv?start=x&end=3", "/d.csv?start=-1&end=3"):
        with pytest.raises(ValueError, match="malformed slice"):
            readers.parse(item)


def test_a_format_named_by_suffix_reaches_the_reader_of_each_slice(tmp_path):
    # records.bin has no known extension: without the suffix on its slices a
    # reader would take the TFRecord bytes for lines.
    path = write_tfrecord(tmp_path / "records.bin", 40)
    work = sources.expand(f"{path}#format=tfrecord")[0]
    sources.count(work)
    units = plan([work], 4)
    assert [item for item, *_rest in units][0] == f"{path}?start=0&end=10#format=tfrecord"
    read = [record for item, offset, *_range in units for record in readers.records(item, offset)]
    assert read == list(readers.records(f"{path}#format=tfrecord")) and len(read) == 40
