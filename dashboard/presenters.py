"""Numbers to what the templates draw: percentages, durations, chart points."""

from __future__ import annotations

import re

ENDED = ("done", "cancelled", "failed")


def _percent(part: int, total: int) -> float:
    return round(100.0 * part / total, 2) if total else 0.0


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m {seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m"


def job_row(progress) -> dict:
    """What the jobs table and the job header show for one job (a server.progress.JobProgress)."""
    total = progress.total
    rate = progress.rate_per_second
    eta = progress.eta_seconds
    return {
        "job": progress.job,
        "total": total,
        "done": progress.done,
        "leased": progress.leased,
        "failed": progress.failed,
        "pending": progress.pending,
        "expired": progress.expired,
        "done_pct": _percent(progress.done, total),
        "leased_pct": _percent(progress.leased, total),
        "failed_pct": _percent(progress.failed, total),
        # None (shown as a dash) once the job has ended: no rate, no workers.
        "per_minute": None if rate is None else round(rate * 60),
        # An ended job has no ETA (the rate's estimate says 0s once nothing is left).
        "eta": duration(eta) if eta is not None and progress.job.state not in ENDED else "—",
        "live_workers": progress.live_workers,
        # selectors.jobs() annotates it: from the start to the end, or to now.
        "elapsed": duration(progress.job.elapsed.total_seconds()) if progress.job.elapsed is not None else "—",
    }


def group_runs(rows: list[dict]) -> list[dict]:
    """Rows grouped by queue (in the order of each queue's first row): the runs of one queue together."""
    groups: dict[str, dict] = {}
    for row in rows:
        job = row["job"]
        group = groups.setdefault(job.queue, {"queue": job.queue, "rows": []})
        group["rows"].append({**row, "run": job.run})
    return list(groups.values())


MAX_EPOCH_BARS = 30


def epoch_bars(epochs) -> dict:
    """Stacked bars for the first epochs (and the current one); the rest are summed up in a line."""
    shown = epochs[:MAX_EPOCH_BARS]
    bars = []
    for e in shown:
        bars.append(
            {
                **e.__dict__,
                "done_pct": _percent(e.done, e.total),
                "leased_pct": _percent(e.leased, e.total),
                "failed_pct": _percent(e.failed, e.total),
                "pending_pct": _percent(e.pending, e.total),
            }
        )
    return {"bars": bars, "hidden": len(epochs) - len(shown)}


CHART_WIDTH, CHART_HEIGHT = 600, 170
# The top margin holds the unit label above the top tick (at 8 they overlapped).
CHART_LEFT, CHART_BOTTOM, CHART_TOP = 44, 22, 22


def _nice_ceiling(value: int) -> int:
    """The smallest of 1, 2, 5 x 10^k that is >= value (so the axis reads in round numbers)."""
    step = 1
    while True:
        for factor in (1, 2, 5):
            if factor * step >= value:
                return factor * step
        step *= 10


def throughput_chart(samples: list[tuple]) -> dict:
    """Items per minute as an SVG line with axes: the complete minutes only.

    The current minute is still filling up; drawn as a point it would look
    like a drop at the right edge, so it is reported in words instead.
    """
    complete, current = samples[:-1], (samples[-1] if samples else None)
    counts = [count for _minute, count in complete]
    top = _nice_ceiling(max(counts, default=0) or 1)
    plot_w, plot_h = CHART_WIDTH - CHART_LEFT - 4, CHART_HEIGHT - CHART_BOTTOM - CHART_TOP
    step = plot_w / max(len(counts) - 1, 1)

    def x(i: int) -> float:
        return round(CHART_LEFT + i * step, 1)

    def y(count: float) -> float:
        return round(CHART_TOP + plot_h - count / top * plot_h, 1)

    points = [
        {
            "x": x(i),
            "y": y(count),
            "count": count,
            "label": minute.strftime("%H:%M"),
            "left": round(x(i) - step / 2, 1),
            "width": round(step, 1),
        }
        for i, (minute, count) in enumerate(complete)
    ]
    return {
        "points": " ".join(f"{p['x']},{p['y']}" for p in points),
        "samples": points,
        "y_ticks": [{"y": y(value), "value": value} for value in ((0, top // 2, top) if top >= 4 else (0, top))],
        "x_ticks": [p for i, p in enumerate(points) if (len(points) - 1 - i) % 5 == 0],
        "peak": max(counts, default=0),
        "last": counts[-1] if counts else 0,
        "current": current[1] if current else 0,
        "minutes": len(counts),
        "width": CHART_WIDTH,
        "height": CHART_HEIGHT,
        "left": CHART_LEFT,
        "right": CHART_WIDTH - 4,
        "bottom": CHART_TOP + plot_h,
        "top": CHART_TOP,
    }


# What cut.sql records on a split item (its message is fixed text, kept as recorded):
# the ids of the new items and the worker the split was proposed for follow
# the record range, and read as if they were records and the pieces' reader.
_SPLIT = re.compile(
    r"^split at record (?P<at>\d+): the holder keeps \[(?P<first>\d+), \d+\); records \[\d+, (?P<stop>\d+)\) became "
    r"(?:item (?P<one>\d+)|(?P<count>\d+) items, (?P<low>\d+) to (?P<high>\d+))(?: for (?P<asker>.+))?$"
)


def split_story(message: str, holder: str = "") -> str:
    """A split event recorded before cut.sql said it this way, in the words it uses now (others unchanged)."""
    match = _SPLIT.match(message or "")
    if match is None:
        return message
    m = match.groupdict()
    items = f"item #{m['one']}" if m["one"] else f"{m['count']} items, #{m['low']} to #{m['high']}"
    story = (
        f"split at record {m['at']}: {holder or 'the holder'} keeps records [{m['first']}, {m['at']}); "
        f"records [{m['at']}, {m['stop']}) became pending {items}"
    )
    # The worker that was idle and asked: the pieces go to whichever worker takes them.
    return story + (f", asked for by idle worker {m['asker']}" if m["asker"] else "")


def item_timeline(history: list[dict], events) -> list[dict]:
    """An item's leases (current and rolled back), restores and events in the order they happened."""
    entries = [{**h, "at": h.get("at") or h.get("leased_at")} for h in history]
    entries += [{"kind": e.kind, "event": True, "at": e.at, "worker": e.worker, "message": e.message} for e in events]
    return sorted(entries, key=lambda entry: (entry["at"] is None, entry["at"]))


TIMELINE_WIDTH, TIMELINE_LEFT, TIMELINE_ROW, TIMELINE_MAX_WORKERS = 600, 4, 14, 40


def timeline_chart(data: dict, ended: bool = False) -> dict:
    """Gantt rows, one per worker (in order of their first lease): a bar per lease, from lease to completion.

    A lease still held runs to now. Idle gaps at the right edge are the
    tail: workers that ran out of items while others still read.
    """
    start, end = data["start"], data["end"]
    leases = data["leases"]
    if ended and leases:
        # A finished job's window is its activity: from the first lease shown to the last
        # completion, not to a finish (or now) long after it (the bars were 2% of the width).
        # Nor before it: a holder may complete what it read after a cancel.
        start = max(start, min(lease["leased_at"] for lease in leases))
        completions = [lease["completed_at"] for lease in leases if lease["completed_at"]]
        end = max(completions) if completions else end
    span = max((end - start).total_seconds(), 1.0)
    plot_w = TIMELINE_WIDTH - TIMELINE_LEFT - 4

    def x(moment) -> float:
        return round(TIMELINE_LEFT + max(0.0, (moment - start).total_seconds()) / span * plot_w, 1)

    by_worker: dict[str, list] = {}
    for lease in sorted(data["leases"], key=lambda lease: lease["leased_at"]):
        by_worker.setdefault(lease["worker"] or "?", []).append(lease)
    names = list(by_worker)[:TIMELINE_MAX_WORKERS]
    rows = []
    for index, name in enumerate(names):
        bars = []
        for lease in by_worker[name]:
            until = lease["completed_at"] or (data["now"] if lease["state"] == "leased" else end)
            left = x(lease["leased_at"])
            bars.append(
                {
                    "id": lease["id"],
                    "x": left,
                    "width": max(1.0, round(x(until) - left, 1)),
                    "state": lease["state"],
                    "item": lease["item"],
                    "from": lease["leased_at"],
                    "until": until,
                    "seconds": round((until - lease["leased_at"]).total_seconds(), 1),
                }
            )
        rows.append({"worker": name, "y": index * TIMELINE_ROW, "bars": bars, "count": len(bars)})
    ticks = [{"x": round(TIMELINE_LEFT + plot_w * i / 4, 1), "at": start + (end - start) * i / 4} for i in range(5)]
    return {
        "rows": rows,
        "hidden_workers": len(by_worker) - len(names),
        "truncated": data["truncated"],
        "width": TIMELINE_WIDTH,
        "height": len(rows) * TIMELINE_ROW + 18,
        "axis_y": len(rows) * TIMELINE_ROW + 2,
        "row_height": TIMELINE_ROW - 3,
        "ticks": ticks,
        "start": start,
        "end": end,
    }


CONNECT_MAX_WORKS = 10


def connect_snippet(job, works: list[str] | None, server_url: str, works_url: str | None) -> dict:
    """How a training script attaches to this job: the environment and a ``WorkQueue(...)`` call that runs.

    ``works`` is the list the job was created with (without its prefix), or
    None when the server cannot tell it (it keeps only a digest, and slicing
    replaced the units). A short list is written out; a longer one is read
    from works.json (the page links it at ``works_url``). A job of a run
    passes its queue's name and the run; others leave SHARDLINE_RUN to the
    user (the env lines say what it would do).
    """
    queue, run = job.queue, job.run
    count = job.works_count
    lines = ["from worker_sdk import WorkQueue", ""]
    if works is not None and len(works) <= CONNECT_MAX_WORKS:
        works_arg = "[" + ", ".join(repr(work) for work in works) + "]"
    else:
        if works is not None:
            source = [f"# The {count} works this job was created with, in order: works.json from {works_url}"]
        else:
            source = [
                f"# The {count} works this job was created with, in the same order, as a JSON list in works.json",
                "# (the server keeps only their digest: another list answers 409 naming works).",
            ]
        lines = [
            "import json",
            "",
            *lines,
            *source,
            'with open("works.json") as file:',
            "    works = json.load(file)",
            "",
        ]
        works_arg = "works"
    args = [works_arg, f"num_epochs={job.num_epochs}", f"shuffle={job.shuffle}", f"seed={job.seed}"]
    if job.prefix:
        args.append(f"prefix={job.prefix!r}")
    if job.num_slices:
        args.append(f"num_slices={job.num_slices}")
    args.append(f"name={(queue if run else job.name)!r}")
    if run:
        args.append(f"run={run!r}")
    lines += ["work_queue = WorkQueue(", *(f"    {arg}," for arg in args), ")"]
    env = [
        f"export SHARDLINE_URL={server_url}",
        "export SHARDLINE_TOKEN=...  # a worker token: manage.py create_token NAME --role worker",
    ]
    if not run:
        env.append(f"unset SHARDLINE_RUN  # with a run set, the queue is another job: {job.name}.<run>")
    return {"env": "\n".join(env), "code": "\n".join(lines)}
