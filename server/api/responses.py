"""Response shapes of the REST API: what the views render and the OpenAPI schema documents.

Request bodies and their validation are in ``serializers``.
"""

from __future__ import annotations

from rest_framework import serializers

from ..models import Item, ItemState, Job, JobAction, JobState, Snapshot, Worker
from ..selectors import AUDIT_COLUMNS


class JobSerializer(serializers.ModelSerializer):
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    actions = serializers.ListField(
        child=serializers.ChoiceField(choices=JobAction.choices),
        read_only=True,
        help_text="What an admin may do to the job in its current state (pause, resume, cancel, retry, restore).",
    )
    warnings = serializers.ListField(
        child=serializers.CharField(),
        read_only=True,
        help_text="What the job's owner should know, oldest first: e.g. works handed out whole though slices were "
        "asked for, because the server cannot count their records.",
    )
    tables = serializers.ListField(
        child=serializers.DictField(),
        read_only=True,
        help_text="The tables among the works, as slicing pinned them: [{work, kind (postgres, delta, iceberg), "
        "version (a Postgres snapshot, a Delta version, an Iceberg snapshot id), rows, files, key}]; every run "
        "of the job reads these versions.",
    )

    class Meta:
        model = Job
        fields = [
            "id",
            "name",
            "queue",
            "run",
            "state",
            "works_count",
            "num_epochs",
            "shuffle",
            "seed",
            "prefix",
            "num_slices",
            "lease_timeout",
            "max_attempts",
            "split_tail",
            "splits",
            "spec_digest",
            "units_count",
            "epochs_materialised",
            "error",
            "slicing_progress",
            "tables",
            "warnings",
            "actions",
            "created_by",
            "created_at",
            "updated_at",
            "started_at",
            "finished_at",
        ]
        read_only_fields = fields


class EpochCountsSerializer(serializers.Serializer):
    epoch = serializers.IntegerField()
    total = serializers.IntegerField()
    pending = serializers.IntegerField()
    leased = serializers.IntegerField()
    done = serializers.IntegerField()
    failed = serializers.IntegerField()
    expired = serializers.IntegerField(
        help_text="Leases past their expiry (counted in pending: the next take hands them out)."
    )
    materialised = serializers.BooleanField()


class WatermarksSerializer(serializers.Serializer):
    job = serializers.IntegerField()
    name = serializers.CharField()
    state = serializers.ChoiceField(choices=JobState.choices)
    total = serializers.IntegerField()
    pending = serializers.IntegerField(help_text="Items waiting to be leased, expired leases included.")
    leased = serializers.IntegerField(help_text="Live leases (not yet expired).")
    done = serializers.IntegerField()
    failed = serializers.IntegerField()
    expired = serializers.IntegerField(help_text="Leases past their expiry, counted in pending.")
    items_per_epoch = serializers.IntegerField()
    num_epochs = serializers.IntegerField()
    current_epoch = serializers.IntegerField(allow_null=True)
    rate_per_second = serializers.FloatField(
        allow_null=True, help_text="Completions per second over the last minute; null once the job has ended."
    )
    eta_seconds = serializers.FloatField(
        allow_null=True, help_text="Seconds to the end at that rate: only while running (0 when done)."
    )
    live_workers = serializers.IntegerField(
        allow_null=True,
        help_text="Workers seen within twice the lease timeout (at least 30 s); null once the job has ended.",
    )
    epochs = EpochCountsSerializer(many=True)
    as_of = serializers.DateTimeField()


class LeaseSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    token = serializers.IntegerField()
    item = serializers.CharField()
    epoch = serializers.IntegerField()
    position = serializers.IntegerField()
    expires_at = serializers.DateTimeField()
    offset = serializers.IntegerField(
        allow_null=True,
        help_text="For a slice: byte offset of its first record, when known (null for a split's remainder).",
    )
    start = serializers.IntegerField(
        allow_null=True, help_text="For a slice: its first record (null for a whole work)."
    )
    end = serializers.IntegerField(
        allow_null=True,
        help_text="For a slice: one past its last record. A split may lower it while the lease is held.",
    )
    seek = serializers.ListField(
        child=serializers.IntegerField(),
        min_length=2,
        max_length=2,
        allow_null=True,
        help_text="[record, byte]: where a record at or before `start` begins, for a reader to seek to and skip "
        "start - record records from (null when unknown).",
    )
    source = serializers.DictField(
        allow_null=True,
        help_text="For a slice of a table, what its reader needs beyond the item: a Postgres table's "
        "{key: [columns], from: [values], to: [values] or null, first: record}, the key range to scan (values as "
        "text) from the key of record `first` to the next slice's first key; a partitioned Delta table's "
        "{columns: {name: value}}, the partition values its file's rows have; null otherwise.",
    )


