"""Every DDP rank exits with status 0 once its work is done, however late gloo's threads let go of it (issue 26).

gloo runs each collective on a thread of the process group, which lets go of
the collective's tensors only after the rank has its result; freeing one that
Python has already let go of takes the GIL. A rank whose group ended while
such a thread still had that to do hung (the DDP model's Reducer joined the
thread holding the GIL) or aborted as the interpreter finalized ("terminate
called without an active exception", no Python frame; pytorch issue 190489),
after its work and checkpoint were done: rarely on its own (1 make test in 2,
over a few dozen rank exits), so ddp_rank.py --lagging-gloo widens that race:
each rank on one CPU, gloo's threads at SCHED_IDLE there, so they run only
while the main thread waits. Before the SDK ended the groups its SyncLoaders
use itself (worker_sdk.collectives, end_process_groups), 9 of 10 such 4-rank runs
here aborted, none of 10 after. The checkpoint after each epoch is what
leaves Python's tensors to those threads (torch.distributed.checkpoint's
object collectives, and QueueState's).
"""

import sys
import uuid

import pytest

from .harness import epochs_of, torchrun, write_files

pytestmark = [
    pytest.mark.timeout(150),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="CPU affinity and SCHED_IDLE are Linux's"),
]


def test_ranks_whose_gloo_threads_lag_behind_all_exit_cleanly(sdk_env, celery_worker, tmp_path):
    works = write_files(tmp_path, 2, 48)  # 96 records: 3 steps of 4 ranks x 8 an epoch
    for run in range(2):  # 8 rank exits
        name = f"ddp-exit-{uuid.uuid4().hex[:6]}"
        args = ["--name", name, "--slices", "4", "--epochs", "2", "--batch", "8", "--lagging-gloo"]
        args += ["--checkpoint", str(tmp_path / f"ckpt{run}"), *works]
        # torchrun's status is 0 only if every rank's was; a hung rank fails with every rank's stacks.
        steps, _read = epochs_of(torchrun(sdk_env, 4, args, tmp_path / f"reports{run}", timeout=60))
        assert [len(steps[epoch]) for epoch in (0, 1)] == [4, 4]  # each rank did its work before it exited
