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
"""

from __future__ import annotations

from typing import Callable

from .. import sync
from ._require import require


def steps_per_epoch(queue, global_batch_size: int) -> int:
    """An epoch's records over the global batch (once the job is sliced); ValueError when they are not known."""
    sync.until_sliced(queue)
    counts = queue._client.epoch_records(queue.job["id"], 0)
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
        for epoch in range(epochs):
            yield from sync.read_epoch(queue, epoch, reader, quota, alone=True)

    signature = output_signature or tf.TensorSpec(shape=[], dtype=tf.string)
    data = tf.data.Dataset.from_generator(records, output_signature=signature)
    options = tf.data.Options()
    # The queue deals the data: the strategy must not shard it again.
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    return data.batch(batch, drop_remainder=True).with_options(options)
