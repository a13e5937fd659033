"""The take's wire protocol, one definition that the SDK sends and the server parses and renders.

A take leases the next items of a job and completes finished ones in the
same request; it is the request every worker makes for every item. Its
request, its answer, the lease they carry and the routes are defined here
once: the SDK's client builds a ``TakeRequest`` and reads a ``TakeAnswer``,
the server's API parses the request with ``TakeRequest.parse`` and renders
``TakeAnswer.to_json``, its gateway and parking find takes by ``take_job``,
and the lease service binds a ``TakeScope`` into take.sql. Adding a take
option means this module, the statement and its test.

No Django, no TensorFlow: imported by training scripts and by the server.
The published OpenAPI schema (server/api/take_body.py) documents the same
request, and a test holds ``TakeRequest.parse`` to it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime

# Limits the server holds requests to (its serializers share them).
MAX_WORKER_LENGTH = 255
BIGINT_MAX = 2**63 - 1
# The longest a take may wait server-side (seconds): well under the SDK's
# read timeout and the proxies' usual 60 s.
MAX_TAKE_WAIT = 30
MAX_EPOCHS = 10_000

API = "/api/v1/"
EXTEND_PATH = "/api/v1/leases/extend/"
COMPLETE_PATH = "/api/v1/leases/complete/"  # many completions in one request


def take_path(job_id: int) -> str:
    return f"{API}jobs/{job_id}/leases/"


def take_job(path: str) -> int | None:
    """The job of a take's path (``/api/v1/jobs/<id>/leases/``), or None for any other path."""
    if not path.startswith(API) or not path.endswith("/leases/"):
        return None
    parts = path[len(API) : -len("/leases/")].split("/")
    if len(parts) != 2 or parts[0] != "jobs" or not parts[1].isdigit() or not parts[1].isascii():
        return None
    return int(parts[1])


def may_wait(path: str) -> bool:
    """The requests the server may hold until something happens: a take, and the heartbeat of many leases."""
    return path == EXTEND_PATH or take_job(path) is not None


class ProtocolError(ValueError):
    """A request the protocol refuses: ``errors`` maps each field to what is wrong with it."""

    def __init__(self, errors: dict[str, list[str]]):
        super().__init__("; ".join(f"{name}: {' '.join(problems)}" for name, problems in errors.items()))
        self.errors = errors


@dataclass(frozen=True)
class Completion:
    """A finished lease acknowledged with a take: its id, its fencing token, and the records it held."""

    id: int
    token: int
    records: int | None = None

    def to_json(self) -> dict:
        body = {"id": self.id, "token": self.token}
        if self.records is not None:
            body["records"] = self.records
        return body


@dataclass(frozen=True)
class TakeScope:
    """Which items a take may lease.

    ``upto_epoch``: only epochs up to this one (a synchronous training epoch
    reads what earlier epochs left, then its own); ``from_epoch``: only from
    this one on (with ``upto_epoch`` the same: that epoch alone). ``sync``:
    the caller is a rank of synchronous training, whose peers finish their
    leases only as it keeps training: nothing pending in scope is its end,
    and no split is asked for it. ``max_records``: of a longer record range
    only the first ones (a rank's quota), the rest staying pending.
    """

    upto_epoch: int | None = None
    from_epoch: int | None = None
    sync: bool = False
    max_records: int | None = None

    def sql(self) -> dict:
        """The scope's parameters of take.sql and at_end.sql."""
        return {"upto": self.upto_epoch, "from": self.from_epoch, "sync": self.sync}


