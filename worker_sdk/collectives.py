"""The process group under SyncLoader: who this rank is, its agreements and barriers, and the groups' end at exit.

Imported with worker_sdk.torch, before a script's ``init_process_group``
(see the import below). Everything here takes ``group`` as
``torch.distributed`` does: None is the world.
"""

from __future__ import annotations

import gc
import logging
import os
import weakref

from . import at_exit

try:
    import torch.distributed as _dist
except ImportError as exc:
    raise ImportError(f"worker_sdk.torch needs PyTorch: pip install torch ({exc})") from exc

if _dist.is_available() and not _dist.is_initialized():
    # Its collectives take ``group=group.WORLD`` as a default argument, which
    # Python evaluates at import: imported after init_process_group (DDP's
    # first model and torch.distributed.checkpoint import it) it holds the
    # world group until the interpreter finalizes, past destroy_process_group,
    # and the group then ends too late (see end_process_groups). Imported
    # now, before the script's init_process_group, the default is None.
    import torch.distributed.nn.functional  # noqa: F401

log = logging.getLogger("worker_sdk")


# -- the process group at exit -------------------------------------------------------
#
# gloo runs each collective on a thread of the process group, which lets go
# of the collective's tensors only after the caller has its result (and a
# barrier holds the collectives still in flight when it began until it is let
# go of in turn). Freeing a tensor that Python has let go of meanwhile takes
# the GIL. So the group must end (its destructor joins those threads) while
# the interpreter runs and with the GIL free: its Python handle does that
# when it holds the last reference. Two other endings race with those
# threads: the DDP model's Reducer holding the last reference when the
# training function returns (it joins with the GIL held: the rank hangs), and
# the group living until the interpreter finalizes (a thread that asks for
# the GIL then is ended inside a C++ destructor: "terminate called without an
# active exception", SIGABRT, after the rank's work is done; pytorch issue
# 190489). The SDK holds the groups its SyncLoaders use and lets go of them
# last, at a normal exit, before the interpreter finalizes.

_groups: list = []
_groups_pid: int | None = None


def hold(group) -> None:
    """Keeps ``group`` (None: the world), if gloo runs it, until a normal exit: see end_process_groups."""
    global _groups_pid
    import torch.distributed as dist

    group = dist.group.WORLD if group is None else group
    if group is None or "gloo" not in str(dist.get_backend(group)):
        return
    if _groups_pid not in (None, os.getpid()):
        return  # a forked copy: its groups' threads are not in it, so it must never end them
    _groups_pid = os.getpid()
    if not any(group is held for held in _groups):
        _groups.append(group)
    at_exit.after_queues(end_process_groups)


def end_process_groups() -> None:
    """Ends the held process groups now, while the interpreter runs (at a normal exit, after the queues close)."""
    if not _groups or _groups_pid != os.getpid():
        return
    import torch.distributed as dist

    gc.collect()  # a DDP model in a reference cycle lets go of its group now, while ours still holds it
    if dist.is_initialized() and dist.get_backend() == "gloo":
        dist.destroy_process_group()  # the script did not; its groups then end here as well
    handles = [weakref.ref(group) for group in _groups]
    _groups.clear()  # the last references: each group's destructor joins its threads here, the GIL released
    if any(handle() is not None for handle in handles):
        log.warning(
            "a torch.distributed process group is still referenced at exit (a DDP model in a global "
            "variable, or torch.distributed.nn imported after init_process_group); gloo may abort the process as "
            "the interpreter ends (pytorch issue 190489)"
        )


def rank_and_world(group) -> tuple[int, int]:
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return 0, 1
    return dist.get_rank(group), dist.get_world_size(group)


def global_rank(group, rank: int) -> int:
    import torch.distributed as dist

    return rank if group is None else dist.get_global_rank(group, rank)


def all_agree(group, mine: bool) -> bool:
    """Whether ``mine`` holds on every rank: one all-reduce (the minimum), which no rank leaves before all came (a barrier)."""
    agreement = Agreement(group)
    agreement.start(mine)
    return agreement.result()


class Agreement:
    """Whether every rank has a batch: one all-reduce (the minimum) of one number a step, started early, read later.

    ``start`` comes before the step before the one it decides, and
    ``result`` after it: the collective overlaps the training, and a rank
    waits on it only when a peer is behind. Every rank starts its
    agreements and its steps' own collectives (DDP's gradients) in the same
    order, which is all a process group asks. One is in flight at a time.
    """

    def __init__(self, group):
        import torch.distributed as dist

        self.group, self.world = group, rank_and_world(group)[1]
        self.device = None
        if self.world > 1:
            import torch

            self.device = (
                torch.device("cuda", torch.cuda.current_device()) if dist.get_backend(group) == "nccl" else "cpu"
            )
        self.answer: bool | None = None
        self.work = self.flag = None

    def start(self, mine: bool) -> None:
        if self.world == 1:
            self.answer = mine
            return
        import torch
        import torch.distributed as dist

        self.answer = None
        self.flag = torch.tensor([1 if mine else 0], device=self.device)
        self.work = dist.all_reduce(self.flag, op=dist.ReduceOp.MIN, group=self.group, async_op=True)

    def result(self) -> bool:
        if self.answer is None:
            self.work.wait()
            self.answer, self.work = bool(self.flag.item()), None
        return self.answer
