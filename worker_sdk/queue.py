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
import warnings
import weakref
from contextlib import closing, contextmanager

from . import at_exit, errors, look_ahead, resumable, stall
from . import tf as tf_support
from .client import Client
from .leaser import Leaser
from .names import default_worker_name, job_name_for, job_parts
from .protocol import Lease
from .ranges import ranges
from .stream import QueueExhausted, Stream
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
    look_ahead      items leased ahead of a loop over whole items (``items()``,
                    a DataLoader without loader processes) while it works on
                    one, so that it never waits on a take (default 0: take
                    when asked). An item taken ahead and not started goes
                    to a worker that has nothing to read.
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
        look_ahead=0,
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
        if not isinstance(look_ahead, int) or isinstance(look_ahead, bool) or look_ahead < 0:
            raise ValueError(f"look_ahead must be an integer of at least 0, not {look_ahead!r}")
        self.look_ahead = look_ahead
        self.local_work_mgr = local_work_mgr
        self.worker = worker or os.environ.get("SHARDLINE_WORKER") or (local_work_mgr and local_work_mgr.worker) or None
        # A LocalWorkMgr's restart is this process's: a forked child (a loader)
        # never takes its parent's leases back.
        self._restart_pid = os.getpid() if local_work_mgr is not None else None
        self._client = client or Client(Transport(url, token, retry_seconds=retry_seconds))
        self._job: dict | None = None
        self._state_lock = threading.RLock()  # job, then leaser (which reads job)
        # The process that uses what this queue reads (the torch adapter's
        # loader processes read for their main process); default: the worker.
        self.consumer: str | None = None
        self._leaser_obj: Leaser | None = None
        self._leaser_pid: int | None = None
        # Every stream of this process, ended or not: close() acknowledges
        # what ended ones still hold, a restore re-opens them all.
        self._streams: weakref.WeakSet[Stream] = weakref.WeakSet()
        self._default: look_ahead.Taker | None = None
        self._takers: weakref.WeakSet[look_ahead.Taker] = weakref.WeakSet()
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
        with self._state_lock:
            if self._job is None:
                self._job = self._create_or_attach()
            return self._job

    def _replace_job(self, old_job: int) -> None:
        """Creates this queue's job in place of job ``old_job`` of the same name (``_abandon``)."""
        with self._state_lock:
            if self._job is not None and self._job["id"] != old_job:
                return  # already on a job of this spec
            self._job = self._create_or_attach(replaces=old_job)
            if self._leaser_obj is not None:  # it held the old job's leases: forget them, re-open the streams
                self._reset_after_restore()
                self._leaser_obj.stop()
                self._leaser_obj, self._leaser_pid = None, None

    def _create_or_attach(self, replaces: int | None = None) -> dict:
        spec = self.spec() if replaces is None else {**self.spec(), "replaces": replaces}
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
                f"work queue {self.name}: job {job['name']!r} (id {job['id']}) on {self._client.transport.url} is already "
                f"{job['state']}, so there is nothing left to read. This is how a restart of a finished run looks; "
                f"to read the works again as a new run, set SHARDLINE_RUN (or pass run=...) to a new value, "
                f"e.g. SHARDLINE_RUN=$(date +%Y%m%d-%H%M%S), the same on every worker.",
                RuntimeWarning,
                stacklevel=4,
            )
        return job

    def _leaser(self) -> Leaser:
        # One leaser (and heartbeat thread) per process: after a fork (a
        # DataLoader worker) the child starts its own under its own name.
        # Under the lock: dataset()'s interleave threads make their first
        # take at once, and each would otherwise start a leaser of its own.
        pid = os.getpid()
        with self._state_lock:
            if self._leaser_obj is None or self._leaser_pid != pid:
                job = self.job
                worker = self._worker_name()
                if self._leaser_pid is not None and self._leaser_pid != pid:
                    self._streams = weakref.WeakSet()
                    self._takers = weakref.WeakSet()
                    self._default = None
                manager = self.local_work_mgr
                self._leaser_obj = Leaser(
                    self._client,
                    job["id"],
                    worker,
                    self.consumer or worker,
                    float(job["lease_timeout"]),
                    self.name,
                    on_leased=None if manager is None else self._record_local,
                    restartable=manager is not None,
                )
                self._leaser_pid = pid
                if manager is not None and self._restart_pid == pid:
                    self._restart_pid = None  # once per process
                    self._leaser_obj.hand_first(self._restarted(job))
            return self._leaser_obj

    def _restarted(self, job: dict) -> list[Lease]:
        """A LocalWorkMgr's restart: the works found only in its folder, then the worker's own leases back."""
        manager = self.local_work_mgr
        local = [
            Lease(-(n + 1), 0, (self.prefix or "") + work, 0, n, local=True)
            for n, work in enumerate(manager.local_only(self._works, bool(self.num_slices)))
        ]
        resumed = [Lease.from_json(raw) for raw in self._client.resume_leases(job["id"], self._worker_name())["leases"]]
        if local or resumed:
            log.info(
                "work queue %s: worker %s restarted: %d works found only in %s read first, %d of its leases taken back",
                self.name,
                self._worker_name(),
                len(local),
                manager.directory,
                len(resumed),
            )
        return local + resumed

    def _record_local(self, lease: Lease) -> None:
        prefix = self.prefix or ""
        work = lease.item[len(prefix) :] if prefix and lease.item.startswith(prefix) else lease.item
        self.local_work_mgr.record(work)

    def connect(self) -> None:
        """Creates or attaches the job and starts this process's leaser now rather than at the first take.

        A LocalWorkMgr's restarted worker takes its leases back here
        (``LocalWorkMgr.hook()`` calls it when the session starts).
        """
        self._leaser()

    def stream(
        self, lag: int | None = 1, tracks: bool = False, upto_epoch: int | None = None, sync: bool = False
    ) -> Stream:
        """A new consumer of this queue (see worker_sdk.stream); ``tracks``: its reader claims records.

        ``upto_epoch`` and ``sync``: a rank of synchronous training (worker_sdk.sync).
        """
        stream = Stream(self._leaser, self.name, lag, tracks, upto_epoch, sync)
        self._streams.add(stream)
        return stream

    def handed_leases(self) -> HandedLeases:
        """Completes or gives back leases another process took and handed over with their records (worker_sdk.sync)."""
        return HandedLeases(self._client)

    def release_unfinished(self, reason: str) -> None:
        """Gives back unread every item this process holds and no consumer of it finished (a loader process ending)."""
        if self._leaser_obj is not None and self._leaser_pid == os.getpid():
            self._leaser_obj.release_unfinished(reason)

    def leave_handed(self) -> None:
        """This process handed every item it holds to another and ends: they stay leased for the receiver."""
        if self._leaser_obj is not None and self._leaser_pid == os.getpid():
            self._leaser_obj.leave_to_receiver()

    def __getstate__(self):
        state = dict(self.__dict__)
        state.update(_leaser_obj=None, _leaser_pid=None, _streams=None, _takers=None, _default=None, _state_lock=None)
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._streams = weakref.WeakSet()
        self._takers = weakref.WeakSet()
        self._state_lock = threading.RLock()  # job, then leaser (which reads job)
        at_exit.register(self)

    # -- plain Python ---------------------------------------------------------

    def items(self):
        """Item strings, one at a time; each is completed when the next is asked for.

        If the loop stops early (break, an exception), the item in hand is
        given back as failed, so another attempt reads it.
        """
        stream = self.whole_items_stream()
        with closing(stall.timed(look_ahead.leases(stream, self.look_ahead), stream.meter)) as leases:
            for lease in leases:
                yield lease.item

    def whole_items_stream(self) -> Stream:
        """A stream for a loop over whole items, shaped for ``look_ahead.leases(stream, self.look_ahead)``."""
        return self.stream(lag=None if self.look_ahead else 1)

    def ranges(self):
        """One ``WorkRange`` per leased item, for readers of one's own that claim records (worker_sdk.ranges).

        Claiming each record before using it lets the server split the
        unread rest of a slice off to an idle worker at the end of the queue.
        """
        return ranges(self.stream(tracks=True))

    @contextmanager
    def lease(self):
        """``with wq.lease() as item:`` completes the item on exit, fails it on an exception.

        Raises QueueExhausted when every item has been taken.
        """
        stream = self.stream()
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
        """The server's count: ``{"per_epoch", "unread"}``, records of an epoch and not done in epochs up to this one."""
        return self._client.epoch_records(self.job["id"], upto_epoch)

    def job_state(self) -> str:
        """The job's state as the server has it now (``slicing``, ``running``, ``done``...)."""
        return self._client.job(self.job["id"])["state"]

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

        Items this process is still reading are not completed yet, so a
        restore of this snapshot reads them again (at least once, never lost).
        """
        return self._client.snapshot(self.job["id"], self._worker_name())

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
        self._reset_after_restore()
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

    def _reset_after_restore(self) -> None:
        # The server fenced every lease: forget them here, so that nothing is
        # completed (or heartbeated) with a dead token, and let finished
        # consumers read again from the snapshot's position.
        if self._leaser_obj is not None and self._leaser_pid == os.getpid():
            self._leaser_obj.forget_all()
        for stream in list(self._streams):
            stream.reset()

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
        if self._leaser_obj is not None and self._leaser_pid == os.getpid():
            for taker in list(self._takers):
                taker.close()  # what take() leased ahead goes back unread
            for stream in list(self._streams):
                if stream.ended:
                    stream.finish()
            self._leaser_obj.flush()
            self._leaser_obj.stop()
            self._leaser_obj = None
        self._client.close()

    # -- TensorFlow (worker_sdk.tf imports it when one of these is called) ----

    def take(self):
        """The next item as a scalar ``tf.string`` (eager) or an op that takes one per run (graph)."""
        return tf_support.take(self)

    def input_dataset(self):
        """A ``tf.data.Dataset`` of scalar item strings (each completed when the next is read)."""
        return tf_support.input_dataset(self)

    def dataset(self, reader=None, cycle_length=4, block_length=1, output_signature=None):
        """Leased items' records, read ``cycle_length`` items at a time (parallel interleave).

        ``reader(item, offset)`` returns an item's records (default
        ``worker_sdk.readers.records``: lines or TFRecord records as bytes).
        Each item is completed when its records are exhausted and failed if
        its reader raises; several items are read at once, so one slow item
        does not stall the stream.
        """
        return tf_support.interleaved_dataset(self, reader, cycle_length, block_length, output_signature)

    def input_producer(self):
        """A local ``FIFOQueue(capacity=1)`` of works for ``reader.read_up_to``, fed by a QueueRunner."""
        return tf_support.input_producer(self)

    def add_summary(self):
        """Watermark scalars for TensorBoard (summary ops in graph mode; written now in eager mode)."""
        return tf_support.add_summary(self)

    def saveable(self):
        """TF1 graphs: registers (once per graph) and returns the SaveableObject that Saver() saves."""
        return tf_support.saveable(self)

    def default_taker(self) -> look_ahead.Taker:
        """This process's shared taker: the one eager ``take()`` hands items from, one after another."""
        if self._default is None or self._leaser_pid != os.getpid():
            self._leaser()
            self._default = self.taker()
        return self._default

    def taker(self) -> look_ahead.Taker:
        """A consumer that takes one item per call (``take()``), ``look_ahead`` of them leased ahead."""
        taker = look_ahead.Taker(self.whole_items_stream(), self.look_ahead)
        self._takers.add(taker)
        return taker
