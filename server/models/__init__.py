"""The dispatch domain: jobs, their items per epoch, leases, workers, tokens.

Words (docs/design.md, "Words", has the same table):

    work    what a job is made of, as the user wrote it (a file, a directory
            or glob, or with num_slices a file to be cut)
    unit    one entry of a job's per-epoch list: a work, or a slice of one
    slice   records [S, E) of a file, ``path?start=S&end=E`` (worker_sdk.formats)
    item    one unit in one epoch; its row is also its current lease
    lease   an item handed to a worker until it completes, fails, or expires
    token   a lease's fencing token, fresh on every lease
    epoch   one pass over the units
    worker  a name that leases items (one process); its consumer is the
            process that uses what it reads
    action  what an admin may do to a job, allowed by its state (ACTIONS)

State changes go through ``server.services``; the hot path (take, complete,
fail, extend) is SQL in ``server/sql/``. The models define the schema and
serve reads (admin, selectors), with the facts derived from single rows
(Job.actions, Worker liveness) beside their fields: jobs, items (units and
items), counts (what the item trigger keeps), workers, audit, snapshots and
tokens each in a module of their own. Import them from here.
"""

from .audit import Event, EventKind
from .counts import Counter, Throughput
from .items import Item, ItemState, ServiceNow, Unit
from .jobs import (
    ACTIONS,
    ACTIVE_STATES,
    FINAL_STATES,
    SLICING_PATIENCE,
    Job,
    JobAction,
    JobQuerySet,
    JobState,
)
from .snapshots import ItemHistory, Snapshot, SnapshotRestore
from .tokens import ROLE_RANK, ApiToken, Role
from .workers import DataStall, TakeRequest, Worker, WorkerQuerySet

__all__ = [
    "ACTIONS",
    "ACTIVE_STATES",
    "FINAL_STATES",
    "ROLE_RANK",
    "SLICING_PATIENCE",
    "ApiToken",
    "Counter",
    "DataStall",
    "Event",
    "EventKind",
    "Item",
    "ItemHistory",
    "ItemState",
    "Job",
    "JobAction",
    "JobQuerySet",
    "JobState",
    "Role",
    "ServiceNow",
    "Snapshot",
    "SnapshotRestore",
    "TakeRequest",
    "Throughput",
    "Unit",
    "Worker",
    "WorkerQuerySet",
]
