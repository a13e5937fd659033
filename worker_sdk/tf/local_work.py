"""LocalWorkMgr's SessionRunHook (imports TensorFlow): see worker_sdk.local_work."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._require import require

tf = require("LocalWorkMgr.hook()")

if TYPE_CHECKING:
    from ..local_work import LocalWorkMgr


class LocalWorkHook(tf.compat.v1.train.SessionRunHook):
    """Connects the manager's queues when the session starts, acknowledges what they finished when it ends.

    Connecting at once takes a restarted worker's leases back before the
    first step, while they are still live (a first take would do it too, but
    a session may restore a checkpoint and warm up for longer than a lease).
    """

    def __init__(self, manager: LocalWorkMgr):
        self.manager = manager

    def after_create_session(self, session, coord):
        for queue in self.manager.queues():
            queue.connect()

    def end(self, session):
        for queue in self.manager.queues():
            queue.close()
