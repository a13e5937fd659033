"""A job's units and its epochs of items: the rows beneath job creation and slicing.

A job's units are its per-epoch list (a work, or a slice of one); epoch k's
items are made from them by one statement (materialise_epoch.sql). Job
creation writes the works as units, slicing replaces them with record ranges,
and a take materialises the next epoch when the current one runs out: all
three come here, and this module imports none of them.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable

from django.db import connection

from .. import sql
from ..models import Unit

log = logging.getLogger("shardline.jobs")

COPY_BATCH = 50_000
_NULL = "\\N"


UnitRow = tuple[str, int | None, int | None, int | None, dict | None]


def write_units(job_id: int, units: Iterable[UnitRow], *, replace: bool = False) -> int:
    """Writes the job's units, ``(item, offset, start, end, source)`` in order, and returns how many.

    ``start`` and ``end`` are a slice's record range (None for a work read
    whole); ``offset`` the byte where its first record starts, when known;
    ``source`` a table slice's key range (models.Unit). ``replace`` deletes
    the job's units first.

    COPY in text format, written in large blocks: a million rows in well under
    a second, where INSERTs would take minutes. The caller holds the job (a
    new job's transaction, or its row lock).
    """
    if replace:
        Unit.objects.filter(job_id=job_id).delete()
    count = 0
    with connection.cursor() as cursor:
        columns = 'job_id, idx, item, "offset", start, "end", source'
        with cursor.cursor.copy(f"COPY shardline_unit ({columns}) FROM STDIN") as copy:
            block = []
            for count, (item, offset, start, end, source) in enumerate(units, start=1):
                block.append(
                    f"{job_id}\t{count - 1}\t{_copy_text(item)}\t{_copy_int(offset)}\t{_copy_int(start)}"
                    f"\t{_copy_int(end)}\t{_NULL if source is None else _copy_text(json.dumps(source))}\n"
                )
                if len(block) == COPY_BATCH:
                    copy.write("".join(block))
                    block.clear()
            copy.write("".join(block))
    return count


def _copy_int(value: int | None) -> str:
    return _NULL if value is None else str(value)


def _copy_text(value: str) -> str:
    # COPY's text format: backslashes, tabs and line breaks are escaped.
    if "\\" in value or "\t" in value or "\n" in value or "\r" in value:
        value = value.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")
    return value


def materialise_epoch(job_id: int, epoch: int, drained: bool = False) -> bool:
    """Creates the items of one epoch; False when another caller has it (or had it) already.

    ``drained``: only once the epochs before it hold no pending item (else False too).
    """
    created = bool(sql.run("materialise_epoch", {"job": job_id, "epoch": epoch, "drained": drained}))
    if created:
        log.info("epoch materialised", extra={"event": "epoch_materialised", "job": job_id, "epoch": epoch})
    return created