@dataclass(frozen=True)
class TakeRequest:
    """``POST /api/v1/jobs/<id>/leases/``: complete ``complete``, then lease up to ``count`` items in ``scope``.

    ``consumer``: the process that uses what ``worker`` reads (None: the
    worker itself; a DataLoader's loader processes name their main process).
    ``wait``: seconds the server may hold a take that finds nothing yet.
    ``tracks``: the caller claims records one by one and answers splits.
    ``ahead``: what it leases is taken ahead of the consumer (worker_sdk.look_ahead),
    which has not started it: until a later take names it in ``started``,
    a worker with nothing to read may ask for it back. Such a take never
    asks for a split or a give-back itself: its consumer has work in hand.
    ``leave``: should it find nothing, the caller stops taking (a loader of
    a DataLoader in order while a sibling reads: worker_sdk.loader_siblings):
    it asks for no split or give-back, is never held, and does not count as
    a consumer waiting at the end of the queue.
    """

    worker: str
    consumer: str | None = None
    count: int = 1
    complete: tuple[Completion, ...] = ()
    wait: float = 0.0
    tracks: bool = False
    scope: TakeScope = TakeScope()
    ahead: bool = False
    started: tuple[int, ...] = ()
    leave: bool = False

    @property
    def taker(self) -> str:
        """The consumer the leases are read for."""
        return self.consumer or self.worker

    def to_json(self) -> dict:
        """The request's body, with only the fields that differ from their defaults (besides worker and complete)."""
        body: dict = {"worker": self.worker, "count": self.count, "complete": [c.to_json() for c in self.complete]}
        if self.consumer is not None:
            body["consumer"] = self.consumer
        if self.wait:
            body["wait"] = self.wait
        if self.tracks:
            body["tracks"] = True
        if self.ahead:
            body["ahead"] = True
        if self.started:
            body["started"] = list(self.started)
        if self.leave:
            body["leave"] = True
        scope = self.scope
        if scope.upto_epoch is not None:
            body["upto_epoch"] = scope.upto_epoch
        if scope.from_epoch is not None:
            body["from_epoch"] = scope.from_epoch
        if scope.sync:
            body["sync"] = True
        if scope.max_records is not None:
            body["max_records"] = scope.max_records
        return body

    @classmethod
    def parse(cls, data, max_take: int) -> "TakeRequest":
        """The request a body holds; ProtocolError naming every bad field.

        JSON types are taken as they are (no "3" for 3); strings are
        stripped, and whitespace-only or NUL-holding ones refused. A plain
        function, not a DRF serializer: one with a nested list costs about
        half a millisecond of CPU per request, a third of the server's own
        work on a take.
        """
        if not isinstance(data, dict):
            raise ProtocolError({"non_field_errors": ["expected a JSON object"]})
        errors = {name: ["unknown field"] for name in sorted(set(data) - _TAKE_FIELDS)}
        worker = data.get("worker")
        consumer = data.get("consumer", worker)
        for name, value in (("worker", worker), ("consumer", consumer)):
            if not isinstance(value, str) or not value.strip():
                errors[name] = ["a non-empty string is required"]
            elif len(value) > MAX_WORKER_LENGTH or "\x00" in value:
                errors[name] = [f"at most {MAX_WORKER_LENGTH} characters, without NUL"]
        count = data.get("count", 1)
        if not _is_int(count) or not 1 <= count <= max_take:
            errors["count"] = [f"an integer from 1 to {max_take} (SHARDLINE_MAX_TAKE)"]
        wait = data.get("wait", 0)
        if not isinstance(wait, (int, float)) or isinstance(wait, bool) or not 0 <= wait <= MAX_TAKE_WAIT:
            errors["wait"] = [f"a number of seconds from 0 to {MAX_TAKE_WAIT}"]
        for name in ("tracks", "sync", "ahead", "leave"):
            if not isinstance(data.get(name, False), bool):
                errors[name] = ["true or false"]
        epochs = f"an integer from 0 to {MAX_EPOCHS}, or null"
        upto = _optional_int(data, "upto_epoch", 0, MAX_EPOCHS, epochs, errors)
        from_epoch = _optional_int(data, "from_epoch", 0, MAX_EPOCHS, epochs, errors)
        max_records = _optional_int(data, "max_records", 1, BIGINT_MAX, "a positive integer, or null", errors)
        started = data.get("started", [])
        if (
            not isinstance(started, list)
            or len(started) > max_take
            or not all(_is_int(lease) and 1 <= lease <= BIGINT_MAX for lease in started)
        ):
            errors["started"] = [f"a list of at most {max_take} lease ids (positive 64-bit integers)"]
        completions = _completions(data.get("complete", []), "complete", 0, max_take, errors)
        if errors:
            raise ProtocolError(errors)
        return cls(
            worker=worker.strip(),
            consumer=consumer.strip(),
            count=count,
            complete=tuple(completions),
            wait=float(wait),
            tracks=data.get("tracks", False),
            scope=TakeScope(upto, from_epoch, data.get("sync", False), max_records),
            ahead=data.get("ahead", False),
            started=tuple(started),
            leave=data.get("leave", False),
        )


