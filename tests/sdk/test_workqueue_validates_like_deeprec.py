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
