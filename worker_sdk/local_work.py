"""LocalWorkMgr: DeepRec's record of the works one worker took, kept in a local folder, on Shardline leases.

DeepRec's inference jobs pass ``WorkQueue(..., local_work_mgr=LocalWorkMgr(
job_name, task_index, restore_works_dir))``: every work the worker takes is
written to ``<restore_works_dir>/<job_name>_<task_index>/``, and a restarted
worker reads the works it finds there first, before taking new ones.

Here the server knows what each worker holds, so a restart does better:

- The worker gets a stable name, ``<job_name>:<task_index>`` (unless the
  queue is given ``worker=``), so its restarted process is the same worker.
- That process takes back at once the leases its predecessor held on the
  job (``POST /jobs/{id}/leases/resume/``): new fencing tokens, so nothing
  the old process might still send counts, and no wait for their expiry,
  after which another worker would have read them.
- Works found in the folder that are not items of the job (a folder filled
  by hand, or by a run over other works) are read first, locally, as DeepRec
  reads them: they are handed out before any server item and never reported
  to the server. Works of the job found there are the server's to decide: the
  ones still held come back as above, done ones are not read again, pending
  ones come in their turn. So no work is read twice by two workers.

Files are named as DeepRec names them (``start_0_end_4`` for a slice, from
the work's query) with a short digest of the work appended, so that two
tables' slices with the same range do not overwrite each other; each holds
the work as given (without the queue's prefix). Nothing here imports
TensorFlow; ``hook()`` does.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import tempfile
import threading
from typing import TYPE_CHECKING

from .protocol import Lease

if TYPE_CHECKING:
    from .queue import WorkQueue

log = logging.getLogger("worker_sdk")

JOB_NAMES = ("worker", "chief")
_START = re.compile(r"[?&]start=(\d+)")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


class LocalWorkMgr:
    """DeepRec's ``LocalWorkMgr(job_name, task_index, restore_works_dir, name=None)``: see the module docstring."""

    def __init__(self, job_name: str, task_index: int, restore_works_dir: str, name: str | None = None):
        if job_name not in JOB_NAMES:
            raise ValueError(f"LocalWorkMgr supports the chief or worker role, not {job_name!r}")
        if not isinstance(task_index, int) or isinstance(task_index, bool) or task_index < 0:
            raise ValueError(f"task_index must be an integer >= 0, not {task_index!r}")
        if not os.path.isdir(restore_works_dir):
            raise ValueError(f"{restore_works_dir} is not a directory (restore_works_dir)")
        self.job_name = job_name
        self.task_index = task_index
        self.restore_works_dir = restore_works_dir
        self.name = name or "local_workqueue_mgr"
        self.directory = os.path.join(restore_works_dir, f"{job_name}_{task_index}")
        # What the folder held when this process started: a restart's record.
        self.found = self._read()
        self._queues: list[WorkQueue] = []
        self._lock = threading.Lock()
        if self.found:
            log.info("local work manager %s: %d works found in %s", self.name, len(self.found), self.directory)

    @property
    def worker(self) -> str:
        """The worker's name on the server: the same for every restart of this task."""
        return f"{self.job_name}:{self.task_index}"

    def _read(self) -> list[str]:
        if not os.path.isdir(self.directory):
            return []
        works: list[str] = []
        for filename in sorted(os.listdir(self.directory)):
            path = os.path.join(self.directory, filename)
            if filename.startswith(".") or not os.path.isfile(path):
                continue  # a record being written (see record), or something else
            with open(path, encoding="utf-8") as handle:
                works += [line.strip() for line in handle if line.strip()]
        unique = list(dict.fromkeys(works))
        # DeepRec restores them in the order of their first record.
        return sorted(unique, key=lambda work: int(_START.search(work).group(1)) if _START.search(work) else 0)

    def attach(self, queue: WorkQueue) -> None:
        """Called by a WorkQueue built with this manager (its hook then acts on it)."""
        with self._lock:
            self._queues.append(queue)

    def local_only(self, works: list[str], sliced: bool) -> list[str]:
        """The works found in the folder that are no item of a queue over ``works``: read first, locally.

        A slice (``path?start=...``) of one of ``works`` is an item of a
        sliced queue; anything else must be one of ``works`` itself.
        """
        known = set(works)
        return [w for w in self.found if w not in known and not (sliced and w.split("?", 1)[0] in known)]

    def first_leases(self, works: list[str], prefix: str | None, sliced: bool, resumed: list[dict], worker: str):
        """A restart's first leases: the works found only in the folder (read here), then ``resumed``, the worker's own taken back."""
        local = [
            Lease(-(n + 1), 0, (prefix or "") + work, 0, n, local=True)
            for n, work in enumerate(self.local_only(works, sliced))
        ]
        leases = [Lease.from_json(raw) for raw in resumed]
        if local or leases:
            log.info(
                "work queue: worker %s restarted: %d works found only in %s read first, %d of its leases taken back",
                worker,
                len(local),
                self.directory,
                len(leases),
            )
        return local + leases

    def record_item(self, lease: Lease, prefix: str) -> None:
        """Records a leased item as the work it was given as (without the queue's prefix)."""
        work = lease.item[len(prefix) :] if prefix and lease.item.startswith(prefix) else lease.item
        self.record(work)

    def record(self, work: str) -> None:
        """Writes ``work`` (a work as given, without the queue's prefix) to the folder, atomically."""
        os.makedirs(self.directory, exist_ok=True)
        path = os.path.join(self.directory, file_name(work))
        # Written under a hidden name, then renamed: a worker killed mid-write
        # leaves no half record for its restart to read.
        handle, temporary = tempfile.mkstemp(prefix=".", dir=self.directory)
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(work)
        os.replace(temporary, path)

    def hook(self):
        """A SessionRunHook: takes the worker's leases back when the session starts, acknowledges at its end."""
        from .tf.local_work import LocalWorkHook

        return LocalWorkHook(self)

    def queues(self) -> list[WorkQueue]:
        with self._lock:
            return list(self._queues)


def file_name(work: str) -> str:
    """DeepRec's file name for a slice (its query, ``=`` and ``&`` as ``_``), plus a digest of the whole work."""
    digest = hashlib.sha1(work.encode("utf-8")).hexdigest()[:10]
    if "?" in work:
        query = work.split("?", 1)[1].replace("=", "_").replace("&", "_")
        stem = _UNSAFE.sub("-", query).strip("-")[:80]
    else:
        stem = _UNSAFE.sub("-", os.path.basename(work.rstrip("/")))[:80].strip("-")
    return f"{stem or 'work'}.{digest}"
