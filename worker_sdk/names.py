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


def job_name_for(name: str, run: str | None) -> str:
    base = _NAME_UNSAFE.sub("-", name).strip("-") or "work_queue"
    if run:
        base = f"{base}.{_NAME_UNSAFE.sub('-', run).strip('-')}"
    return base[:200]
