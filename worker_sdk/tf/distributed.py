"""Synchronous training with TensorFlow: MultiWorkerMirroredStrategy and Keras ``fit`` over a WorkQueue.

The TensorFlow side of worker_sdk.sync. Keras takes one ``steps_per_epoch``
for every epoch: ``steps_per_epoch(queue, global_batch_size)`` is the
records of an epoch over the global batch (drop_last), and ``dataset``
gives each worker exactly its share of those steps every epoch, epoch after
epoch. Every worker therefore runs the same steps, and everything read is
trained on. Each epoch is read alone: a worker's input runs ahead into the
next epoch while others still read this one, and must not take the records
they need; so what an epoch leaves (fewer than a global batch) is not read
in a later epoch, and stays pending for the next run::

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    queue = WorkQueue(works, num_epochs=3, num_slices=400, name="train")
    steps = distributed.steps_per_epoch(queue, global_batch_size=256)
    data = strategy.distribute_datasets_from_function(
        lambda context: distributed.dataset(queue, 256, context)
    )
    model.fit(data, epochs=3, steps_per_epoch=steps)

The records of an epoch must be known (sliced works, tables): a work read
whole could end one worker's epoch early, and Keras would end it for all
and drop what the others still held.

A worker that dies stops the others in their next collective; the cluster
manager starts them all again. ``BackupAndRestore(queue, backup_dir)``, in
place of Keras's callback of that name, keeps the queue's position in the
same checkpoint as the model, saved at each epoch's end, and restores both
when ``fit`` starts again: the run goes on at the next epoch with exactly
the data not trained on. While it is in use, each worker's input waits at
an epoch's end until every worker has saved (a worker's input runs ahead,
and what it reads of the next epoch before the save would count as done).
"""

from __future__ import annotations

import threading
import weakref
from typing import Callable

from .. import stall, sync
from ._require import require

# Per queue, while a BackupAndRestore callback keeps its position: where
# its workers' input starts (the epoch after the restored one) and the
# epochs saved so far, which the input may read past.
_gates: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


class _EpochGate:
    def __init__(self):
        self.first = 0
        self.saved = -1
        self.changed = threading.Condition()

    def wait_saved(self, epoch: int) -> None:
        with self.changed:
            self.changed.wait_for(lambda: self.saved >= epoch)

    def mark_saved(self, epoch: int) -> None:
        with self.changed:
            self.saved = max(self.saved, epoch)
            self.changed.notify_all()


def steps_per_epoch(queue, global_batch_size: int) -> int:
    """An epoch's records over the global batch (once the job is sliced); ValueError when they are not known."""
    counts = sync.sliced_counts(queue, 0)
    if counts["per_epoch"] is None:
        raise ValueError(
            f"work queue {queue.name}: the records of an epoch are not known (works read whole): synchronous "
            "training with TensorFlow needs them; create the job with num_slices (or over tables)"
        )
    steps = counts["per_epoch"] // global_batch_size
    if steps < 1:
        raise ValueError(f"an epoch of {counts['per_epoch']} records holds no global batch of {global_batch_size}")
    return steps


def dataset(
    queue,
    global_batch_size: int,
    input_context=None,
    *,
    num_epochs: int | None = None,
    reader: Callable | None = None,
    output_signature=None,
):
    """This worker's batches for ``num_epochs`` epochs (default the queue's): ``steps_per_epoch`` of them each.

    ``input_context`` (a ``tf.distribute.InputContext``) names the worker and
    the number of workers; batches are of ``global_batch_size`` over the
    workers. Records are scalar strings unless ``output_signature`` says
    otherwise (a ``reader(item)`` yielding dicts, say).
    """
    tf = require("worker_sdk.tf.distributed.dataset")
    workers = input_context.num_input_pipelines if input_context is not None else 1
    if global_batch_size % workers:
        raise ValueError(f"global_batch_size {global_batch_size} does not divide among {workers} workers")
    batch = global_batch_size // workers
    quota = steps_per_epoch(queue, global_batch_size) * batch
    epochs = num_epochs if num_epochs is not None else queue.num_epochs

    def records():
        gate = _gates.get(queue)
        first = gate.first if gate is not None else 0
        for epoch in range(first, epochs):
            if gate is not None and epoch > first:
                gate.wait_saved(epoch - 1)
            yield from sync.read_epoch(queue, epoch, reader, quota, alone=True)

    def timed():
        # The input pipeline's waits on this generator are the worker's data
        # stall, as for WorkQueue.dataset() (worker_sdk.tf.ops says why there)
        # (a stream of the queue only names this process's clock of it).
        return stall.timed(records(), stall.Meter(lambda: queue.consumers.stream().stall_clock()))

    signature = output_signature or tf.TensorSpec(shape=[], dtype=tf.string)
    data = tf.data.Dataset.from_generator(timed, output_signature=signature)
    options = tf.data.Options()
    # The queue deals the data: the strategy must not shard it again.
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    return data.batch(batch, drop_remainder=True).with_options(options)


def first_unread_epoch(queue, per_epoch_read: int) -> int:
    """The first epoch of which at least ``per_epoch_read`` records are unread (the queue's epochs when none is)."""
    before = 0
    for epoch in range(queue.num_epochs):
        unread = queue.epoch_records(epoch)["unread"]
        if unread - before >= per_epoch_read:
            return epoch
        before = unread
    return queue.num_epochs


def BackupAndRestore(queue, backup_dir: str, global_batch_size: int, **kwargs):
    """Keras's ``BackupAndRestore`` callback, with the queue's position in the same checkpoint as the model.

    ``global_batch_size`` is the one given to ``dataset``. Other keyword
    arguments go to Keras's callback (``save_freq`` must stay "epoch": the
    queue's position is exact only between epochs).
    """
    tf = require("worker_sdk.tf.distributed.BackupAndRestore")
    from .checkpoint import make_trackable

    if kwargs.get("save_freq", "epoch") != "epoch":
        raise ValueError("the queue's position is saved between epochs only: keep save_freq='epoch'")
    base = tf.keras.callbacks.BackupAndRestore

    class QueueBackupAndRestore(base):
        def on_train_begin(self, logs=None):
            # Saved and restored with the model: one checkpoint, one epoch.
            self.model.shardline_work_queue = make_trackable(queue)
            super().on_train_begin(logs)
            gate = _gates.setdefault(queue, _EpochGate())
            gate.first = first_unread_epoch(queue, steps_per_epoch(queue, global_batch_size) * global_batch_size)
            gate.saved = gate.first - 1
            self.first_epoch = gate.first  # where this run's input starts (Keras's first epoch too)
            # Every worker restores before any reads: a restore repeated
            # after another worker's new completions would undo them.
            _barrier(self.model.distribute_strategy)

        def on_epoch_end(self, epoch, logs=None):
            super().on_epoch_end(epoch, logs)  # the checkpoint: the model, and a snapshot of the job
            _barrier(self.model.distribute_strategy)  # every worker saved before any reads on
            _gates[queue].mark_saved(epoch)

        def on_train_end(self, logs=None):
            super().on_train_end(logs)
            _gates.pop(queue, None)
            del self.model.shardline_work_queue  # the model's own checkpoints do not hold the queue

    return QueueBackupAndRestore(backup_dir, **kwargs)


def _barrier(strategy) -> None:
    """One all-reduce across the workers (each waits for all)."""
    tf = require("worker_sdk.tf.distributed")
    if strategy.num_replicas_in_sync == 1:
        return
    one = tf.function(
        lambda: strategy.reduce("SUM", strategy.run(lambda: tf.constant(1.0)), axis=None), autograph=False
    )
    one()
