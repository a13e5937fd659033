"""Numbers to what the templates draw: percentages, durations, chart points."""

from __future__ import annotations


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


def job_row(job, summary: dict) -> dict:
    """What the jobs table and the job header show for one job."""
    total = summary["total"]
    per_minute = summary.get("per_minute")
    if per_minute is None:  # watermarks give a rate per second
        per_minute = round(summary.get("rate_per_second", 0) * 60)
    eta = summary.get("eta_seconds")
    return {
        "job": job,
        "total": total,
        "done": summary["done"],
        "leased": summary["leased"],
        "failed": summary["failed"],
        "pending": summary["pending"],
        "done_pct": _percent(summary["done"], total),
        "leased_pct": _percent(summary["leased"], total),
        "failed_pct": _percent(summary["failed"], total),
        "per_minute": per_minute,
        "eta": duration(eta) if eta is not None else "—",
        "live_workers": summary["live_workers"],
    }


MAX_EPOCH_BARS = 30


def epoch_bars(epochs: list[dict]) -> dict:
    """Stacked bars for the first epochs (and the current one); the rest are summed up in a line."""
    shown = epochs[:MAX_EPOCH_BARS]
    bars = []
    for e in shown:
        total = e["total"]
        bars.append(
            {
                **e,
                "done_pct": _percent(e["done"], total),
                "leased_pct": _percent(e["leased"], total),
                "failed_pct": _percent(e["failed"], total),
                "pending_pct": _percent(e["pending"], total),
            }
        )
    return {"bars": bars, "hidden": len(epochs) - len(shown)}


CHART_WIDTH, CHART_HEIGHT = 600, 120


def throughput_chart(samples: list[tuple]) -> dict:
    """An SVG polyline of items per minute (oldest on the left)."""
    counts = [count for _minute, count in samples]
    peak = max(counts, default=0)
    step = CHART_WIDTH / max(len(counts) - 1, 1)
    scale = (CHART_HEIGHT - 10) / peak if peak else 0
    points = " ".join(f"{i * step:.1f},{CHART_HEIGHT - count * scale:.1f}" for i, count in enumerate(counts))
    return {
        "points": points,
        "peak": peak,
        "last": counts[-1] if counts else 0,
        "minutes": len(counts),
        "width": CHART_WIDTH,
        "height": CHART_HEIGHT,
        "samples": [(minute.strftime("%H:%M"), count) for minute, count in samples],
    }
