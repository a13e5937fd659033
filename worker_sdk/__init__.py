"""Shardline's worker SDK: imported by training scripts.

``from worker_sdk import WorkQueue`` gives DeepRec's WorkQueue API on a
Shardline server; ``staged`` and ``make_prefetch_hook`` are DeepRec's
``tf.staged`` prefetching. Importing the package needs neither Django nor
TensorFlow: TensorFlow is imported by the parts that use it.
"""

__version__ = "0.2.0"  # CHANGELOG.md

from .errors import (
    APIError,
    AuthError,
    ConfigurationError,
    ConnectionError,
    JobCancelledError,
    JobFailedError,
    JobSpecConflictError,
    LeaseLostError,
    ShardlineError,
)
from .local_work import LocalWorkMgr
from .queue import QueueExhausted, WorkQueue

__all__ = [
    "__version__",
    "WorkQueue",
    "LocalWorkMgr",
    "QueueExhausted",
    "staged",
    "make_prefetch_hook",
    "ShardlineError",
    "APIError",
    "AuthError",
    "ConfigurationError",
    "ConnectionError",
    "JobCancelledError",
    "JobFailedError",
    "JobSpecConflictError",
    "LeaseLostError",
]

_TF_EXPORTS = {"staged", "make_prefetch_hook"}


def __getattr__(name):
    # staged / make_prefetch_hook need TensorFlow: import it only when asked.
    if name in _TF_EXPORTS:
        from .tf._require import require

        require("worker_sdk." + name)
        from .tf import staging

        return getattr(staging, name)
    raise AttributeError(f"module 'worker_sdk' has no attribute {name!r}")
