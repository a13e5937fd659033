"""``shardline jobs ...`` and ``shardline snapshots ...``: one command per thing a pipeline does with a job."""

from __future__ import annotations

import json
import sys
import time

import click

from .output import emit, progress_line, table
from .settings import Settings

# `jobs watch` exits with these when the job ends other than done (0).
EXIT_FAILED = 3
EXIT_CANCELLED = 4
JOB_COLUMNS = ["id", "name", "state", "works_count", "units_count", "num_epochs", "created_at"]


def _as_json(ctx, param, value):
    if value:
        ctx.find_object(Settings).as_json = True


# Every command takes --json too, where people type it (after the command).
json_option = click.option(
    "--json", is_flag=True, expose_value=False, callback=_as_json, help="JSON instead of tables."
)


def resolve(settings: Settings, job: str) -> int:
    """A job given by id or by name (names are looked up in the list, newest first)."""
    if job.isdigit():
        return int(job)
    page = 1
    while True:
        listing = settings.client.jobs(page=page, page_size=500)
        for row in listing["results"]:
            if row["name"] == job:
                return row["id"]
        if not listing.get("next"):
            raise click.BadParameter(f"no job named {job!r} that this token can see", param_hint="JOB")
        page += 1


@click.group()
def jobs():
    """Create, list, show, watch, pause, resume, cancel, retry and audit jobs."""


@jobs.command("list")
@click.option("--state", help="Only jobs in this state (running, done, ...).")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 500), help="Newest first.")
@json_option
@click.pass_obj
def list_jobs(settings: Settings, state, limit):
    """The jobs this token can see, newest first."""
    rows = settings.client.jobs(state=state, page_size=limit)["results"]
    emit(settings, rows, lambda: table(rows, JOB_COLUMNS))


@jobs.command("show")
@click.argument("job")
@json_option
@click.pass_obj
def show(settings: Settings, job):
    """One job (by id or name) and its watermarks."""
    job_id = resolve(settings, job)
    detail = settings.client.job(job_id)
    marks = settings.client.watermarks(job_id)

    def text():
        lines = [f"{key}: {detail[key]}" for key in ("id", "name", "state", "works_count", "units_count")]
        lines += [f"{key}: {detail[key]}" for key in ("num_epochs", "shuffle", "seed", "num_slices", "lease_timeout")]
        lines.append(progress_line(marks))
        lines += [f"warning: {warning}" for warning in detail.get("warnings", [])]
        if detail.get("error"):
            lines.append(f"error: {detail['error']}")
        return "\n".join(lines)

    emit(settings, {**detail, "watermarks": marks}, text)


@jobs.command("create")
@click.argument("name")
@click.argument("works", nargs=-1)
@click.option("--works-from", type=click.File("r"), help="More works, one per line ('-': standard input).")
@click.option(
    "--spec", "spec_file", type=click.File("r"), help="A JSON job spec (the API's fields); flags override it."
)
@click.option("--run", help="The training run: the job is NAME.RUN, shown with the queue's other runs.")
@click.option("--epochs", "num_epochs", type=int, help="Epochs (default 1).")
@click.option("--shuffle/--no-shuffle", default=None, help="Shuffle each epoch (default: shuffle).")
@click.option("--seed", type=int, help="The shuffle's seed (default: the server draws one).")
@click.option("--prefix", help="Joined to each work.")
@click.option("--slices", "num_slices", type=int, help="Cut the works into this many record ranges per epoch.")
@click.option("--lease-timeout", type=float, help="Seconds a silent worker keeps an item.")
@click.option("--max-attempts", type=int, help="Tries per item before it fails.")
@json_option
@click.pass_obj
def create(settings: Settings, name, works, works_from, spec_file, **fields):
    """Creates job NAME over WORKS (or attaches to it: the same name and spec give the same job)."""
    spec = json.load(spec_file) if spec_file else {}
    listed = list(works) + ([line.strip() for line in works_from if line.strip()] if works_from else [])
    spec.update({"name": name, **({"works": listed} if listed else {})})
    spec.update({key: value for key, value in fields.items() if value is not None})
    if not spec.get("works"):
        raise click.UsageError("no works: give them as arguments, with --works-from, or in --spec")
    job = settings.client.create_job(spec)
    emit(settings, job, lambda: f"job {job['id']} {job['name']!r}: {job['state']}, {job['works_count']} works")


