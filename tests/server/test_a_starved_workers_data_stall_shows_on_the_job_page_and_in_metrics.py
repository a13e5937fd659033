"""A worker whose reader is 4x slower than its model shows its data stall on the job page and in /metrics within seconds.

Two training processes (stall_reader.py) read one job against the real
server: the starved one's reader takes 4x its model's time per record (it
waits about 4/5 of its time), the fed one's reader a quarter of its model's
(about 1/5). With the SDK's default pace (its first heartbeat
stall.FIRST_REPORT after its first take, then every REPORT_EVERY), the job
page and /metrics must show both loops, the starved one's share well above
the fed one's, within a few seconds of the processes starting to read.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import requests

from tests.support import ROOT
from worker_sdk import stall

SCRIPT = Path(__file__).with_name("stall_reader.py")
MODEL = 0.005  # seconds per record
PASSWORD = "correct horse battery staple"
# The first report comes FIRST_REPORT after the first take, the next
# REPORT_EVERY later; the rest is the page's and the processes' own time on
# a busy machine.
WITHIN = stall.FIRST_REPORT + stall.REPORT_EVERY + 4.0
# The shares are judged on counters covering at least this much of each
# loop: the first report covers about FIRST_REPORT, where one pause of a
# busy machine's scheduler weighs a third; the counters are cumulative.
JUDGED_OVER = stall.FIRST_REPORT + stall.REPORT_EVERY / 2


@pytest.fixture(scope="module")
def viewer(django_db_setup, django_db_blocker) -> str:
    """A viewer who logs in with a password (committed: the server process must see it)."""
    from server.services import accounts

    with django_db_blocker.unblock():
        user, _ = accounts.ensure_user(f"stall-viewer-{uuid.uuid4().hex[:6]}", "viewer")
        user.set_password(PASSWORD)
        user.save()
        from django.db import connections

        connections.close_all()  # would otherwise outlive the test database's tear-down
    return user.get_username()


def logged_in(base: str, username: str) -> requests.Session:
    session = requests.Session()
    session.get(f"{base}/accounts/login/", timeout=30).raise_for_status()
    answer = session.post(
        f"{base}/accounts/login/",
        data={"username": username, "password": PASSWORD, "csrfmiddlewaretoken": session.cookies["csrftoken"]},
        headers={"Referer": f"{base}/accounts/login/"},
        timeout=30,
    )
    assert answer.ok and "sessionid" in session.cookies, answer.text[-2000:]
    return session


def start(env: dict, name: str, run: str, worker: str, read: float, works: list[str]) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(SCRIPT), "--name", name, "--run", run, "--worker", worker, "--read", str(read)]
        + ["--compute", str(MODEL), *works],
        cwd=ROOT,
        env={**os.environ, **env, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def stop(children: list[subprocess.Popen]) -> None:
    for child in children:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
        child.wait(10)


def page_stalls(session: requests.Session, base: str, job_id: int) -> dict[str, float]:
    """Each loop's share of time waiting for data, as the job page shows it."""
    html = session.get(f"{base}/jobs/{job_id}/", timeout=30).text
    return {worker: float(share) for worker, share in re.findall(r'data-worker="([^"]+)" data-stall="([0-9.]+)"', html)}


def metric_seconds(base: str, job_name: str) -> dict[str, tuple[float, float]]:
    """Each loop's (waited, total) seconds, from the counters at /metrics (``job_name``: the queue's, with its run)."""
    text = requests.get(f"{base}/metrics", timeout=30).text
    seconds: dict[str, dict[str, float]] = {}
    for kind, worker, value in re.findall(
        rf'^shardline_data_(wait|loop)_seconds_total{{job="{re.escape(job_name)}",worker="([^"]+)"}} (\S+)$', text, re.M
    ):
        seconds.setdefault(worker, {})[kind] = float(value)
    return {worker: (s["wait"], s["loop"]) for worker, s in seconds.items() if s.get("loop")}


def shares(seconds: dict[str, tuple[float, float]]) -> dict[str, float]:
    return {worker: wait / loop for worker, (wait, loop) in seconds.items()}


@pytest.mark.timeout(90)
def test_the_starved_workers_stall_shows_within_seconds_and_above_the_fed_workers(
    live_server_url, live_keys, viewer, tmp_path
):
    works = []
    for index in range(12):
        path = tmp_path / f"part-{index:02d}.txt"
        path.write_text("".join(f"{index}-{line}\n" for line in range(400)))
        works.append(str(path))
    name, run = f"stall-{uuid.uuid4().hex[:6]}", uuid.uuid4().hex[:8]
    env = {"SHARDLINE_URL": live_server_url, "SHARDLINE_TOKEN": live_keys["worker"], "SHARDLINE_RUN": run}
    children = [
        start(env, name, run, "starved", 4 * MODEL, works),  # its reader: 4x its model
        start(env, name, run, "fed", MODEL / 4, works),
    ]
    try:
        job_ids = set()
        for child in children:
            line = child.stdout.readline()
            assert line.startswith("attached "), f"{line!r}\n{child.stderr.read() if child.poll() is not None else ''}"
            job_ids.add(int(line.split()[1]))
        (job_id,) = job_ids
        reading = time.monotonic()
        session = logged_in(live_server_url, viewer)

        seen: dict[str, dict[str, float]] = {}
        shown_after = None
        while True:
            counters = metric_seconds(live_server_url, f"{name}.{run}")
            seen = {"page": page_stalls(session, live_server_url, job_id), "metrics": shares(counters)}
            if shown_after is None and all({"starved", "fed"} <= set(s) for s in seen.values()):
                shown_after = time.monotonic() - reading
            if shown_after is not None and all(counters[w][1] >= JUDGED_OVER for w in ("starved", "fed")):
                break
            assert all(child.poll() is None for child in children), "a reader ended before its stall showed"
            waited = time.monotonic() - reading
            assert shown_after is not None or waited < WITHIN, (
                f"not shown {WITHIN:.0f} s after the readers started: {seen}"
            )
            assert waited < WITHIN + stall.REPORT_EVERY, f"no report over {JUDGED_OVER} s of each loop: {counters}"
            time.sleep(0.25)
        for where, share in seen.items():
            # About 0.8 against about 0.2 (the takes and the heartbeats' own time aside).
            assert share["starved"] > 0.6 and share["fed"] < 0.4, (where, share, counters)
            assert share["starved"] > share["fed"] + 0.3, (where, share, counters)
        print(f"shown {shown_after:.1f} s after the readers started, judged on {counters}: {seen}")
    finally:
        stop(children)
