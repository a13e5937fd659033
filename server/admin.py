"""Django admin: jobs, items and workers, read-mostly.

State changes belong to the services (the API and the dashboard call them),
so the admin shows the data and lets an operator fix a name or revoke a token,
nothing that would bypass the lease protocol.

A token is revoked only by the "Revoke selected tokens" action, which calls
the same service as the API (``accounts.revoke_by_id``): the revocation is
announced to every server process (it takes effect at once, not after their
token caches' seconds) and audited. Its ``revoked_at`` (and key hash, role,
scope, times) cannot be edited, so a token is never un-revoked, and tokens
cannot be deleted, so none loses its history.
"""

from django.contrib import admin, messages

from .errors import InvalidTransition, NotFound
from .models import ApiToken, Event, Item, ItemHistory, Job, Snapshot, SnapshotRestore, Worker
from .services import accounts


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
    # Only the label is editable: a field whose change every server process
    # must hear of at once (revoked_at, expires_at) changes through a service.
    readonly_fields = (
        "user",
        "role",
        "jobs",
        "prefix",
        "key_hash",
        "created_at",
        "last_used_at",
        "expires_at",
        "revoked_at",
    )
    fields = ("user", "role", "jobs", "name", "prefix", "created_at", "last_used_at", "expires_at", "revoked_at")
    actions = ["revoke_tokens"]

    def has_add_permission(self, request):
        return False  # keys are shown once: create them with `manage.py create_token` or the API

    def has_delete_permission(self, request, obj=None):
        return False  # revoke instead: a revoked token keeps its history (and its user's deletion is refused)

    @admin.action(description="Revoke selected tokens", permissions=["change"])
    def revoke_tokens(self, request, queryset):
        revoked, skipped = 0, 0
        for token_id in queryset.order_by("pk").values_list("pk", flat=True):
            try:
                # Each in its own transaction: one already revoked (or revoked meanwhile) leaves the others to go.
                accounts.revoke_by_id(token_id, request.user, via="in the admin site")
            except (InvalidTransition, NotFound):
                skipped += 1
            else:
                revoked += 1
        if revoked:
            what = "1 token: it stops" if revoked == 1 else f"{revoked} tokens: they stop"
            self.message_user(request, f"Revoked {what} working at once, in every server process.", messages.SUCCESS)
        if skipped:
            what = "1 token was" if skipped == 1 else f"{skipped} tokens were"
            self.message_user(request, f"{what} already revoked.", messages.WARNING)