_TAKE_FIELDS = {f.name for f in dataclasses.fields(TakeRequest)} - {"scope"} | {
    f.name for f in dataclasses.fields(TakeScope)
}


@dataclass(frozen=True)
class Lease:
    """An item leased to a worker until ``expires_at``, fenced by ``token``."""

    id: int
    token: int
    item: str
    epoch: int
    position: int
    # When the lease runs out unless heartbeated (the server's datetime; as
    # sent, an ISO string, in the SDK, which reads nothing of it).
    expires_at: datetime | str | None = dataclasses.field(default=None, hash=False, compare=False)
    offset: int | None = None  # a slice's first byte, when known: readers seek straight to it
    start: int | None = None  # a slice's record range [start, end) as leased
    end: int | None = None
    # (record, byte): where a record at or before ``start`` begins, for a
    # reader to seek to and skip from (a split's remainder has no offset).
    seek: tuple[int, int] | None = None
    # What a table slice's reader needs beyond the item: a dict, so not hashed.
    source: dict | None = dataclasses.field(default=None, hash=False, compare=False)
    # The SDK's alone, never sent: a work found only in a LocalWorkMgr's
    # folder, read first as DeepRec reads it (it is no item of the job).
    local: bool = False

    def to_json(self) -> dict:
        return {
            "id": self.id,
            "token": self.token,
            "item": self.item,
            "epoch": self.epoch,
            "position": self.position,
            "expires_at": self.expires_at,
            "offset": self.offset,
            "start": self.start,
            "end": self.end,
            "seek": None if self.seek is None else list(self.seek),
            "source": self.source,
        }

    @classmethod
    def from_json(cls, raw: dict) -> "Lease":
        seek = raw.get("seek")
        return cls(
            raw["id"],
            raw["token"],
            raw["item"],
            raw["epoch"],
            raw["position"],
            raw.get("expires_at"),
            raw.get("offset"),
            raw.get("start"),
            raw.get("end"),
            tuple(seek) if seek else None,
            raw.get("source"),
        )


