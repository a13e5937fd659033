"""Request bodies of the REST API: their validation, and their documented schema (responses are in ``responses``; the lease endpoints' bodies in ``lease_serializers``, the take's in ``take_body``)."""

from __future__ import annotations

import re
import sys

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from worker_sdk import formats
from worker_sdk.protocol import BIGINT_MAX, MAX_EPOCHS, MAX_WORKER_LENGTH

from ..models import ItemState
from ..services.jobs import JobSpec

NAME_MAX = 200
NAME_RE = re.compile(r"^[A-Za-z0-9._-]{1,200}$")
RUN_RE = re.compile(r"^[A-Za-z0-9._-]{1,100}$")
MAX_ITEM_LENGTH = 4096
# What a work string must match: something besides whitespace, and no NUL.
# Whitespace spelled out as Python's str.strip() sees it (JSON Schema's \s
# leaves out \x1c-\x1f and \x85, which strip() removes), so that a work the
# schema allows is never refused as empty once stripped.
_SPACE = r" \t\n\x0b\x0c\r\x1c-\x1f\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
WORK_PATTERN = rf"^[^\x00]*[^\x00{_SPACE}][^\x00]*$"


class WholeMatch(RegexValidator):
    """A regex the whole value must match (the OpenAPI schema shows it as the field's pattern).

    RegexValidator searches, and its ``$`` also matches before a final newline.
    """

    def __call__(self, value):
        if not isinstance(value, str) or not self.regex.fullmatch(value):
            raise ValidationError(self.message, code=self.code)


def clean_text(value: str, what: str, *, max_length: int) -> str:
    """Strips a string and rejects what Postgres text cannot hold."""
    if "\x00" in value:
        raise serializers.ValidationError(f"{what} contains a NUL character")
    if len(value) > max_length:
        raise serializers.ValidationError(f"{what} is longer than {max_length} characters")
    return value


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# The JSON type each field takes, as the OpenAPI schema documents it: DRF
# would also take "3" for 3, 3.0 for 3, 5 for "5" and "yes" for true, which
# a client generated from the schema cannot expect, and which made one spec
# two. Most specific first (a ChoiceField's value is a string here).
JSON_TYPES = (
    (serializers.BooleanField, lambda v: isinstance(v, bool), "true or false"),
    (serializers.IntegerField, _is_int, "an integer"),
    # An integer too large for a float was a 500 (OverflowError) in DRF's FloatField.
    (
        serializers.FloatField,
        lambda v: isinstance(v, float) or (_is_int(v) and abs(v) <= sys.float_info.max),
        "a number",
    ),
    (serializers.CharField, lambda v: isinstance(v, str), "a string"),
    (serializers.ChoiceField, lambda v: isinstance(v, str), "a string"),
    (serializers.ListField, lambda v: isinstance(v, list), "a list"),
    (serializers.ListSerializer, lambda v: isinstance(v, list), "a list"),
    (serializers.DictField, lambda v: isinstance(v, dict), "an object"),
    (serializers.Serializer, lambda v: isinstance(v, dict), "an object"),
)


class StrictSerializer(serializers.Serializer):
    """Rejects fields it does not know, so a typo is an error, not a silent default, and values of another
    JSON type than the field's (``json_types``; off for query parameters, which are all strings)."""

    json_types = True

    def to_internal_value(self, data):
        if not isinstance(data, dict):
            raise serializers.ValidationError({"non_field_errors": ["expected a JSON object"]})
        unknown = sorted(set(data) - set(self.fields))
        if unknown:
            raise serializers.ValidationError({name: ["unknown field"] for name in unknown})
        if self.json_types:
            wrong = {}
            for name, value in data.items():
                field = self.fields[name]
                for kind, accepts, expected in JSON_TYPES:
                    if isinstance(field, kind):
                        if value is not None and not accepts(value):
                            wrong[name] = [f"expected {expected}, got {_json_type(value)}"]
                        break
            if wrong:
                raise serializers.ValidationError(wrong)
        return super().to_internal_value(data)


