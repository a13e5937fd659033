"""The server job a WorkQueue reads: created, or attached to, on first use; replaced by a checkpoint over other works.

Every worker of a run constructs the same queue, and the first request of
any of them creates the job; the others attach to it (the server answers
the same job for the same name and spec). A spec that differs under the
same name is a conflict the user must resolve by naming the run.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable

from . import errors
from .client import Client


class QueueJob:
    """One queue's job, as the server answered it (``get()``), under the queue's lock."""

    def __init__(
        self, client: Client, spec: Callable[[], dict], queue_name: str, lock: threading.RLock, job: dict | None = None
    ):
        self._client = client
        self._spec = spec
        self._queue_name = queue_name
        self._lock = lock
        self._job = job  # a pickled queue's (a loader process's) is the parent's: no request to attach again

    @property
    def known(self) -> dict | None:
        """The job if the server answered it already (None: not asked yet)."""
        return self._job

    def get(self) -> dict:
        with self._lock:
            if self._job is None:
                self._job = self._create_or_attach()
            return self._job

    def replace(self, old_job: int) -> bool:
        """Creates the job in place of job ``old_job`` of the same name; False when already on another."""
        with self._lock:
            if self._job is not None and self._job["id"] != old_job:
                return False  # already on a job of this spec
            self._job = self._create_or_attach(replaces=old_job)
            return True

    def _create_or_attach(self, replaces: int | None = None) -> dict:
        spec = self._spec() if replaces is None else {**self._spec(), "replaces": replaces}
        try:
            job = self._client.create_job(spec)
        except errors.JobSpecConflictError as exc:
            raise errors.JobSpecConflictError(
                exc.status,
                exc.code,
                f"{exc.message}. A different run over other data needs its own job: pass name=... "
                f"or set SHARDLINE_RUN to tell the runs apart.",
                exc.body,
            ) from None
        if job["state"] in ("done", "cancelled"):
            warnings.warn(
                f"work queue {self._queue_name}: job {job['name']!r} (id {job['id']}) on {self._client.transport.url} "
                f"is already {job['state']}, so there is nothing left to read. This is how a restart of a finished "
                f"run looks; to read the works again as a new run, set SHARDLINE_RUN (or pass run=...) to a new "
                f"value, e.g. SHARDLINE_RUN=$(date +%Y%m%d-%H%M%S), the same on every worker.",
                RuntimeWarning,
                stacklevel=5,  # past this method, get(), WorkQueue.job and the SDK frame that asked for it
            )
        return job
