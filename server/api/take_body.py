"""The take's request body: its documented schema (TakeSerializer) and its one validator (parse_take).

Kept apart from the other request bodies (api/serializers.py): the take is
the request every worker makes for every item, validated by a plain function
for speed, and held to its schema by a test.
"""

from django.conf import settings
from rest_framework import serializers

from .serializers import BIGINT_MAX, MAX_EPOCHS, MAX_TAKE_WAIT, MAX_WORKER_LENGTH, StrictSerializer


class CompletionSerializer(StrictSerializer):
    id = serializers.IntegerField(min_value=1, max_value=BIGINT_MAX)
    token = serializers.IntegerField(min_value=1, max_value=BIGINT_MAX)
    records = serializers.IntegerField(min_value=0, max_value=BIGINT_MAX, required=False, allow_null=True, default=None)


class TakeSerializer(StrictSerializer):
    """The take request as the OpenAPI schema documents it. It validates nothing: parse_take does, alone.

    Strings are stripped, and whitespace-only or NUL-holding ones refused, by
    parse_take, beyond what the schema can say.
    """

    worker = serializers.CharField(max_length=MAX_WORKER_LENGTH, help_text="Worker identity, e.g. host:pid:task.")
    consumer = serializers.CharField(
        max_length=MAX_WORKER_LENGTH,
        required=False,
        help_text="The process that uses what this worker reads (default: the worker). A DataLoader's loader "
        "processes name their main process, so that the server knows they read for one consumer.",
    )
    count = serializers.IntegerField(
        min_value=1, max_value=settings.SHARDLINE_MAX_TAKE, default=1, help_text="At most SHARDLINE_MAX_TAKE."
    )
    complete = serializers.ListField(
        child=CompletionSerializer(),
        required=False,
        max_length=settings.SHARDLINE_MAX_TAKE,
        help_text="Leases to complete first (at most SHARDLINE_MAX_TAKE).",
    )
    wait = serializers.FloatField(
        min_value=0,
        max_value=MAX_TAKE_WAIT,
        default=0,
        help_text="Seconds the server may hold the request when there is nothing to lease yet but there may be "
        "(leases that may fail, expire or be split; a paused job): it answers as soon as an item, a split's "
        "remainder or the job's end comes. 0: answer at once. Served over WSGI, the server never waits.",
    )
    tracks = serializers.BooleanField(
        default=False,
        help_text="The caller claims the records of what it leases one by one and answers splits (the SDK's "
        "readers do): a split may be asked of its leases at once (the liquid tail).",
    )
    upto_epoch = serializers.IntegerField(
        min_value=0,
        max_value=MAX_EPOCHS,
        required=False,
        allow_null=True,
        help_text="Lease only items of epochs up to this one: what earlier epochs left first, then this one's "
        "(a synchronous training epoch). Nothing left up to it ends the caller's take with waiting_on 0, and "
        "exhausted only when it is the job's last epoch.",
    )
    from_epoch = serializers.IntegerField(
        min_value=0,
        max_value=MAX_EPOCHS,
        required=False,
        allow_null=True,
        help_text="Lease only items of epochs from this one on (with upto_epoch the same: that epoch alone).",
    )
    sync = serializers.BooleanField(
        default=False,
        help_text="The caller is a rank of synchronous training (DDP, MultiWorkerMirrored): other ranks' leases "
        "are finished only as this rank keeps training with them, so none counts as worth waiting for, and no "
        "split is asked for it.",
    )
    max_records = serializers.IntegerField(
        min_value=1,
        max_value=BIGINT_MAX,
        required=False,
        allow_null=True,
        help_text="Lease at most this many records: of a longer record range, its first ones, the rest staying "
        "pending (a synchronous rank's quota for its epoch).",
    )


def _optional_int(data: dict, name: str, low: int, high: int, expected: str, errors: dict) -> int | None:
    """``data[name]``: null, or an integer from ``low`` to ``high`` (else an error under ``name``)."""
    value = data.get(name)
    if value is not None and (not _is_int(value) or not low <= value <= high):
        errors[name] = [expected]
    return value


def parse_take(data) -> dict:
    """The take request's validator (TakeSerializer is its documented schema).

    A plain function: a DRF serializer with a nested list costs about half a
    millisecond of CPU per request, a third of the server's own work on a
    take. JSON types are taken as they are (no "3" for 3); a test holds it to
    the published schema.
    """
    if not isinstance(data, dict):
        raise serializers.ValidationError({"non_field_errors": ["expected a JSON object"]})
    fields = {
        "worker",
        "consumer",
        "count",
        "complete",
        "wait",
        "tracks",
        "upto_epoch",
        "from_epoch",
        "sync",
        "max_records",
    }
    errors = {name: ["unknown field"] for name in sorted(set(data) - fields)}
    worker = data.get("worker")
    consumer = data.get("consumer", worker)
    for name, value in (("worker", worker), ("consumer", consumer)):
        if not isinstance(value, str) or not value.strip():
            errors[name] = ["a non-empty string is required"]
        elif len(value) > MAX_WORKER_LENGTH or "\x00" in value:
            errors[name] = [f"at most {MAX_WORKER_LENGTH} characters, without NUL"]
    count = data.get("count", 1)
    limit = settings.SHARDLINE_MAX_TAKE
    if not _is_int(count) or not 1 <= count <= limit:
        errors["count"] = [f"an integer from 1 to {limit} (SHARDLINE_MAX_TAKE)"]
    wait = data.get("wait", 0)
    if not isinstance(wait, (int, float)) or isinstance(wait, bool) or not 0 <= wait <= MAX_TAKE_WAIT:
        errors["wait"] = [f"a number of seconds from 0 to {MAX_TAKE_WAIT}"]
    tracks = data.get("tracks", False)
    if not isinstance(tracks, bool):
        errors["tracks"] = ["true or false"]
    sync = data.get("sync", False)
    if not isinstance(sync, bool):
        errors["sync"] = ["true or false"]
    epochs = f"an integer from 0 to {MAX_EPOCHS}, or null"
    upto = _optional_int(data, "upto_epoch", 0, MAX_EPOCHS, epochs, errors)
    from_epoch = _optional_int(data, "from_epoch", 0, MAX_EPOCHS, epochs, errors)
    max_records = _optional_int(data, "max_records", 1, BIGINT_MAX, "a positive integer, or null", errors)
    complete = data.get("complete", [])
    completions = []
    if not isinstance(complete, list) or len(complete) > limit:
        errors["complete"] = [f"a list of at most {limit} {{id, token, records}} objects"]
    else:
        for index, entry in enumerate(complete):
            problem = _completion_problem(entry)
            if problem:
                errors.setdefault("complete", []).append(f"complete[{index}]: {problem}")
            else:
                completions.append({"id": entry["id"], "token": entry["token"], "records": entry.get("records")})
    if errors:
        raise serializers.ValidationError(errors)
    return {
        "worker": worker.strip(),
        "consumer": consumer.strip(),
        "count": count,
        "complete": completions,
        "wait": float(wait),
        "tracks": tracks,
        "upto_epoch": upto,
        "from_epoch": from_epoch,
        "sync": sync,
        "max_records": max_records,
    }


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


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
