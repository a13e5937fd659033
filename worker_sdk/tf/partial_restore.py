"""PartialRestoreSaverBuilder: restore a TF1 checkpoint that lacks some of the graph's saveables (imports TensorFlow).

Adding a WorkQueue to a training that already writes checkpoints leaves
checkpoints without the queue in them; stock TensorFlow's Saver then fails
with ``NotFoundError: Key .../works_digest not found in checkpoint``. DeepRec
ships ``PartialRestoreSaverBuilder`` for this; this is Shardline's:

    saver = tf.compat.v1.train.Saver(builder=PartialRestoreSaverBuilder(checkpoint_dir=ckpt_dir))
    tf.compat.v1.add_to_collection(tf.compat.v1.GraphKeys.SAVERS, saver)
    with tf.compat.v1.train.MonitoredTrainingSession(checkpoint_dir=ckpt_dir) as sess: ...

What the newest checkpoint in ``checkpoint_dir`` holds is restored; a
variable it lacks gets its initial value (as if it were new), and a work
queue it lacks starts from its job's current state. Anything else it lacks
is an error naming the key. Which keys the checkpoint holds is read when the
Saver is built; with no checkpoint there yet (or no ``checkpoint_dir``) the
builder restores everything, as the stock one does.
"""

from __future__ import annotations

import logging

from ._require import require

tf = require("PartialRestoreSaverBuilder")

from .checkpoint import WorkQueueSaveable  # noqa: E402
from .internals import BulkSaverBuilder  # noqa: E402

log = logging.getLogger("worker_sdk")


class PartialRestoreSaverBuilder(BulkSaverBuilder):
    """A SaverBuilder that restores what the checkpoint has and starts the rest fresh (see the module docstring)."""

    def __init__(self, checkpoint_dir: str | None = None, write_version=tf.compat.v1.train.SaverDef.V2):
        super().__init__(write_version)
        self.checkpoint_dir = checkpoint_dir
        self._keys: set[str] | None = None
        path = tf.train.latest_checkpoint(checkpoint_dir) if checkpoint_dir else None
        if path:
            self._keys = set(tf.train.load_checkpoint(path).get_variable_to_shape_map())

    def bulk_restore(self, filename_tensor, saveables, preferred_shard, restore_sequentially):
        if self._keys is None:
            return super().bulk_restore(filename_tensor, saveables, preferred_shard, restore_sequentially)
        found = [s for s in saveables if all(spec.name in self._keys for spec in s.specs)]
        restored = iter(
            super().bulk_restore(filename_tensor, found, preferred_shard, restore_sequentially) if found else ()
        )
        variables = _variables_by_name()
        tensors = []
        for saveable in saveables:
            if saveable in found:
                tensors += [next(restored) for _ in saveable.specs]
            else:
                tensors += _fresh(saveable, variables)
        return tensors


def _variables_by_name() -> dict:
    graph = tf.compat.v1.get_default_graph()
    variables = graph.get_collection(tf.compat.v1.GraphKeys.GLOBAL_VARIABLES)
    variables += graph.get_collection(tf.compat.v1.GraphKeys.LOCAL_VARIABLES)
    return {variable.op.name: variable for variable in variables}


def _fresh(saveable, variables: dict) -> list:
    """The tensors a saveable the checkpoint lacks is restored from: a new start."""
    if isinstance(saveable, WorkQueueSaveable):
        log.info("work queue %s not found in the checkpoint: it starts from its job's current state", saveable.name)
        return [tf.constant(b"", dtype=tf.string) for _ in saveable.specs]  # an empty state restores nothing
    fresh = []
    for spec in saveable.specs:
        variable = variables.get(spec.name) or variables.get(saveable.name)
        if variable is None or spec.slice_spec:
            raise ValueError(
                f"{spec.name} is not in the checkpoint and is not a whole variable of this graph, so it cannot "
                f"start fresh; restore from a checkpoint that has it, or leave it out of the Saver's var_list"
            )
        log.info("%s not found in the checkpoint: it starts from its initial value", spec.name)
        fresh.append(tf.cast(variable.initial_value, spec.dtype))
    return fresh
