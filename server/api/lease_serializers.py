"""Request bodies of the lease endpoints (complete, fail, release, split, heartbeats, resume): their validation and schema.

The take's body is in ``take_body``; job creation, queries and snapshots in ``serializers``.
"""

from __future__ import annotations

from django.conf import settings
from rest_framework import serializers
from rest_framework.fields import ProhibitNullCharactersValidator

from worker_sdk.protocol import BIGINT_MAX, MAX_TAKE_WAIT, MAX_WORKER_LENGTH

from .serializers import StrictSerializer, clean_text

MAX_ERROR_LENGTH = 8192


class TokenSerializer(StrictSerializer):
    token = serializers.IntegerField(min_value=1, max_value=BIGINT_MAX)


class CompleteSerializer(TokenSerializer):
    records = serializers.IntegerField(min_value=0, max_value=BIGINT_MAX, required=False, allow_null=True, default=None)


class ErrorTextField(serializers.CharField):
    """Error text comes from user code (an exception message): keep it, with
    NUL characters, which Postgres text cannot hold, written as ``\\x00``."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.validators = [v for v in self.validators if not isinstance(v, ProhibitNullCharactersValidator)]

    def to_internal_value(self, data):
        return super().to_internal_value(data).replace("\x00", "\\x00")


class FailSerializer(TokenSerializer):
    error = ErrorTextField(max_length=MAX_ERROR_LENGTH, allow_blank=True, default="", trim_whitespace=False)


class ReleaseSerializer(TokenSerializer):
    reason = ErrorTextField(
        max_length=MAX_ERROR_LENGTH,
        allow_blank=True,
        default="",
        trim_whitespace=False,
        help_text="Why it is given back (kept in the audit trail).",
    )


class LeaseRefSerializer(StrictSerializer):
    id = serializers.IntegerField(min_value=1, max_value=BIGINT_MAX)
    token = serializers.IntegerField(min_value=1, max_value=BIGINT_MAX)
    position = serializers.IntegerField(
        min_value=0,
        max_value=BIGINT_MAX,
        required=False,
        allow_null=True,
        default=None,
        help_text="For a record range: the next record the holder will read (every earlier one is claimed).",
    )
    started = serializers.BooleanField(
        default=False,
        help_text="A lease taken ahead (take with ahead) that its consumer has started: no longer to be asked "
        "back, as a take's started says; a give-back asked of it meanwhile is refused.",
    )


class SplitSerializer(TokenSerializer):
    at = serializers.IntegerField(
        min_value=0,
        max_value=BIGINT_MAX,
        help_text="The record the holder stops at: [at, end) becomes a new item. At or past the lease's end: the "
        "holder refuses the split asked of it.",
    )


# Seconds a data-stall counter may hold: over 3,000 years, so a bound that
# only refuses a number no clock can reach.
MAX_STALL_SECONDS = 1e11


class StallSerializer(StrictSerializer):
    clock = serializers.RegexField(
        r"^[A-Za-z0-9_-]{1,32}$",
        max_length=32,
        help_text="The reporting process's clock (1-32 of A-Z a-z 0-9 - _): a new one starts its counts from zero.",
    )
    waited = serializers.FloatField(
        min_value=0,
        max_value=MAX_STALL_SECONDS,
        help_text="Seconds the training loop waited for its next record or batch, since the clock started.",
    )
    busy = serializers.FloatField(
        min_value=0,
        max_value=MAX_STALL_SECONDS,
        help_text="Seconds the loop spent on its own work (between getting a record or batch and asking for the "
        "next), since the clock started.",
    )


class ExtendManySerializer(StrictSerializer):
    leases = LeaseRefSerializer(many=True, min_length=1, max_length=settings.SHARDLINE_MAX_TAKE)
    waiting = serializers.BooleanField(
        required=False,
        allow_null=True,
        default=None,
        help_text="Whether the holder's process waits at the end of a queue (possibly another job's): its leases "
        "are then not worth waiting for. Omitted: unchanged.",
    )
    wait = serializers.FloatField(
        min_value=0,
        max_value=MAX_TAKE_WAIT,
        default=0,
        help_text="Seconds the server may hold the heartbeat of leases of one job until a split is asked of one of "
        "them (over ASGI; then heartbeat_in is 0: send the next one at once). 0: answer at once. While it waits, "
        "its connection says the holder lives: should it drop unanswered and the holder not beat again within "
        "a second, the holders' leases on the job expire at once (unless restartable). Answered at once when a "
        "split, a give-back or a lost lease is to be told (see returns).",
    )
    returns = serializers.BooleanField(
        default=False,
        help_text="With wait: the holders send their next heartbeat within a second of each answer (the SDK's "
        "heartbeat thread does). The server then awaits it after every answer, for a third of the job's lease "
        "timeout and at least 5 s, and if it does not come, the leases that answer extended and nobody extended "
        "since expire, as after a dropped connection (unless restartable).",
    )
    restartable = serializers.BooleanField(
        default=False,
        help_text="The holders will be restarted under their names and take their leases back (DeepRec's "
        "LocalWorkMgr): a dropped heartbeat leaves their leases to their restart, or to their lease timeout.",
    )
    stall = StallSerializer(
        required=False,
        default=None,
        help_text="The data stall of the training loop these leases are read for (their consumer), as its "
        "process's clock reads it: counted with the leases extended, cumulative, never twice.",
    )

    def validate_leases(self, value):
        if not value:
            raise serializers.ValidationError("expected at least one lease")
        if len(value) > settings.SHARDLINE_MAX_TAKE:
            raise serializers.ValidationError(f"more than {settings.SHARDLINE_MAX_TAKE} leases in one request")
        return value


class ResumeLeasesSerializer(StrictSerializer):
    # Not trimmed by DRF: its length is checked as sent, as the schema says
    # (a 256-character name with a leading "\x1c" was accepted once stripped).
    worker = serializers.CharField(
        max_length=MAX_WORKER_LENGTH,
        trim_whitespace=False,
        help_text="The restarted worker's name: the same as its previous process's (e.g. a LocalWorkMgr's "
        "job_name:task_index). The leases held under it by the caller's user come back with new tokens.",
    )

    def validate_worker(self, value):
        if not value.strip():
            raise serializers.ValidationError("a non-empty string is required")
        return clean_text(value.strip(), "worker", max_length=MAX_WORKER_LENGTH)
