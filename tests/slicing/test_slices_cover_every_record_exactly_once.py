"""Parquet, CSV and TFRecord works sliced by a real Celery worker, read back through the SDK readers."""

from collections import Counter, defaultdict
from urllib.parse import parse_qs

import pytest

from worker_sdk import readers

from .conftest import drain
from .data import write_csv, write_parquet, write_tfrecord


def all_records(paths):
    records = []
    for path in paths:
        records += [r if not isinstance(r, dict) else tuple(sorted(r.items())) for r in readers.records(str(path))]
    return records


def read_back(leases):
    records = []
    for item, offset in leases:
        records += [r if not isinstance(r, dict) else tuple(sorted(r.items())) for r in readers.records(item, offset)]
    return records


def ranges_by_file(leases):
    ranges = defaultdict(list)
    for item, _offset in leases:
        path, _, query = item.rpartition("?")
        params = parse_qs(query)
        ranges[path].append((int(params["start"][0]), int(params["end"][0])))
    return ranges


@pytest.mark.smoke
def test_mixed_formats_are_sliced_without_gaps_or_overlaps(make_job, live_api, tmp_path):
    works = [
        write_csv(tmp_path / "big.csv", 1000),
        write_csv(tmp_path / "small.csv", 7),
        write_tfrecord(tmp_path / "a.tfrecord", 300),
        write_parquet(tmp_path / "t.parquet", 450, row_group_size=64),
    ]
    (tmp_path / "empty.csv").write_text("")
    job = make_job([*works, tmp_path / "empty.csv"], num_slices=40)
    assert job["state"] == "ready", job["error"]
    assert job["slicing_progress"]["works_inspected"] == 5
    assert job["slicing_progress"]["records_counted"] == 1000 + 7 + 300 + 450

    leases = drain(live_api("worker"), job["id"])
    assert job["units_count"] == len(leases) == 40
    ranges = ranges_by_file(leases)
    assert str(tmp_path / "empty.csv") not in ranges  # an empty work gives no item
    for path, spans in ranges.items():
        spans.sort()
        assert spans[0][0] == 0
        assert all(a[1] == b[0] for a, b in zip(spans, spans[1:])), f"gap or overlap in {path}"
        sizes = {end - start for start, end in spans}
        assert max(sizes) - min(sizes) <= 1, (path, sizes)
    # Proportional: the 1000-line file gets the most slices, the 7-line one at least one.
    assert len(ranges[str(works[0])]) > len(ranges[str(works[3])]) > len(ranges[str(works[2])]) >= 1
    assert len(ranges[str(works[1])]) >= 1

    assert Counter(read_back(leases)) == Counter(all_records(works))


def test_directories_and_globs_expand_to_their_files_in_order(make_job, live_api, tmp_path):
    folder = tmp_path / "parts"
    folder.mkdir()
    for index in range(3):
        write_csv(folder / f"part-{index}.csv", 20)
    globbed = [write_tfrecord(tmp_path / f"shard-{index}.tfrecord", 10) for index in range(2)]
    job = make_job([folder, tmp_path / "shard-*.tfrecord"], num_slices=10)
    assert job["state"] == "ready", job["error"]
    leases = drain(live_api("worker"), job["id"])
    files = list(dict.fromkeys(item.rpartition("?")[0] for item, _ in leases))
    assert files == [str(folder / f"part-{i}.csv") for i in range(3)] + [str(p) for p in globbed]
    assert Counter(read_back(leases)) == Counter(all_records([folder / f"part-{i}.csv" for i in range(3)] + globbed))


def test_works_without_a_known_format_stay_one_item_each(make_job, live_api, tmp_path):
    blob = tmp_path / "model.bin"
    blob.write_bytes(b"\x00\x01")
    job = make_job([blob, write_csv(tmp_path / "x.csv", 30)], num_slices=4)
    items = [item for item, _ in drain(live_api("worker"), job["id"])]
    assert items[0] == str(blob)
    assert len(items) == 4 and all("?start=" in item for item in items[1:])