def _json_type(value) -> str:
    names = {
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        str: "a string",
        list: "a list",
        dict: "an object",
    }
    return names.get(type(value), type(value).__name__)


@extend_schema_field(
    {
        "type": "array",
        "minItems": 1,
        "maxItems": settings.SHARDLINE_MAX_WORKS,
        "items": {
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_ITEM_LENGTH,
            # Stripped, and refused when blank or holding a NUL (Postgres text cannot).
            "pattern": WORK_PATTERN,
        },
    }
)
class WorksField(serializers.Field):
    """A non-empty list of item strings, stripped.

    A plain loop rather than ListField(child=CharField()): a million works
    validate in a fraction of a second instead of many seconds.
    """

    default_error_messages = {"invalid": "expected a non-empty list of strings"}

    def to_internal_value(self, data):
        if not isinstance(data, list) or not data:
            self.fail("invalid")
        limit = settings.SHARDLINE_MAX_WORKS
        if len(data) > limit:
            raise serializers.ValidationError(
                f"{len(data)} works is more than the limit of {limit} (SHARDLINE_MAX_WORKS)"
            )
        works = []
        for index, work in enumerate(data):
            if not isinstance(work, str):
                raise serializers.ValidationError(f"works[{index}] is a {type(work).__name__}, not a string")
            # The length is checked before stripping, as the schema's maxLength says.
            if len(work) > MAX_ITEM_LENGTH or "\x00" in work:
                clean_text(work, f"works[{index}]", max_length=MAX_ITEM_LENGTH)
            work = work.strip()
            if not work:
                raise serializers.ValidationError(f"works[{index}] is empty")
            works.append(work)
        return works

    def to_representation(self, value):
        return value


class JobCreateSerializer(StrictSerializer):
    name = serializers.CharField(
        max_length=200,
        trim_whitespace=False,
        validators=[WholeMatch(NAME_RE, "use 1-200 characters of A-Z, a-z, 0-9, '.', '_' and '-'")],
        help_text="1-200 characters of A-Z a-z 0-9 . _ -",
    )
    run = serializers.CharField(
        max_length=100,
        required=False,
        default="",
        allow_blank=True,
        trim_whitespace=False,
        validators=[WholeMatch(RUN_RE, "use 1-100 characters of A-Z, a-z, 0-9, '.', '_' and '-'")],
        help_text="The training run this job serves (the SDK sends SHARDLINE_RUN): the job is named NAME.RUN, its "
        "queue is NAME, and the dashboard shows the runs of a queue together. Part of the name, so of the identity.",
    )
    works = WorksField(help_text="Files (or tables) to hand out: each one item per epoch.")
    num_epochs = serializers.IntegerField(min_value=1, max_value=MAX_EPOCHS, default=1)
    shuffle = serializers.BooleanField(default=True)
    seed = serializers.IntegerField(min_value=0, max_value=BIGINT_MAX, allow_null=True, default=None)
    prefix = serializers.CharField(
        allow_null=True, allow_blank=True, trim_whitespace=False, max_length=1024, default=None
    )
    num_slices = serializers.IntegerField(min_value=1, max_value=10_000_000, allow_null=True, default=None)
    lease_timeout = serializers.FloatField(min_value=1, max_value=86400, default=None, allow_null=True)
    max_attempts = serializers.IntegerField(min_value=1, max_value=100, default=None, allow_null=True)
    split_tail = serializers.BooleanField(
        default=True,
        help_text="Split the unread records of leased slices off to idle workers at the end of the queue (the "
        "liquid tail). Like the lease settings, not part of the job's identity: the first create decides.",
    )

    replaces = serializers.IntegerField(
        min_value=1,
        max_value=BIGINT_MAX,
        allow_null=True,
        default=None,
        help_text="The id of the job of this name that this create replaces, when its spec differs: a restarted "
        "training restored a checkpoint of that job's queue and now reads other works. The old job is cancelled "
        "and renamed NAME-replaced-ID. Not part of the job's identity. Allowed to an admin, the old job's "
        "creator and a token scoped to it; otherwise a differing spec is a 409.",
    )

    def validate_prefix(self, value):
        if value:
            clean_text(value, "prefix", max_length=1024)
        return value or None

    def validate(self, data):
        if data["run"] and len(data["name"]) + 1 + len(data["run"]) > NAME_MAX:
            raise serializers.ValidationError(
                {"run": [f"the job's name, NAME.RUN, would be over {NAME_MAX} characters: shorten the name or the run"]}
            )
        prefix = data.get("prefix") or ""
        for index, work in enumerate(data["works"]):
            full = prefix + work
            try:
                formats.check_table(full)
                piece = formats.parse(full)
            except formats.FormatError as exc:
                raise serializers.ValidationError({"works": [f"works[{index}]: {exc}"]}) from None
            if formats.table_kind(full) and (piece.start is not None or "as_of=" in full):
                raise serializers.ValidationError(
                    {"works": [f"works[{index}] {formats.redact(full)!r}: name the whole table (no as_of, start, end)"]}
                )
            if piece.start is not None and data.get("num_slices"):
                raise serializers.ValidationError(
                    {
                        "works": [
                            f"works[{index}] {prefix + work!r}: is already a slice (?start=&end=); with num_slices, name the whole file"
                        ]
                    }
                )
        # Works the server would read: refused now, by the admin's policy
        # (server/data_policy.py), rather than failing the job later.
        from .. import data_policy

        refused = data_policy.refusals(data["works"], prefix, data.get("num_slices"))
        if refused:
            raise serializers.ValidationError({"works": refused})
        return data

    def to_spec(self) -> JobSpec:
        data = self.validated_data
        return JobSpec(
            name=f"{data['name']}.{data['run']}" if data["run"] else data["name"],
            queue=data["name"],
            run=data["run"],
            works=data["works"],
            num_epochs=data["num_epochs"],
            shuffle=data["shuffle"],
            seed=data["seed"],
            prefix=data["prefix"],
            num_slices=data["num_slices"],
            lease_timeout=data["lease_timeout"] or float(settings.SHARDLINE_DEFAULT_LEASE_TIMEOUT),
            max_attempts=data["max_attempts"] or settings.SHARDLINE_DEFAULT_MAX_ATTEMPTS,
            split_tail=data["split_tail"],
        )


