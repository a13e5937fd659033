"""The create-job form. Validation is the API's (JobCreateSerializer), so the
dashboard and the REST API accept and refuse exactly the same jobs."""

from django import forms
from django.conf import settings

from server import selectors
from server.api.serializers import JobCreateSerializer
from server.models import JobState
from worker_sdk.protocol import MAX_WORKER_LENGTH


class JobForm(forms.Form):
    name = forms.CharField(max_length=200, help_text="Letters, digits, '.', '_' and '-'.")
    works = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 6, "spellcheck": "false"}),
        help_text="One per line: files, directories or globs (e.g. /data/day=*/part-*.csv).",
    )
    num_epochs = forms.IntegerField(label="Epochs", initial=1, min_value=1)
    shuffle = forms.BooleanField(required=False, initial=True)
    seed = forms.IntegerField(required=False, help_text="Empty: the server draws one.")
    prefix = forms.CharField(required=False, strip=False, help_text="Joined to the front of every work.")
    num_slices = forms.IntegerField(
        label="Slices", required=False, help_text="Split tables and large files into this many items per epoch."
    )
    lease_timeout = forms.FloatField(label="Lease timeout (s)", required=False, initial=None)
    max_attempts = forms.IntegerField(label="Max attempts", required=False)
    split_tail = forms.BooleanField(
        label="Split the tail",
        required=False,
        initial=True,
        help_text="At the end of the queue, hand the unread records of slices still being read to idle workers.",
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["lease_timeout"].widget.attrs["placeholder"] = str(settings.SHARDLINE_DEFAULT_LEASE_TIMEOUT)
        self.fields["max_attempts"].widget.attrs["placeholder"] = str(settings.SHARDLINE_DEFAULT_MAX_ATTEMPTS)
        self.spec = None

    def clean(self):
        data = super().clean()
        # Fields Django already refused keep their message; the API's rules
        # judge the rest, so every wrong field is reported in one round.
        body = {
            key: value for key, value in data.items() if value not in (None, "") or key in ("shuffle", "split_tail")
        }
        if "works" in data:
            body["works"] = [line for line in data["works"].splitlines() if line.strip()]
        serializer = JobCreateSerializer(data=body)
        if not serializer.is_valid():
            for field, messages in serializer.errors.items():
                if field in self.errors:
                    continue
                target = field if field in self.fields else None
                for message in messages if isinstance(messages, list) else [messages]:
                    self.add_error(target, str(message))
        elif not self.errors:
            self.spec = serializer.to_spec()
        return data


class AuditFilterForm(forms.Form):
    """The audit's filters, read from the URL (so a view can be shared and its CSV is the same selection)."""

    state = forms.ChoiceField(
        choices=[(value, value) for value in selectors.AUDIT_STATES],
        required=False,
        help_text="completed: every item a worker finished, newest first.",
    )
    epoch = forms.IntegerField(min_value=0, max_value=2**31 - 1, required=False)
    worker = forms.CharField(max_length=MAX_WORKER_LENGTH, required=False, help_text="A worker name or its prefix.")
    page = forms.IntegerField(min_value=1, required=False)

    def filters(self) -> dict:
        """state, epoch and worker as the selectors take them (completed when no state is given)."""
        data = self.cleaned_data
        return {
            "state": data["state"] or selectors.COMPLETED,
            "epoch": data["epoch"],
            "worker": data["worker"].strip() or None,
        }


# Sortable columns of the jobs list: "column" ascending, "-column" descending.
JOB_SORT_COLUMNS = ("created", "name", "state", "elapsed")
JOB_SORTS = [value for column in JOB_SORT_COLUMNS for value in (column, f"-{column}")]


class JobsFilterForm(forms.Form):
    """The jobs list's search, state filter, sort and page, read from the URL."""

    q = forms.CharField(label="Search", max_length=200, required=False)
    state = forms.ChoiceField(choices=[("", "all"), *JobState.choices], required=False)
    sort = forms.ChoiceField(choices=[(value, value) for value in JOB_SORTS], required=False)
    page = forms.IntegerField(min_value=1, required=False)
