"""Django admin: jobs, items and workers, read-mostly.

State changes belong to the services (the API and the dashboard call them),
so the admin shows the data and lets an operator fix a name or revoke a token,
nothing that would bypass the lease protocol.
"""

from django.contrib import admin

from .models import ApiToken, Event, Item, ItemHistory, Job, Snapshot, SnapshotRestore, Worker


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(Job)
class JobAdmin(ReadOnlyAdmin):
    list_display = ("id", "name", "state", "units_count", "num_epochs", "epochs_materialised", "created_at")
    list_filter = ("state",)
    search_fields = ("name",)


@admin.register(Item)
class ItemAdmin(ReadOnlyAdmin):
    list_display = ("id", "job", "epoch", "position", "state", "attempts", "worker", "completed_at")
    list_filter = ("state",)
    search_fields = ("worker",)
    list_select_related = ("job",)
    show_full_result_count = False  # no count(*) over a million rows per page


@admin.register(Worker)
class WorkerAdmin(ReadOnlyAdmin):
    list_display = ("name", "job", "items_done", "items_failed", "mean_item_seconds", "last_seen")
    search_fields = ("name",)
    list_select_related = ("job",)


@admin.register(Event)
class EventAdmin(ReadOnlyAdmin):
    list_display = ("at", "job", "kind", "worker", "message")
    list_filter = ("kind",)
    list_select_related = ("job",)


@admin.register(Snapshot)
class SnapshotAdmin(ReadOnlyAdmin):
    list_display = ("id", "job", "seq", "epochs_materialised", "worker", "created_at")
    list_select_related = ("job",)


@admin.register(SnapshotRestore)
class SnapshotRestoreAdmin(ReadOnlyAdmin):
    list_display = ("id", "job", "snapshot", "reopened", "fenced", "generation", "worker", "created_at")
    list_select_related = ("job",)


@admin.register(ItemHistory)
class ItemHistoryAdmin(ReadOnlyAdmin):
    list_display = ("id", "job", "item_id", "state", "epoch", "position", "worker", "completed_at", "seq", "restore")
    list_select_related = ("job",)
    show_full_result_count = False


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ("prefix", "user", "role", "jobs", "name", "created_at", "last_used_at", "expires_at", "revoked_at")
    list_filter = ("role",)
    readonly_fields = ("user", "role", "jobs", "prefix", "key_hash", "created_at", "last_used_at")
    fields = ("user", "role", "jobs", "name", "prefix", "created_at", "last_used_at", "expires_at", "revoked_at")

    def has_add_permission(self, request):
        return False  # keys are shown once: create them with `manage.py create_token`
