"""Every TensorFlow internal the SDK relies on, named in one place (imports TensorFlow).

Stock TensorFlow has no public API for these; each is pinned, for the
installed version, by tests/tf/test_the_tensorflow_internals_we_use_exist.py,
so a TensorFlow upgrade that moves one fails there first.

Trackable               the base class of objects ``tf.train.Checkpoint``
                        saves; a queue saves itself through its
                        ``_serialize_to_tensors`` / ``_restore_from_tensors``
SaveableObject, SaveSpec
                        what a TF1 ``Saver`` saves from the graph's
                        ``SAVEABLE_OBJECTS`` collection
BulkSaverBuilder        the builder a TF1 ``Saver`` uses by default; its
                        ``bulk_restore`` makes the restore tensors
                        (PartialRestoreSaverBuilder overrides it)
called_by_restore       whether a ``_serialize_to_tensors`` call comes from a
                        restore (which only asks for the tensors' names)
GPUCompatibleFIFOQueue  the FIFOQueue whose resource may live on a GPU (the
                        public ``tf.queue.FIFOQueue`` pins it to the CPU)
session_closed          whether a ``tf.compat.v1.Session`` has been closed
"""

from __future__ import annotations

import sys

from tensorflow.python.ops.data_flow_ops import GPUCompatibleFIFOQueue
from tensorflow.python.trackable.base import Trackable
from tensorflow.python.training.saver import BulkSaverBuilder
from tensorflow.python.training.saving.saveable_object import SaveableObject, SaveSpec

__all__ = [
    "Trackable",
    "SaveableObject",
    "SaveSpec",
    "BulkSaverBuilder",
    "GPUCompatibleFIFOQueue",
    "called_by_restore",
    "session_closed",
]

# The module whose functions call _serialize_to_tensors while restoring.
RESTORE_MODULE = "tensorflow.python.checkpoint.restore"
# How many frames above _serialize_to_tensors the restore code may be.
_RESTORE_FRAMES = 6


def called_by_restore() -> bool:
    """True when the ``_serialize_to_tensors`` that calls this was called by TensorFlow's restore.

    Restoring calls ``_serialize_to_tensors`` only to learn the names and
    types of the saved tensors; taking a snapshot on the server then would be
    a wasted request (and a misleading snapshot row).
    """
    frame = sys._getframe(2)
    for _ in range(_RESTORE_FRAMES):
        if frame is None:
            return False
        if frame.f_globals.get("__name__", "").startswith(RESTORE_MODULE):
            return True
        frame = frame.f_back
    return False


def session_closed(session) -> bool:
    """Whether ``session`` was closed: BaseSession exposes no public flag, only ``_closed``."""
    return getattr(session, "_closed", False)
