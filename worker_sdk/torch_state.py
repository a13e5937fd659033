"""A queue's position for ``torch.distributed.checkpoint``: QueueState, imported from worker_sdk.torch."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from . import collectives
from .queue import WorkQueue

if TYPE_CHECKING:
    from .torch_sync import SyncLoader


class QueueState:
    """A queue's position for ``torch.distributed.checkpoint`` (a ``Stateful``): a snapshot, and the loader's epoch.

    ``dcp.save({"queue": QueueState(queue, loader), ...})`` takes a snapshot
    of the job; ``dcp.load`` restores it on every rank (one restore: the
    ranks of one launch attempt share its generation, the torchrun run id and
    restart count) and sets the loader's next epoch. Saved between epochs
    it is exact: a synchronous epoch has trained on everything it read, and
    the snapshot holds nothing else, whatever the world size that resumes.
    Saved within an epoch, the items being read then are read again whole.
    """

    def __init__(self, queue: WorkQueue, loader: SyncLoader | None = None):
        self.queue, self.loader = queue, loader

    def state_dict(self) -> dict:
        # Every rank saves (and dcp.load asks for) the state: one snapshot, on
        # rank 0, shared, rather than one per rank.
        group = self.loader.group if self.loader is not None else None
        rank, world = collectives.rank_and_world(group)
        if world > 1:
            collectives.hold(group)
            # Every rank's completions are in before rank 0 takes it: an
            # epoch's last ones go on a thread (sync.read_epoch).
            self.queue.settle()
            collectives.all_agree(group, True)
        found = [None]
        if rank == 0:
            found[0] = {
                "digest": self.queue.spec_digest(),
                "position": self.queue.checkpoint_state().decode(),
                "epoch": self.loader.epoch if self.loader is not None else 0,
            }
        if world > 1:
            import torch.distributed as dist

            dist.broadcast_object_list(found, src=collectives.global_rank(group, 0), group=group)
        return found[0]

    def load_state_dict(self, state: dict) -> None:
        generation = os.environ.get("SHARDLINE_RESTORE_GENERATION") or ":".join(
            os.environ.get(name, "") for name in ("TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT")
        )
        self.queue.restore_checkpoint_state(state["digest"], state["position"], generation)
        if self.loader is not None:
            self.loader.after_restore(int(state["epoch"]))
