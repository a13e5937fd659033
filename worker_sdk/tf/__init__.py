"""WorkQueue's TensorFlow side, behind functions that import TensorFlow only when called.

``WorkQueue``'s TensorFlow methods delegate here, so importing this package
(which ``worker_sdk.queue`` does) imports no TensorFlow. Its modules use only
the queue's public API:

ops         take, input_dataset, input_producer, add_summary, dataset
checkpoint  a queue inside TF2 checkpoints (trackable) and TF1 Savers (saveable)
internals   every TensorFlow internal the SDK relies on, named in one place
staging     DeepRec's ``tf.staged`` and ``make_prefetch_hook``
distributed synchronous training: MultiWorkerMirroredStrategy and Keras fit
partial_restore  PartialRestoreSaverBuilder, for TF1 checkpoints written before the queue
local_work  LocalWorkMgr's SessionRunHook

``from worker_sdk.tf import PartialRestoreSaverBuilder`` imports TensorFlow
then, not before.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..queue import WorkQueue


def adopt(queue: WorkQueue) -> None:
    """Called by every new WorkQueue: makes it trackable when TensorFlow is already loaded.

    Then ``tf.train.Checkpoint(work_queue=wq)`` saves its position. Without
    TensorFlow in the process nothing is imported; a queue built before
    TensorFlow is loaded becomes trackable with its first ``take()``,
    ``input_dataset()`` or ``input_producer()``.
    """
    if sys.modules.get("tensorflow") is not None:
        from . import checkpoint

        checkpoint.make_trackable(queue)


def take(queue: WorkQueue):
    from . import ops

    return ops.take(queue)


def input_dataset(queue: WorkQueue):
    from . import ops

    return ops.input_dataset(queue)


def interleaved_dataset(
    queue: WorkQueue, reader, cycle_length: int, block_length: int, output_signature, hand_over_seconds: float
):
    from . import ops

    return ops.interleaved_dataset(queue, reader, cycle_length, block_length, output_signature, hand_over_seconds)


def input_producer(queue: WorkQueue):
    from . import ops

    return ops.input_producer(queue)


def add_summary(queue: WorkQueue):
    from . import ops

    return ops.add_summary(queue)


def saveable(queue: WorkQueue):
    from . import checkpoint

    return checkpoint.register_saveable(queue)


def __getattr__(name):
    if name == "PartialRestoreSaverBuilder":
        from .partial_restore import PartialRestoreSaverBuilder

        return PartialRestoreSaverBuilder
    raise AttributeError(f"module 'worker_sdk.tf' has no attribute {name!r}")
