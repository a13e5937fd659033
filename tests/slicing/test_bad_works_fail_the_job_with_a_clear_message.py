from .data import write_csv


def test_a_missing_file_fails_the_job_naming_it(make_job, live_api, tmp_path):
    good = write_csv(tmp_path / "good.csv", 10)
    job = make_job([good, tmp_path / "missing.csv"], num_slices=4)
    assert job["state"] == "failed"
    assert str(tmp_path / "missing.csv") in job["error"] and "no such file" in job["error"]
    take = live_api("worker").post(f"/api/v1/jobs/{job['id']}/leases/", {"worker": "w"})
    assert take.status_code == 409 and take.json()["error"] == "job_failed"


def test_a_corrupt_tfrecord_fails_the_job_naming_it(make_job, tmp_path):
    from .data import write_tfrecord

    path = write_tfrecord(tmp_path / "bad.tfrecord", 20)
    data = bytearray(path.read_bytes())
    data[len(data) // 2 : len(data) // 2 + 12] = b"\xff" * 12  # scribble over a record header
    path.write_bytes(bytes(data))
    job = make_job([path], num_slices=4)
    assert job["state"] == "failed"
    assert str(path) in job["error"] and "corrupt TFRecord" in job["error"]


def test_a_glob_matching_nothing_fails_the_job(make_job, tmp_path):
    job = make_job([tmp_path / "nothing-*.csv"], num_slices=2)
    assert job["state"] == "failed" and "matches no file" in job["error"]
