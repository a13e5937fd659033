"""How a work names its format and how an item names a slice: one definition for the server and the SDK.

The server's slicer and request validation and the SDK's readers import this
module (it imports nothing), so that an item the server writes is the item
the reader parses.

    lines     .csv .tsv .txt .jsonl .ndjson .json  one record per line
    tfrecord  .tfrecord .tfrecords                 TFRecord records
    parquet   .parquet .pq                         rows

A work chooses its format by extension, or explicitly with a ``#format=NAME``
suffix. A slice of records ``[S, E)`` of a file is the item
``path?start=S&end=E`` (DeepRec's spelling), with the ``#format=NAME`` suffix
kept last when the format was chosen explicitly.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qs

EXTENSIONS = {
    "lines": (".csv", ".tsv", ".txt", ".jsonl", ".ndjson", ".json"),
    "tfrecord": (".tfrecord", ".tfrecords"),
    "parquet": (".parquet", ".pq"),
}
FORMATS = tuple(EXTENSIONS)

# A work of no known format is never sliced (the server cannot count its
# records); handed to a reader whole, it is read as lines.
READ_UNKNOWN_AS = "lines"

_FORMAT_SUFFIX = "#format="


class FormatError(ValueError):
    """A work or item that names an unknown format or a malformed slice. The message says which and why."""


@dataclass(frozen=True)
class Slice:
    """An item parsed: the file, the record range (None, None for a whole file) and the format (None: unknown)."""

    path: str
    start: int | None
    end: int | None
    format: str | None


def format_of(path: str) -> str | None:
    """The format of ``path`` by its extension, None when it has no known one."""
    lower = path.lower()
    for name, extensions in EXTENSIONS.items():
        if lower.endswith(extensions):
            return name
    return None


def split_format(work: str) -> tuple[str, str | None]:
    """``path#format=tfrecord`` -> ("path", "tfrecord"); a work without the suffix -> (work, None)."""
    if _FORMAT_SUFFIX not in work:
        return work, None
    path, _, name = work.rpartition(_FORMAT_SUFFIX)
    if name not in FORMATS:
        raise FormatError(f"{work}: unknown format {name!r}; use one of {', '.join(FORMATS)}")
    return path, name


def parse(item: str) -> Slice:
    """An item (a work, or a slice of one) as its path, record range and format."""
    rest, forced = split_format(item)
    path, start, end = rest, None, None
    if "?" in rest:
        base, _, query = rest.rpartition("?")
        params = parse_qs(query)
        if "start" in params or "end" in params:
            if "start" not in params or "end" not in params:
                raise FormatError(f"malformed slice {item!r}: a slice needs both start and end (path?start=S&end=E)")
            try:
                start, end = int(params["start"][0]), int(params["end"][0])
            except ValueError:
                raise FormatError(f"malformed slice {item!r}: start and end must be integers") from None
            if not 0 <= start <= end:
                raise FormatError(f"malformed slice {item!r}: need 0 <= start <= end")
            path = base
    return Slice(path, start, end, forced or format_of(path))


def slice_item(path: str, start: int, end: int, forced_format: str | None = None) -> str:
    """The item for records ``[start, end)`` of ``path`` (the inverse of ``parse``)."""
    item = f"{path}?start={start}&end={end}"
    return f"{item}{_FORMAT_SUFFIX}{forced_format}" if forced_format else item
