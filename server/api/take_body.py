"""The hot path's request bodies, the take's and a batch of completions': their documented schemas and parsers.

Kept apart from the other request bodies (api/serializers.py, api/lease_serializers.py): these are
the requests every worker makes for every item, parsed by the wire protocol
the SDK builds them with (worker_sdk.protocol, plain functions for speed)
and held to these schemas by a test.
"""

from django.conf import settings
from rest_framework import serializers

from worker_sdk.protocol import (
    BIGINT_MAX,
    MAX_EPOCHS,
    MAX_TAKE_WAIT,
    MAX_WORKER_LENGTH,
    Completion,
    ProtocolError,
    TakeRequest,
    parse_completions,
)

from .serializers import StrictSerializer


class CompletionSerializer(StrictSerializer):
    id = serializers.IntegerField(min_value=1, max_value=BIGINT_MAX)
    token = serializers.IntegerField(min_value=1, max_value=BIGINT_MAX)
    records = serializers.IntegerField(min_value=0, max_value=BIGINT_MAX, required=False, allow_null=True, default=None)


class TakeSerializer(StrictSerializer):
    """The take request as the OpenAPI schema documents it. It validates nothing: parse_take does, alone.

    Strings are stripped, and whitespace-only or NUL-holding ones refused, by
    parse_take, beyond what the schema can say. Its fields are those of
    worker_sdk.protocol.TakeRequest and TakeScope, which a test holds it to.
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
    ahead = serializers.BooleanField(
        default=False,
        help_text="What this take leases is taken ahead of the consumer, which is still reading what it holds "
        "(the SDK's look-ahead): until a later take names it in started, a worker with nothing to read may ask "
        "for it back, and its holder gives it back unread. Such a take asks for no split or give-back itself.",
    )
    started = serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=BIGINT_MAX),
        required=False,
        max_length=settings.SHARDLINE_MAX_TAKE,
        help_text="Leases taken ahead that the consumer has started: no longer to be asked back (at most "
        "SHARDLINE_MAX_TAKE). Their lease time counts from now.",
    )
    leave = serializers.BooleanField(
        default=False,
        help_text="Should this take find nothing, the caller stops taking (a loader of a DataLoader that asks its "
        "loaders in turn, while another of them reads): the server asks no split or give-back for it, never holds "
        "the request, and does not count its consumer as waiting at the end of the queue.",
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
        help_text="Lease at most this many records in all: the range that crosses the bound is cut there, the "
        "rest of it and the items past it staying pending (a synchronous rank's quota for its epoch).",
    )


def parse_take(data) -> TakeRequest:
    """The take request a body holds (worker_sdk.protocol parses it); a 400 naming every bad field."""
    try:
        return TakeRequest.parse(data, settings.SHARDLINE_MAX_TAKE)
    except ProtocolError as exc:
        raise serializers.ValidationError(exc.errors) from None


class CompleteManySerializer(StrictSerializer):
    """Many completions in one request, as the schema documents them. It validates nothing: parse_complete_many does."""

    leases = serializers.ListField(
        child=CompletionSerializer(),
        min_length=1,
        max_length=settings.SHARDLINE_MAX_TAKE,
        help_text="Leases to complete (1 to SHARDLINE_MAX_TAKE), each with its token; repeating an accepted "
        "completion is fine.",
    )


def parse_complete_many(data) -> tuple[Completion, ...]:
    """The completions a batch body holds (worker_sdk.protocol parses it); a 400 naming every bad field."""
    try:
        return parse_completions(data, settings.SHARDLINE_MAX_TAKE)
    except ProtocolError as exc:
        raise serializers.ValidationError(exc.errors) from None