@dataclass(frozen=True)
class TakeAnswer:
    """A take's answer: the new leases, and when there are none, why (an end, a wait, a pause).

    ``exhausted``: the job is done. ``retry_after``: seconds until asking
    again is worth it. When only leases stand between the job and its end:
    ``leased_by_you`` / ``leased_by_others`` count them, and ``waiting_on``
    those worth waiting for (0: the caller is at its end). ``paused`` and
    ``slicing`` say why nothing comes while a job is paused or slow to slice.
    ``deferred``: the caller is kept from items left near the job's end (a
    slow worker); a take that asks to wait is held until that changes.
    """

    leases: tuple[Lease, ...] = ()
    exhausted: bool = False
    retry_after: float | None = None
    completed: tuple[int, ...] = ()
    lost: tuple[int, ...] = ()
    leased_by_you: int | None = None
    leased_by_others: int | None = None
    waiting_on: int | None = None
    paused: str | None = None
    slicing: str | None = None
    deferred: bool = False

    def to_json(self) -> dict:
        return {
            "leases": [lease.to_json() for lease in self.leases],
            "exhausted": self.exhausted,
            "retry_after": self.retry_after,
            "completed": sorted(self.completed),  # sorted: a repeat's answer is the same list
            "lost": sorted(self.lost),
            "leased_by_you": self.leased_by_you,
            "leased_by_others": self.leased_by_others,
            "waiting_on": self.waiting_on,
            "paused": self.paused,
            "slicing": self.slicing,
            "deferred": self.deferred,
        }

    @classmethod
    def from_json(cls, raw: dict) -> "TakeAnswer":
        return cls(
            leases=tuple(Lease.from_json(lease) for lease in raw.get("leases", ())),
            exhausted=raw.get("exhausted", False),
            retry_after=raw.get("retry_after"),
            completed=tuple(raw.get("completed", ())),
            lost=tuple(raw.get("lost", ())),
            leased_by_you=raw.get("leased_by_you"),
            leased_by_others=raw.get("leased_by_others"),
            waiting_on=raw.get("waiting_on"),
            paused=raw.get("paused"),
            slicing=raw.get("slicing"),
            deferred=raw.get("deferred", False),
        )


# What a take of a finished job answers besides what it completed: the
# server's gateway answers a waiting take so when the job's end wakes it.
ENDED = {
    "exhausted": True,
    "retry_after": None,
    "leased_by_you": 0,
    "leased_by_others": 0,
    "waiting_on": 0,
    "deferred": False,
}


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _optional_int(data: dict, name: str, low: int, high: int, expected: str, errors: dict) -> int | None:
    """``data[name]``: null, or an integer from ``low`` to ``high`` (else an error under ``name``)."""
    value = data.get(name)
    if value is not None and (not _is_int(value) or not low <= value <= high):
        errors[name] = [expected]
    return value


def parse_completions(data, max_take: int) -> tuple[Completion, ...]:
    """The completions a ``POST COMPLETE_PATH`` body holds (``{"leases": [{id, token, records?}, ...]}``); ProtocolError naming every bad field."""
    if not isinstance(data, dict):
        raise ProtocolError({"non_field_errors": ["expected a JSON object"]})
    errors = {name: ["unknown field"] for name in sorted(set(data) - {"leases"})}
    if "leases" not in data:
        errors["leases"] = ["this field is required"]
    completions = _completions(data.get("leases"), "leases", 1, max_take, errors)
    if errors:
        raise ProtocolError(errors)
    return completions


def _completions(value, field: str, fewest: int, max_take: int, errors: dict) -> tuple[Completion, ...]:
    """``value`` as completions; what is wrong with it goes into ``errors[field]``."""
    if not isinstance(value, list) or not fewest <= len(value) <= max_take:
        errors[field] = [f"a list of {fewest} to {max_take} {{id, token, records}} objects (SHARDLINE_MAX_TAKE)"]
        return ()
    completions = []
    for index, entry in enumerate(value):
        problem = _completion_problem(entry)
        if problem:
            errors.setdefault(field, []).append(f"{field}[{index}]: {problem}")
        else:
            completions.append(Completion(entry["id"], entry["token"], entry.get("records")))
    return tuple(completions)


def _completion_problem(entry) -> str | None:
    if not isinstance(entry, dict):
        return "expected an object"
    unknown = set(entry) - {"id", "token", "records"}
    if unknown:
        return f"unknown field {sorted(unknown)[0]!r}"
    for name in ("id", "token"):
        if not _is_int(entry.get(name)) or not 1 <= entry[name] <= BIGINT_MAX:
            return f"{name} must be a positive 64-bit integer"
    records = entry.get("records")
    if records is not None and (not _is_int(records) or not 0 <= records <= BIGINT_MAX):
        return "records must be a non-negative 64-bit integer or null"
    return None