class RecordsQuerySerializer(StrictSerializer):
    json_types = False

    upto_epoch = serializers.IntegerField(
        min_value=0, max_value=MAX_EPOCHS, help_text="Count unread records of epochs up to this one."
    )


class ItemFilterSerializer(serializers.Serializer):
    state = serializers.ChoiceField(
        choices=[("completed", "completed (done or failed)"), *ItemState.choices], required=False
    )
    epoch = serializers.IntegerField(min_value=0, max_value=2**31 - 1, required=False)
    # A prefix of worker names: the empty one matches every worker.
    worker = serializers.CharField(max_length=MAX_WORKER_LENGTH, required=False, allow_blank=True)
    format = serializers.ChoiceField(choices=["json", "csv"], required=False)
    cursor = serializers.CharField(required=False)
    page_size = serializers.IntegerField(required=False, min_value=1, max_value=1000)

    def validate_worker(self, value):
        return clean_text(value, "worker", max_length=MAX_WORKER_LENGTH)


class SnapshotCreateSerializer(StrictSerializer):
    worker = serializers.CharField(
        max_length=MAX_WORKER_LENGTH,
        required=False,
        default="",
        allow_blank=True,
        trim_whitespace=False,  # its length is checked as sent, as the schema says; validate_worker strips
        help_text="Who takes the snapshot (recorded for the audit).",
    )

    def validate_worker(self, value):
        return clean_text(value.strip(), "worker", max_length=MAX_WORKER_LENGTH)


class RestoreSerializer(SnapshotCreateSerializer):
    generation = serializers.CharField(
        max_length=200,
        required=False,
        default="",
        allow_blank=True,
        help_text="Optional name of the restarted run: repeats of a restore with the same generation are no-ops "
        "even after new completions.",
    )

    def validate_generation(self, value):
        return clean_text(value, "generation", max_length=200)
