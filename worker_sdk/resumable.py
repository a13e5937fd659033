"""Snapshots of a queue's position, for resumable training: WorkQueue's ``snapshot``, ``restore`` and checkpoint state.

A snapshot is the job's position on the server (its newest completion).
Saved in a model checkpoint (tf.train.Checkpoint(work_queue=wq), or a TF1
Saver: see worker_sdk.tf.checkpoint), it is restored with the model: every
item completed after it, and every lease held at the time, goes back to
pending and is read again. Items are handed out in (epoch, position) order,
and with a seed that order is the same on every run and for any number of
workers, so after a restore reading continues from the snapshot's position
in the order the interrupted run was following.

``Resumable`` is a part of ``WorkQueue`` (its base class), kept apart
because it is a concern of its own; it reads the queue's ``job``, client,
identity and worker name, and resets the queue's streams and leaser after a
restore through ``_reset_after_restore``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import warnings

from . import tf as tf_support

log = logging.getLogger("worker_sdk")


class Resumable:
    """WorkQueue's snapshot, restore and checkpoint methods."""

    def spec_digest(self) -> str:
        """A digest of what defines the queue's items (works, epochs, shuffle, seed, prefix, slices).

        A checkpoint saved by a queue with another digest is ignored on restore.
        """
        return hashlib.sha256(json.dumps(self._identity(), sort_keys=True).encode()).hexdigest()

    def snapshot(self) -> dict:
        """Takes a snapshot of the job's position on the server: ``{"id", "job", "seq", ...}``.

        Items this process is still reading are not completed yet, so a
        restore of this snapshot reads them again (at least once, never lost).
        """
        return self._client.snapshot(self.job["id"], self._worker_name())

    def restore(self, snapshot_id: int, generation: str | None = None) -> dict:
        """Puts the job back to a snapshot and forgets this process's leases (they are fenced).

        Every worker of a restarted run may call it with the same snapshot:
        repeats are no-ops on the server while nothing was completed since
        the first, or whatever was completed since when they pass the same
        ``generation`` (default ``SHARDLINE_RESTORE_GENERATION``, e.g. the
        launcher's attempt number, the same on every worker of one attempt).
        """
        if generation is None:
            generation = os.environ.get("SHARDLINE_RESTORE_GENERATION", "")
        result = self._client.restore(self.job["id"], int(snapshot_id), self._worker_name(), generation)
        self._reset_after_restore()
        log.info(
            "work queue %s: restored snapshot %s of job %s (%s items re-opened, %s leases taken back%s)",
            self.name,
            snapshot_id,
            self.job["id"],
            result["reopened"],
            result["fenced"],
            ", a repeat" if result["repeated"] else "",
        )
        return result

    def _reset_after_restore(self) -> None:
        # The server fenced every lease: forget them here, so that nothing is
        # completed (or heartbeated) with a dead token, and let finished
        # consumers read again from the snapshot's position.
        if self._leaser_obj is not None and self._leaser_pid == os.getpid():
            self._leaser_obj.forget_all()
        for stream in list(self._streams):
            stream.reset()

    def checkpoint_state(self) -> bytes:
        """What a checkpoint stores (besides the spec digest): a fresh snapshot of the job."""
        snap = self.snapshot()
        state = {"job": snap["job"], "job_name": self.job["name"], "snapshot": snap["id"], "seq": snap["seq"]}
        return json.dumps(state, sort_keys=True).encode()

    def restore_checkpoint_state(self, digest, state, generation: str | None = None) -> dict | None:
        """Restores what ``checkpoint_state`` saved; None (with a warning) when it is not this queue's."""
        digest = digest.decode() if isinstance(digest, bytes) else str(digest)
        if not state:
            return None
        if digest != self.spec_digest():
            saved = json.loads(state.decode() if isinstance(state, bytes) else state)
            if saved.get("job_name") == self.job_name and saved.get("job"):
                self._abandon(int(saved["job"]))
                return None
            warnings.warn(
                f"work queue {self.name}: the checkpoint was saved by a work queue with other works or settings "
                f"(spec digest {digest[:12]}..., this queue's is {self.spec_digest()[:12]}...); its position is "
                f"ignored and the queue starts from the job's current state.",
                RuntimeWarning,
                stacklevel=2,
            )
            return None
        saved = json.loads(state.decode() if isinstance(state, bytes) else state)
        if saved.get("job") != self.job["id"]:
            warnings.warn(
                f"work queue {self.name}: the checkpoint belongs to job {saved.get('job_name')!r} (id "
                f"{saved.get('job')}), not to this run's job {self.job['name']!r} (id {self.job['id']}): its "
                f"position is ignored. To resume that run, use its SHARDLINE_RUN (run=...).",
                RuntimeWarning,
                stacklevel=2,
            )
            return None
        return self.restore(saved["snapshot"], generation)

    def _abandon(self, saved_job: int) -> None:
        """A checkpoint of this run's queue over other works: start the new works, as DeepRec does.

        The saved position means nothing for other works. The job of the
        checkpoint (same name) is replaced on the server by this queue's
        (``replaces``): cancelled and renamed, and its name given to a new
        job. Every worker of the run may do this; the first replaces, the
        others attach.
        """
        log.warning(
            "Works queue %s abandoned in checkpoint: it was saved over other works or settings (job %s); "
            "job %s now reads this queue's works from the start",
            self.name,
            saved_job,
            self.job_name,
        )
        self._replace_job(saved_job)

    def saveable(self):
        """TF1 graphs: registers (once per graph) and returns the SaveableObject that Saver() saves."""
        return tf_support.saveable(self)
