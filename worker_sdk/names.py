"""Names a WorkQueue goes by on the server: its worker's, and its job's."""

from __future__ import annotations

import json
import os
import re
import socket

_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def default_worker_name() -> str:
    """host:pid:task, the task index from SHARDLINE_TASK or TF_CONFIG when there is one."""
    task = os.environ.get("SHARDLINE_TASK")
    if task is None:
        try:
            config = json.loads(os.environ.get("TF_CONFIG", "{}"))
            task = f"{config['task']['type']}{config['task']['index']}"
        except (ValueError, KeyError, TypeError):
            task = "0"
    return f"{socket.gethostname()}:{os.getpid()}:{task}"


def job_parts(name: str, run: str | None) -> tuple[str, str]:
    """(queue, run) as the server is sent them: its characters only, and NAME.RUN within 200 of them."""
    queue = _NAME_UNSAFE.sub("-", name).strip("-") or "work_queue"
    run = _NAME_UNSAFE.sub("-", run or "").strip("-")[:100]
    return (queue[: 199 - len(run)] if run else queue[:200]), run


def job_name_for(name: str, run: str | None) -> str:
    """The job's name, as the server makes it from the parts: ``queue.run``, or the queue's name without a run."""
    queue, run = job_parts(name, run)
    return f"{queue}.{run}" if run else queue
