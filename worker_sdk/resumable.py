"""Snapshots of a queue's position, for resumable training: what a checkpoint holds, and how a saved one is read.

A snapshot is the job's position on the server (its newest completion).
Saved in a model checkpoint (tf.train.Checkpoint(work_queue=wq), or a TF1
Saver: see worker_sdk.tf.checkpoint), it is restored with the model: every
item completed after it, and every lease held at the time, goes back to
pending and is read again. Items are handed out in (epoch, position) order,
and with a seed that order is the same on every run and for any number of
workers, so after a restore reading continues from the snapshot's position
in the order the interrupted run was following.

``WorkQueue``'s ``spec_digest``, ``snapshot``, ``restore``,
``checkpoint_state`` and ``restore_checkpoint_state`` (worker_sdk.queue) are
the state changes: a restore forgets the queue's leases and re-opens its
streams, an abandoned checkpoint replaces its job. This module is what they
decide with, over the queue's public API only: the digest of a spec, the
state a checkpoint stores, and what a saved state means for a queue.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .queue import WorkQueue


def spec_digest(identity: dict) -> str:
    """A digest of what defines a queue's items (works, epochs, shuffle, seed, prefix, slices)."""
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()


def checkpoint_state(job: dict, snapshot: dict) -> bytes:
    """What a checkpoint stores (besides the spec digest): the job and a snapshot of it."""
    state = {"job": snapshot["job"], "job_name": job["name"], "snapshot": snapshot["id"], "seq": snapshot["seq"]}
    return json.dumps(state, sort_keys=True).encode()


@dataclass(frozen=True)
class Saved:
    """What a checkpoint's state means for a queue: a snapshot of its job to restore, or its run's job to replace."""

    snapshot: int | None = None
    abandoned_job: int | None = None  # this run's job, saved over other works or settings


def read_checkpoint_state(queue: WorkQueue, digest, state) -> Saved | None:
    """What ``checkpoint_state`` saved means for ``queue``; None (with a warning) when it is not this queue's.

    Called by ``WorkQueue.restore_checkpoint_state``: the warnings name that
    method's caller.
    """
    digest = digest.decode() if isinstance(digest, bytes) else str(digest)
    if not state:
        return None
    if digest != queue.spec_digest():
        saved = json.loads(state.decode() if isinstance(state, bytes) else state)
        if saved.get("job_name") == queue.job_name and saved.get("job"):
            return Saved(abandoned_job=int(saved["job"]))
        warnings.warn(
            f"work queue {queue.name}: the checkpoint was saved by a work queue with other works or settings "
            f"(spec digest {digest[:12]}..., this queue's is {queue.spec_digest()[:12]}...); its position is "
            f"ignored and the queue starts from the job's current state.",
            RuntimeWarning,
            stacklevel=3,
        )
        return None
    saved = json.loads(state.decode() if isinstance(state, bytes) else state)
    if saved.get("job") != queue.job["id"]:
        warnings.warn(
            f"work queue {queue.name}: the checkpoint belongs to job {saved.get('job_name')!r} (id "
            f"{saved.get('job')}), not to this run's job {queue.job['name']!r} (id {queue.job['id']}): its "
            f"position is ignored. To resume that run, use its SHARDLINE_RUN (run=...).",
            RuntimeWarning,
            stacklevel=3,
        )
        return None
    return Saved(snapshot=saved["snapshot"])
