"""What the ``shardline`` command prints: JSON for programs, tables and one-line progress for people."""

from __future__ import annotations

import json

import click

BAR = 30


def emit(settings, data, text) -> None:
    """``data`` as JSON with --json, else ``text()``."""
    click.echo(json.dumps(data, indent=2) if settings.as_json else text())


def table(rows: list[dict], columns: list[str]) -> str:
    if not rows:
        return "(none)"
    cells = [[str(row.get(column, "")) for column in columns] for row in rows]
    widths = [max(len(column), *(len(line[i]) for line in cells)) for i, column in enumerate(columns)]
    lines = ["  ".join(column.upper().ljust(width) for column, width in zip(columns, widths))]
    lines += ["  ".join(cell.ljust(width) for cell, width in zip(line, widths)) for line in cells]
    return "\n".join(line.rstrip() for line in lines)


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}h{rest // 60:02d}m" if hours else f"{rest // 60}m{rest % 60:02d}s"


def progress_line(marks: dict) -> str:
    """``name [#####.....] 40% 400/1000 done, 3 leased, 0 failed  12.5/s  ETA 0m48s  running``."""
    total, done, failed = marks["total"], marks["done"], marks["failed"]
    fraction = (done + failed) / total if total else 0.0
    filled = int(round(fraction * BAR))
    rate = marks.get("rate_per_second")
    parts = [
        f"{marks['name']} [{'#' * filled}{'.' * (BAR - filled)}] {fraction:4.0%}",
        f"{done}/{total} done, {marks['leased']} leased, {failed} failed",
        f"{rate:.1f}/s" if rate is not None else "",
        f"ETA {duration(marks.get('eta_seconds'))}" if marks.get("eta_seconds") is not None else "",
        marks["state"],
    ]
    return "  ".join(part for part in parts if part)