@jobs.command("watch")
@click.argument("job")
@click.option("--interval", default=2.0, show_default=True, type=click.FloatRange(0.1), help="Seconds between looks.")
@json_option
@click.pass_obj
def watch(settings: Settings, job, interval):
    """Shows a job's progress, rate and ETA until it ends; the exit code says how it ended.

    0 done, 3 failed, 4 cancelled. With --json, one watermarks object per line.
    """
    job_id = resolve(settings, job)
    live = sys.stdout.isatty() and not settings.as_json
    last = None
    while True:
        marks = settings.client.watermarks(job_id)
        line = progress_line(marks)
        if settings.as_json:
            click.echo(json.dumps(marks))
        elif live:
            click.echo("\r" + line.ljust(100), nl=False)
        elif line != last:
            click.echo(line)
        last = line
        if marks["state"] in ("done", "failed", "cancelled"):
            break
        time.sleep(interval)
    if live:
        click.echo()
    if marks["state"] == "failed":
        error = settings.client.job(job_id).get("error") or "no reason recorded"
        click.echo(f"job {marks['name']!r} failed: {error}", err=True)
        raise SystemExit(EXIT_FAILED)
    if marks["state"] == "cancelled":
        click.echo(f"job {marks['name']!r} was cancelled", err=True)
        raise SystemExit(EXIT_CANCELLED)


def _action(name: str, action: str, summary: str):
    @click.argument("job")
    @json_option
    @click.pass_obj
    def command(settings: Settings, job):
        result = settings.client.job_action(resolve(settings, job), action)
        state = result.get("state") or result.get("job", {}).get("state")
        emit(settings, result, lambda: f"{name}: job {job} is {state}")

    command.__doc__ = summary
    jobs.command(name)(command)


_action("pause", "pause", "Pauses a job: takes wait until it is resumed (admin).")
_action("resume", "resume", "Resumes a paused job (admin).")
_action("cancel", "cancel", "Cancels a job: its workers stop with JobCancelledError (admin).")
_action("retry", "retry-failed", "Puts a job's failed items back to pending with fresh attempts (admin).")


@jobs.command("audit")
@click.argument("job")
@click.option("--format", "form", type=click.Choice(["csv", "json"]), default="csv", show_default=True)
@click.option("--state", help="An item state, or completed (done or failed).")
@click.option("--epoch", type=int)
@click.option("--worker", help="A worker name or its prefix.")
@click.option("--output", "-o", type=click.File("wb"), default="-", help="A file (default: standard output).")
@json_option
@click.pass_obj
def audit(settings: Settings, job, form, state, epoch, worker, output):
    """Which worker completed which item, when, in how long: the server's CSV export, or JSON rows."""
    job_id = resolve(settings, job)
    filters = {
        key: value for key, value in (("state", state), ("epoch", epoch), ("worker", worker)) if value is not None
    }
    if form == "csv":
        output.write(settings.client.items_csv(job_id, filters))
        return
    cursor = None
    while True:
        page = settings.client.items(job_id, filters, cursor=cursor)
        for row in page["results"]:
            output.write((json.dumps(row) + "\n").encode())
        if not page.get("next"):
            return
        cursor = _cursor_of(page["next"])


def _cursor_of(url: str) -> str:
    from urllib.parse import parse_qs, urlparse

    return parse_qs(urlparse(url).query)["cursor"][0]


@click.group()
def snapshots():
    """Snapshot a job's position, and restore one."""


@snapshots.command("create")
@click.argument("job")
@json_option
@click.pass_obj
def snapshot(settings: Settings, job):
    """Takes a snapshot of a job's position (its newest completion)."""
    taken = settings.client.snapshot(resolve(settings, job), "shardline-cli")
    emit(settings, taken, lambda: f"snapshot {taken['id']} of job {taken['job']} at completion {taken['seq']}")


@snapshots.command("restore")
@click.argument("job")
@click.argument("snapshot_id", type=int)
@click.option("--generation", default="", help="The restarted run's name: repeats with it are no-ops.")
@json_option
@click.pass_obj
def restore(settings: Settings, job, snapshot_id, generation):
    """Restores a snapshot: items completed after it, and live leases, go back to pending."""
    done = settings.client.restore(resolve(settings, job), snapshot_id, "shardline-cli", generation)
    emit(
        settings,
        done,
        lambda: (
            f"restored snapshot {snapshot_id}: {done['reopened']} items reopened, {done['fenced']} leases taken back"
        ),
    )
