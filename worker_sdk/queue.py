"""WorkQueue: DeepRec's WorkQueue API on Shardline leases.

The queue lives on the server; this object is a training process's handle on
it. Items are leased one at a time and acknowledged when their consumer is
done with them: when the same consumer pulls its next item, when it finishes,
or when its lease context exits. A heartbeat thread keeps held leases alive; a
worker that dies stops heartbeating, its leases expire and another worker
reads those items.
"""

from __future__ import annotations

import logging
import os
import threading
from contextlib import closing, contextmanager
from functools import partial

from . import ahead_depth, at_exit, look_ahead, resumable, stall
from . import tf as tf_support
from .client import Client
from .consumers import Consumers
from .job import QueueJob
from .leaser import Leaser
from .names import default_worker_name, job_name_for, job_parts
from .queue_end import QueueExhausted
from .ranges import ranges
from .sync import HandedLeases
from .transport import Transport

log = logging.getLogger("worker_sdk")

# QueueExhausted is part of this module's surface.
__all__ = ["WorkQueue", "QueueExhausted"]


class WorkQueue:
    """A queue of works shared by all workers of a training run (DeepRec's ``WorkQueue``).

    ``works``, ``num_epochs``, ``shuffle``, ``seed``, ``prefix``, ``num_slices``
    and ``name`` mean what they mean in DeepRec. ``num_clients`` (DeepRec: the
    threads that serve takes) is kept and reported: here every consumer takes
    on its own and the server serves them all at once. ``local_work_mgr``: a
    ``LocalWorkMgr`` that records the works this worker takes in a local
    folder and hands a restarted worker its own first (worker_sdk.local_work).
    Shardline adds:

    url, token      the server (default ``SHARDLINE_URL``, ``SHARDLINE_TOKEN``)
    run             what makes this run's job distinct from an earlier run's
                    over the same works (default ``SHARDLINE_RUN``). The job
                    is named ``name`` or ``name.run``: every worker of a run
                    constructs the same queue and attaches to the same job; a
                    restarted run (same ``run``) continues where it stopped.
    lease_timeout   seconds before a silent worker's items go to others
    max_attempts    tries per item before it is marked failed
    split_tail      False: never split the unread records of slices off to
                    idle workers at the end of the queue (default: the
                    server's, on; see ``ranges()`` for which readers can)
    worker          this worker's name in the audit (default host:pid:task)
    look_ahead      items leased ahead of a loop (``items()``, ``ranges()``,
                    ``take()``, ``input_dataset()``, ``dataset()``'s first
                    slot, a DataLoader without loader processes) while it
                    works on one, so that it does not wait on a take
                    between two items. Default (None): one, and more for a
                    loop that works on an item for less than two take round
                    trips, as many as it works through in two round trips,
                    16 at most (worker_sdk.ahead_depth). N: always N; 0:
                    take when asked. An item taken ahead and not started
                    goes to a worker that has nothing to read.
    client          a worker_sdk.client.Client to talk through (default: one
                    over HTTP to ``url``, retrying for ``retry_seconds``)
    """

    def __init__(
        self,
        works,
        num_epochs=1,
        shuffle=True,
        seed=None,
        prefix=None,
        num_slices=None,
        num_clients=1,
        name=None,
        local_work_mgr=None,
        *,
        url=None,
        token=None,
        run=None,
        lease_timeout=None,
        max_attempts=None,
        worker=None,
        retry_seconds=None,
        split_tail=None,
        look_ahead=None,
        client: Client | None = None,
    ):
        if not isinstance(works, list) or not works:
            raise ValueError("WorkQueue requires works as a list of strings")
        if not all(isinstance(w, (str, bytes)) for w in works):
            raise ValueError(f"WorkQueue requires works as a list of strings not {[type(w) for w in works]}")
        if num_epochs is None or num_epochs <= 0:
            raise ValueError(f"num_epochs must be > 0 not {num_epochs}.")
        self._works = [(w.decode() if isinstance(w, bytes) else w).strip() for w in works]
        if not all(self._works):
            raise ValueError("WorkQueue requires non-empty works")
        if isinstance(prefix, bytes):
            prefix = prefix.decode()
        self.num_epochs = int(num_epochs)
        self.shuffle = bool(shuffle)
        self.seed = seed
        self.prefix = prefix
        self.num_slices = num_slices
        self.num_clients = num_clients
        self.name = name or "work_queue"
        self.run = run if run is not None else os.environ.get("SHARDLINE_RUN")
        self.job_name = job_name_for(self.name, self.run)
        self.lease_timeout = lease_timeout
        self.max_attempts = max_attempts
        self.split_tail = split_tail
        if look_ahead is not None and (
            not isinstance(look_ahead, int) or isinstance(look_ahead, bool) or look_ahead < 0
        ):
            raise ValueError(f"look_ahead must be None or an integer of at least 0, not {look_ahead!r}")
        # The items kept ahead at least, and at most when the loop is quick;
        # a number given is kept to.
        self.look_ahead = 1 if look_ahead is None else look_ahead
        self.look_ahead_most = ahead_depth.MOST if look_ahead is None else look_ahead
        self.local_work_mgr = local_work_mgr
        self.worker = worker or os.environ.get("SHARDLINE_WORKER") or (local_work_mgr and local_work_mgr.worker) or None
        # A LocalWorkMgr's restart is this process's: a forked child (a loader)
        # never takes its parent's leases back.
        self._restart_pid = os.getpid() if local_work_mgr is not None else None
        self._client = client or Client(Transport(url, token, retry_seconds=retry_seconds))
        self._state_lock = threading.RLock()  # job, then leaser (which reads job)
        self._job = QueueJob(self._client, self.spec, self.name, self._state_lock)
        # The process that uses what this queue reads (the torch adapter's
        # loader processes read for their main process); default: the worker.
        self.consumer: str | None = None
        self._consumers = Consumers(
            self.name, self._new_leaser, self._state_lock, self.look_ahead, self.look_ahead_most
        )
        at_exit.register(self)
        if local_work_mgr is not None:
            local_work_mgr.attach(self)
        # Trackable (tf.train.Checkpoint(work_queue=wq) saves its position)
        # when TensorFlow is loaded already; without it nothing is imported.
        tf_support.adopt(self)

    # -- DeepRec's read-only surface ------------------------------------

    @property
    def works(self) -> list[str]:
        return list(self._works)

    @property
    def digest(self) -> bytes:
        """DeepRec's digest of the works (``b",".join(works)``); checkpoints compare ``spec_digest()``, which covers all the spec."""
        return b",".join(work.encode() for work in self._works)

    def __len__(self) -> int:
        """Items per epoch, as DeepRec's capacity: the works, or with ``num_slices`` the slices asked for."""
        return self.num_slices if self.num_slices else len(self._works)

    # -- the server job ---------------------------------------------------

    def _identity(self) -> dict:
        """What defines the queue's items: the job's spec less its name and lease settings."""
        return {
            "works": self._works,
            "num_epochs": self.num_epochs,
            "shuffle": self.shuffle,
            "seed": self.seed,
            "prefix": self.prefix,
            "num_slices": self.num_slices,
        }

    def spec(self) -> dict:
        queue, run = job_parts(self.name, self.run)
        spec = {"name": queue, **({"run": run} if run else {}), **self._identity()}
        if self.lease_timeout is not None:
            spec["lease_timeout"] = self.lease_timeout
        if self.max_attempts is not None:
            spec["max_attempts"] = self.max_attempts
        if self.split_tail is not None:
            spec["split_tail"] = bool(self.split_tail)
        return spec

    @property
    def job(self) -> dict:
        """The server job (created, or attached to, on first use)."""
        return self._job.get()

    def _replace_job(self, old_job: int) -> None:
        """Creates this queue's job in place of job ``old_job`` of the same name (``_abandon``)."""
        with self._state_lock:
            if self._job.replace(old_job):
                self._consumers.drop()  # it held the old job's leases: forget them, re-open the streams

    def _leaser(self) -> Leaser:
        return self._consumers.leaser()

    def _new_leaser(self) -> Leaser:
        # One per process (worker_sdk.consumers), made under the queue's lock.
        job = self.job
        worker = self._worker_name()
        manager = self.local_work_mgr
        leaser = Leaser(
            self._client,
            job["id"],
            worker,
            self.consumer or worker,
            float(job["lease_timeout"]),
            self.name,
            on_leased=None if manager is None else partial(manager.record_item, prefix=self.prefix or ""),
            restartable=manager is not None,
        )
        if manager is not None and self._restart_pid == os.getpid():
            self._restart_pid = None  # once per process
            resumed = self._client.resume_leases(job["id"], worker)["leases"]
            leaser.hand_first(manager.first_leases(self._works, self.prefix, bool(self.num_slices), resumed, worker))
        return leaser

    def connect(self) -> None:
        """Creates or attaches the job and starts this process's leaser now rather than at the first take.

        A LocalWorkMgr's restarted worker takes its leases back here
        (``LocalWorkMgr.hook()`` calls it when the session starts).
        """
        self._leaser()

    @property
    def consumers(self) -> Consumers:
        """This process's streams, look-aheads and takers of the queue (worker_sdk.consumers), which the SDK's adapters read with.

        Not ``consumer``, the name of the process that uses what this one reads.
        """
        return self._consumers

    def handed_leases(self) -> HandedLeases:
        """Completes or gives back leases another process took and handed over with their records (worker_sdk.sync)."""
        return HandedLeases(self._client)

    def __getstate__(self):
        state = dict(self.__dict__)
        state.update(_consumers=None, _state_lock=None, _job=self._job.known)
        return state

    def __setstate__(self, state):
        job = state.pop("_job")
        self.__dict__.update(state)
        self._state_lock = threading.RLock()  # job, then leaser (which reads job)
        self._job = QueueJob(self._client, self.spec, self.name, self._state_lock, job)
        self._consumers = Consumers(
            self.name, self._new_leaser, self._state_lock, self.look_ahead, self.look_ahead_most
        )
        at_exit.register(self)

    # -- plain Python ---------------------------------------------------------

    def items(self):
        """Item strings, one at a time; each is completed when the next is asked for.

        If the loop stops early (break, an exception), the item in hand is
        given back as failed, so another attempt reads it.
        """
        stream = self._consumers.whole_items_stream()
        leases = look_ahead.leases(stream, self.look_ahead, most=self.look_ahead_most)
        with closing(stall.timed(leases, stream.meter)) as leases:
            for lease in leases:
                yield lease.item

    def ranges(self):
        """One ``WorkRange`` per leased item, for readers of one's own that claim records (worker_sdk.ranges).

        Claiming each record before using it lets the server split the
        unread rest of a slice off to an idle worker at the end of the queue.
        The next item is leased ahead while the loop reads one (``look_ahead``).
        """
        return ranges(self._consumers.loop_stream(tracks=True), self.look_ahead, self.look_ahead_most)

    @contextmanager
    def lease(self):
        """``with wq.lease() as item:`` completes the item on exit, fails it on an exception.

        Raises QueueExhausted when every item has been taken.
        """
        stream = self._consumers.stream()
        stream.timed_next()
        try:
            yield stream.open[-1].item
        except BaseException as exc:
            stream.abort(f"{type(exc).__name__}: {exc}")
            raise
        else:
            stream.finish()

    def watermarks(self) -> dict:
        return self._client.watermarks(self.job["id"])

    def epoch_records(self, upto_epoch: int) -> dict:
        """The server's count: ``{"slicing", "per_epoch", "unread", "leased"}``, records of an epoch, not done in
        epochs up to this one, and of those leased now."""
        return self._client.epoch_records(self.job["id"], upto_epoch)

    def leases_lost(self) -> int:
        """Leases this process has lost on the job so far: the server refused them (they expired, or were fenced)."""
        leaser = self._consumers.current
        return 0 if leaser is None else leaser.held.lost

    def _worker_name(self) -> str:
        return self.worker or default_worker_name()

    # -- snapshots, for resumable training (worker_sdk.resumable) ---------------

    def spec_digest(self) -> str:
        """A digest of what defines the queue's items (works, epochs, shuffle, seed, prefix, slices).

        A checkpoint saved by a queue with another digest is ignored on restore.
        """
        return resumable.spec_digest(self._identity())

    def snapshot(self) -> dict:
        """Takes a snapshot of the job's position on the server: ``{"id", "job", "seq", ...}``.

        What this process's consumers have finished is acknowledged first
        (with a look-ahead, a finished item's completion rides the next take
        ahead, which may still be on its way). Items still being read are
        not completed yet, so a restore of this snapshot reads them again
        (at least once, never lost).
        """
        self.settle()
        return self._client.snapshot(self.job["id"], self._worker_name())

    def settle(self) -> None:
        """Acknowledges now what this process's consumers finished, and waits for completions on their way."""
        self._consumers.settle()

    def restore(self, snapshot_id: int, generation: str | None = None) -> dict:
        """Puts the job back to a snapshot and forgets this process's leases (they are fenced).

        Every worker of a restarted run may call it with the same snapshot:
        repeats are no-ops on the server while nothing was completed since
        the first, or whatever was completed since when they pass the same
        ``generation`` (default ``SHARDLINE_RESTORE_GENERATION``, e.g. the
        launcher's attempt number, the same on every worker of one attempt).
        """
        if generation is None:
            generation = os.environ.get("SHARDLINE_RESTORE_GENERATION", "")
        result = self._client.restore(self.job["id"], int(snapshot_id), self._worker_name(), generation)
        self._consumers.reset_after_restore()
        log.info(
            "work queue %s: restored snapshot %s of job %s (%s items re-opened, %s leases taken back%s)",
            self.name,
            snapshot_id,
            self.job["id"],
            result["reopened"],
            result["fenced"],
            ", a repeat" if result["repeated"] else "",
        )
        return result

    def checkpoint_state(self) -> bytes:
        """What a checkpoint stores (besides the spec digest): a fresh snapshot of the job."""
        return resumable.checkpoint_state(self.job, self.snapshot())

    def restore_checkpoint_state(self, digest, state, generation: str | None = None) -> dict | None:
        """Restores what ``checkpoint_state`` saved; None (with a warning) when it is not this queue's."""
        saved = resumable.read_checkpoint_state(self, digest, state)
        if saved is None:
            return None
        if saved.abandoned_job is not None:
            self._abandon(saved.abandoned_job)
            return None
        return self.restore(saved.snapshot, generation)

    def _abandon(self, saved_job: int) -> None:
        """A checkpoint of this run's queue over other works: start the new works, as DeepRec does.

        The saved position means nothing for other works. The job of the
        checkpoint (same name) is replaced on the server by this queue's
        (``replaces``): cancelled and renamed, and its name given to a new
        job. Every worker of the run may do this; the first replaces, the
        others attach.
        """
        log.warning(
            "Works queue %s abandoned in checkpoint: it was saved over other works or settings (job %s); "
            "job %s now reads this queue's works from the start",
            self.name,
            saved_job,
            self.job_name,
        )
        self._replace_job(saved_job)

    def close(self) -> None:
        """Acknowledges items still held by consumers that reached their end, stops the heartbeat, closes connections.

        The queue stays usable: a later take reconnects and starts a new heartbeat.
        """
        self._consumers.close()
        self._client.close()

    # -- TensorFlow (worker_sdk.tf imports it when one of these is called) ----

    def take(self):
        """The next item as a scalar ``tf.string`` (eager) or an op that takes one per run (graph)."""
        return tf_support.take(self)

    def input_dataset(self):
        """A ``tf.data.Dataset`` of scalar item strings (each completed when the next is read)."""
        return tf_support.input_dataset(self)

    def dataset(self, reader=None, cycle_length=4, block_length=1, output_signature=None, hand_over_seconds=0.0):
        """Leased items' records, read ``cycle_length`` items at a time (parallel interleave).

        ``reader(item, offset)`` returns an item's records (default
        ``worker_sdk.readers.records``: lines or TFRecord records as bytes).
        Each item is completed when its records are exhausted and failed if
        its reader raises; several items are read at once, so one slow item
        does not stall the stream.

        A record counts as read when it is handed to TensorFlow, one at a
        time. ``hand_over_seconds > 0`` hands records over in blocks of what
        the loop takes in that long (records of fixed shapes only): far
        faster for small records, and a loop that stops mid-block leaves the
        rest of that block read, not given back (worker_sdk.hand_over).
        """
        return tf_support.interleaved_dataset(
            self, reader, cycle_length, block_length, output_signature, hand_over_seconds
        )

    def input_producer(self):
        """A local ``FIFOQueue(capacity=1)`` of works for ``reader.read_up_to``, fed by a QueueRunner."""
        return tf_support.input_producer(self)

    def add_summary(self):
        """Watermark scalars for TensorBoard (summary ops in graph mode; written now in eager mode)."""
        return tf_support.add_summary(self)

    def saveable(self):
        """TF1 graphs: registers (once per graph) and returns the SaveableObject that Saver() saves."""
        return tf_support.saveable(self)