class RecordsSerializer(serializers.Serializer):
    upto_epoch = serializers.IntegerField()
    slicing = serializers.BooleanField(
        help_text="The job is being sliced (or was paused while slicing): its records are not all counted yet, "
        "so the counts below are not final; ask again once this is false."
    )
    per_epoch = serializers.IntegerField(
        allow_null=True, help_text="Records in one epoch; null when a unit's records are not known (a work read whole)."
    )
    unread = serializers.IntegerField(
        allow_null=True,
        help_text="Records of epochs up to upto_epoch not done yet (pending or leased, epochs not made yet "
        "included); null when not known.",
    )
    leased = serializers.IntegerField(
        allow_null=True,
        help_text="Of those, the records of items leased now (being read, or held by a worker whose lease has "
        "not run out yet); null when not known.",
    )
    epochs_made = serializers.IntegerField(
        help_text="Epochs whose items exist (each is made as the job reaches it): epochs from this one on have "
        "not been read."
    )


class TakeResponseSerializer(serializers.Serializer):
    leases = LeaseSerializer(many=True)
    exhausted = serializers.BooleanField(
        help_text="True when every item is done or failed. (A cancelled job answers 409 job_cancelled.)"
    )
    retry_after = serializers.FloatField(
        allow_null=True, help_text="Seconds to wait before the next take when nothing was leased."
    )
    completed = serializers.ListField(
        child=serializers.IntegerField(), help_text="Lease ids of `complete` that were accepted."
    )
    lost = serializers.ListField(child=serializers.IntegerField(), help_text="Lease ids of `complete` no longer held.")
    leased_by_you = serializers.IntegerField(
        allow_null=True, help_text="When nothing was leased: live leases this worker holds."
    )
    leased_by_others = serializers.IntegerField(
        allow_null=True, help_text="When nothing was leased: live leases other workers hold."
    )
    waiting_on = serializers.IntegerField(
        allow_null=True,
        help_text="When nothing was leased: leases worth waiting for (held by other consumers that are not waiting "
        "themselves, or expired). 0: the caller is at its end; what is left is its own consumer's or "
        "held by consumers that wait too.",
    )
    paused = serializers.CharField(
        allow_null=True,
        help_text="When the job is paused: who paused it and when (nothing is handed out until it is resumed).",
    )
    slicing = serializers.CharField(
        allow_null=True,
        help_text="When the job has been slicing for a minute or more: for how long, how far it got, and what to "
        "check (a Celery worker slices it).",
    )
    deferred = serializers.BooleanField(
        help_text="True when nothing was leased because the caller, slower than the others, is kept from the items "
        "left near the job's end (the others take them). A take with `wait` is held until that changes or the job "
        "ends."
    )


class ResumeLeasesResponseSerializer(serializers.Serializer):
    leases = LeaseSerializer(many=True, help_text="The worker's leases, with new tokens and expiries (oldest first).")


class CompleteManyResponseSerializer(serializers.Serializer):
    completed = serializers.ListField(
        child=serializers.IntegerField(), help_text="Lease ids accepted (or accepted before with the same token)."
    )
    lost = serializers.ListField(
        child=serializers.IntegerField(),
        help_text="Lease ids no longer held with the token given (expired and taken back, fenced, or never the "
        "caller's): nothing of theirs changed.",
    )


class ExtendResponseSerializer(serializers.Serializer):
    extended = serializers.DictField(child=serializers.DateTimeField(), help_text="lease id -> new expiry")
    lost = serializers.ListField(child=serializers.IntegerField())
    done = serializers.ListField(
        child=serializers.IntegerField(),
        help_text="Leases already completed with the token given: nothing to extend, and nothing lost.",
    )
    splits = serializers.DictField(
        child=serializers.IntegerField(),
        help_text="lease id -> the record a split is asked at: the holder answers with POST "
        "/api/v1/leases/{id}/split/ (at that record, or the next one it has not read, or its end to refuse).",
    )
    give_back = serializers.ListField(
        child=serializers.IntegerField(),
        help_text="Leases taken ahead of their consumer (take with ahead) that a worker with nothing to read "
        "asks back: the holder gives each back unread (POST /api/v1/leases/{id}/release/) unless its consumer "
        "has started it, which its next take says (started).",
    )
    split_min_records = serializers.IntegerField(help_text="The fewest records a split leaves to either side.")
    heartbeat_in = serializers.FloatField(
        allow_null=True,
        help_text="Seconds until the next heartbeat the server asks for (holders of record ranges, so that a "
        "split lands soon); null: at the holder's own pace (a third of the lease timeout).",
    )


class SplitResponseSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    start = serializers.IntegerField(help_text="The lease's range after the answer: [start, end).")
    end = serializers.IntegerField()
    split = serializers.BooleanField(help_text="Whether records were split off (false: a refusal).")
    remainder = serializers.IntegerField(allow_null=True, help_text="The new item holding [at, old end).")


class ItemSerializer(serializers.ModelSerializer):
    item = serializers.CharField(read_only=True)

    class Meta:
        model = Item
        fields = [*AUDIT_COLUMNS, "expires_at"]  # the audit's columns, and a live lease's expiry
        read_only_fields = fields


class WorkerSerializer(serializers.ModelSerializer):
    job = serializers.IntegerField(source="job_id", read_only=True)
    mean_item_seconds = serializers.FloatField(read_only=True, allow_null=True)
    records_done = serializers.IntegerField(
        read_only=True,
        help_text="Records of the items it finished (a record range's size; a work read whole counts one).",
    )
    record_seconds = serializers.FloatField(
        read_only=True, allow_null=True, help_text="Its pace: busy seconds per record finished."
    )

    class Meta:
        model = Worker
        fields = [
            "job",
            "name",
            "consumer",
            "waiting_since",
            "first_seen",
            "last_seen",
            "items_done",
            "items_failed",
            "records_done",
            "busy_seconds",
            "mean_item_seconds",
            "record_seconds",
        ]
        read_only_fields = fields


class SnapshotSerializer(serializers.ModelSerializer):
    job = serializers.IntegerField(source="job_id", read_only=True)

    class Meta:
        model = Snapshot
        fields = ["id", "job", "seq", "epochs_materialised", "worker", "created_at"]
        read_only_fields = fields


class RestoreResponseSerializer(serializers.Serializer):
    id = serializers.IntegerField(help_text="The restore's id (the same for a repeat that was a no-op).")
    job = serializers.IntegerField()
    snapshot = serializers.IntegerField()
    seq = serializers.IntegerField(help_text="The snapshot's completion sequence number.")
    reopened = serializers.IntegerField(help_text="Completed items put back to pending.")
    fenced = serializers.IntegerField(help_text="Live leases taken back (their holders get 409).")
    generation = serializers.CharField()
    created_at = serializers.DateTimeField()
    repeated = serializers.BooleanField(
        help_text="True when this call was a repeat of the last restore and changed nothing."
    )
    state = serializers.ChoiceField(choices=JobState.choices, help_text="The job's state after the restore.")


class HistoryEntrySerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=["completed", "leased", "restored"])
    worker = serializers.CharField(required=False, allow_null=True)
    leased_at = serializers.DateTimeField(required=False, allow_null=True)
    completed_at = serializers.DateTimeField(required=False, allow_null=True)
    duration = serializers.FloatField(required=False, allow_null=True)
    records = serializers.IntegerField(required=False, allow_null=True)
    seq = serializers.IntegerField(required=False, allow_null=True)
    rolled_back_by = serializers.IntegerField(required=False, allow_null=True, help_text="The restore that undid it.")
    restore = serializers.IntegerField(required=False)
    snapshot = serializers.IntegerField(required=False)
    at = serializers.DateTimeField(required=False)


class SplitEventSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=["split", "remainder"])
    at = serializers.DateTimeField()
    worker = serializers.CharField(help_text="split: the holder that was cut; remainder: the worker it was for.")
    message = serializers.CharField()


class ItemHistorySerializer(serializers.Serializer):
    id = serializers.IntegerField()
    job = serializers.IntegerField()
    item = serializers.CharField()
    epoch = serializers.IntegerField()
    position = serializers.IntegerField()
    state = serializers.ChoiceField(choices=ItemState.choices)
    start = serializers.IntegerField(allow_null=True, help_text="The item's record range (null: a whole work).")
    end = serializers.IntegerField(allow_null=True)
    parent = serializers.IntegerField(allow_null=True, help_text="The item whose unread records this one holds.")
    history = HistoryEntrySerializer(many=True)
    splits = SplitEventSerializer(many=True, help_text="Splits of this item, or the split that made it.")
