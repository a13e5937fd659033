"""Worker processes for the chaos tests: started, read line by line in the background, killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

from tests.support import ROOT


class Worker:
    """A chaos_worker.py process; ``starts`` and ``dones`` are (time, item) as it printed them."""

    def __init__(
        self,
        env: dict,
        name: str,
        queue: str,
        items: int,
        epochs: int,
        cost: float,
        lease_timeout: float,
        look_ahead: int = 0,
    ):
        self.name = name
        self.starts: list[tuple[float, str]] = []
        self.dones: list[tuple[float, str]] = []
        self.finished = False
        self.killed_at: float | None = None
        self.process = subprocess.Popen(
            [
                sys.executable,
                "tests/chaos/chaos_worker.py",
                "--items",
                str(items),
                "--epochs",
                str(epochs),
                "--cost",
                str(cost),
                "--name",
                queue,
                "--worker",
                name,
                "--lease-timeout",
                str(lease_timeout),
                "--look-ahead",
                str(look_ahead),
            ],
            env={**os.environ, **env, "PYTHONPATH": str(ROOT)},
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self.stderr: list[str] = []
        self._threads = [
            threading.Thread(target=self._read, daemon=True),
            threading.Thread(target=self._read_err, daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def _read(self):
        for line in self.process.stdout:
            stamp, _, rest = line.strip().partition(" ")
            kind, _, item = rest.partition(" ")
            if kind == "start":
                self.starts.append((float(stamp), item))
            elif kind == "done":
                self.dones.append((float(stamp), item))
            elif kind == "finished":
                self.finished = True

    def _read_err(self):
        for line in self.process.stderr:
            self.stderr.append(line)

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> float:
        self.killed_at = time.time()
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(10)
        return self.killed_at

    def wait(self, timeout: float) -> int:
        code = self.process.wait(timeout)
        for thread in self._threads:
            thread.join(5)
        return code

    def stop(self):
        if self.alive():
            self.kill()


def job_id_named(name: str) -> int:
    from server.models import Job

    return Job.objects.get(name=name).pk


def done_count(job_id: int) -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM shardline_item WHERE job_id = %s AND state = 'done'", [job_id])
        return cursor.fetchone()[0]


def audit(job_id: int, items: int, epochs: int) -> dict:
    """Checks the final state of a job run under chaos, from its rows; returns the figures.

    - every (epoch, position) exists once and is done: nothing lost, nothing twice;
    - attempts = 1 + the item's `expired` events: every lease but the last was
      taken back, and each was audited;
    - the item was completed after its last reclaim: only the newest
      token's completion was accepted. (Not its lease time against the
      reclaim's: both are transaction start times, and a take that began
      before a reclaim committed can still lease the row it freed.)
    - one completion sequence number per item: counted once.
    """
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT epoch, count(*), count(DISTINCT position), count(*) FILTER (WHERE state = 'done'),"
            " count(DISTINCT seq) FROM shardline_item WHERE job_id = %s GROUP BY epoch ORDER BY epoch",
            [job_id],
        )
        per_epoch = cursor.fetchall()
        cursor.execute(
            """
            SELECT i.id, i.attempts, i.worker, i.leased_at, i.completed_at,
                   count(e.id) FILTER (WHERE e.kind = 'expired') AS expired,
                   max(e.at) FILTER (WHERE e.kind = 'expired') AS last_expired
              FROM shardline_item AS i
              LEFT JOIN shardline_event AS e ON e.item_id = i.id AND e.job_id = i.job_id
             WHERE i.job_id = %s
             GROUP BY i.id
            """,
            [job_id],
        )
        rows = cursor.fetchall()
        cursor.execute(
            "SELECT e.item_id, e.worker, e.at, i.epoch, i.position FROM shardline_event AS e"
            " JOIN shardline_item AS i ON i.id = e.item_id WHERE e.job_id = %s AND e.kind = 'expired'",
            [job_id],
        )
        expired = cursor.fetchall()
        cursor.execute("SELECT count(*) FROM shardline_event WHERE job_id = %s AND kind = 'lost'", [job_id])
        lost = cursor.fetchone()[0]
    assert per_epoch == [(e, items, items, items, items) for e in range(epochs)], per_epoch
    for item_id, attempts, worker, leased_at, completed_at, n_expired, last_expired in rows:
        assert attempts == 1 + n_expired, (item_id, attempts, n_expired)
        assert completed_at >= leased_at, item_id
        if last_expired is not None:
            assert completed_at >= last_expired, (item_id, worker, completed_at, last_expired)
    return {
        "rows": len(rows),
        "expired": expired,
        "lost_completions_refused": lost,
        "releases": sum(r[5] for r in rows),
    }


def run_workers_until_done(workers: list[Worker], job_id: int, total: int, during, timeout: float = 120) -> None:
    """Waits for ``total`` done items, calling ``during(done)`` as it goes; then every worker must finish cleanly.

    Every worker ending while items are left fails the test: a lease whose
    take response was lost (the server killed after its commit) is not the
    worker's to wait for forever, nor to abandon; the SDK waits it out until
    it expires and is taken back.
    """
    deadline = time.monotonic() + timeout
    try:
        while True:
            done = done_count(job_id)
            if done >= total:
                break
            assert any(w.alive() for w in workers), (
                f"every worker ended with {total - done} items not done\n" + diagnose(workers, job_id)
            )
            assert time.monotonic() < deadline, f"only {done} of {total} items done after {timeout} s\n" + diagnose(
                workers, job_id
            )
            during(done)
            time.sleep(0.05)
        for worker in workers:
            assert worker.wait(60) == 0, "".join(worker.stderr[-20:])
            assert worker.finished
    finally:
        for worker in workers:
            worker.stop()


def job_named(queue: str, run: str):
    from server.models import Job

    job = Job.objects.filter(name=f"{queue}.{run}").first()
    return job.pk if job else None


def diagnose(workers: list[Worker], job_id: int) -> str:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id, state, worker, attempts, expires_at, now() FROM shardline_item"
            " WHERE job_id = %s AND state <> 'done'",
            [job_id],
        )
        rows = cursor.fetchall()
    lines = [f"not done: {rows}"]
    for w in workers:
        lines.append(
            f"{w.name}: alive={w.alive()} rc={w.process.returncode} finished={w.finished} "
            f"last={w.starts[-1:]} stderr={''.join(w.stderr[-5:])}"
        )
    return "\n".join(lines)
