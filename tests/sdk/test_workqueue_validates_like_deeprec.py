"""Constructor checks happen before any network call (the URL below has no server)."""

import pytest

from worker_sdk import WorkQueue

URL = "http://127.0.0.1:9"  # discard port: nothing listens


@pytest.mark.parametrize(
    "works, kwargs, message",
    [
        ([], {}, "list of strings"),
        ("a.csv", {}, "list of strings"),
        (("a.csv",), {}, "list of strings"),
        (["a.csv", 3], {}, "list of strings"),
        (["a.csv"], {"num_epochs": 0}, "num_epochs must be > 0"),
        (["a.csv"], {"num_epochs": -2}, "num_epochs must be > 0"),
        (["a.csv", "  "], {}, "non-empty"),
    ],
)
def test_bad_arguments_raise_value_error(works, kwargs, message):
    with pytest.raises(ValueError, match=message):
        WorkQueue(works, url=URL, **kwargs)


def test_bytes_and_padded_works_are_decoded_and_stripped():
    queue = WorkQueue([b" a.csv\n", "b.csv "], url=URL, prefix=b"/data/")
    assert queue.works == ["a.csv", "b.csv"]
    assert queue.spec()["prefix"] == "/data/" and len(queue) == 2


def test_no_server_configured_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("SHARDLINE_URL", raising=False)
    with pytest.raises(ValueError, match="SHARDLINE_URL"):
        WorkQueue(["a.csv"])


def test_the_job_name_joins_name_and_run(monkeypatch):
    monkeypatch.setenv("SHARDLINE_RUN", "2026-11-22 run#1")
    queue = WorkQueue(["a"], url=URL, name="ctr queue")
    assert queue.job_name == "ctr-queue.2026-11-22-run-1"
    monkeypatch.delenv("SHARDLINE_RUN")
    assert WorkQueue(["a"], url=URL).job_name == "work_queue"


def test_deeprecs_whole_signature_is_accepted_positionally(tmp_path):
    from worker_sdk import LocalWorkMgr

    manager = LocalWorkMgr("worker", 3, str(tmp_path))
    # works, num_epochs, shuffle, seed, prefix, num_slices, num_clients, name, local_work_mgr: DeepRec's order.
    queue = WorkQueue([b"to", b"be"], 2, False, 7, None, 6, 4, "wq", manager, url=URL)
    assert (queue.num_epochs, queue.shuffle, queue.seed, queue.num_slices) == (2, False, 7, 6)
    assert (queue.num_clients, queue.name, queue.local_work_mgr) == (4, "wq", manager)
    assert queue.digest == b"to,be" and len(queue) == 6  # the slices asked for, as DeepRec's capacity
    assert queue.worker == "worker:3"  # a restart of this task is the same worker
    assert len(WorkQueue(["a"], name=None, url=URL)) == 1 and WorkQueue(["a"], url=URL).name == "work_queue"


@pytest.mark.parametrize(
    "args, message",
    [(("ps", 0), "chief or worker"), (("worker", -1), "task_index"), (("worker", "0"), "task_index")],
)
def test_local_work_mgr_refuses_what_deeprec_asserts(tmp_path, args, message):
    from worker_sdk import LocalWorkMgr

    with pytest.raises(ValueError, match=message):
        LocalWorkMgr(*args, str(tmp_path))
    with pytest.raises(ValueError, match="not a directory"):
        LocalWorkMgr("worker", 0, str(tmp_path / "missing"))
