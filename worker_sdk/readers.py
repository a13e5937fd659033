"""Readers for items: a whole file, or a slice ``path?start=S&end=E`` of one.

``records(item, offset=None)`` is a plain-Python iterator of the item's
records; ``dataset(item, offset=None)`` the same as a ``tf.data.Dataset``.

    lines     (.csv .tsv .txt .jsonl .ndjson .json)  bytes, without the line end
    tfrecord  (.tfrecord .tfrecords)                 serialized records (bytes)
    parquet   (.parquet .pq)                         rows as dicts (a dict of tensors in the dataset)
    postgres  (postgresql://...?table=...)           rows as dicts, in key order (worker_sdk.pgtable)

Formats and the slice syntax are defined in ``worker_sdk.formats``; a work
of no known format is read as lines. A slice reader seeks to ``offset`` (the
byte where record S starts; every lease of a slice carries it) and reads its
E - S records, not the whole file. Without an offset it has to skip S
records from the start, or from a nearer record whose byte it is given
(``seek``: a split's remainder starts inside a slice). Local paths and
``file://`` need nothing more; other URLs (``s3://``...) are opened with fsspec.
"""

from __future__ import annotations

import dataclasses
import struct

from . import formats


def parse(item: str, format: str | None = None) -> formats.Slice:
    """The item as path, record range and format (``format`` overrides the item's; unknown formats read as lines)."""
    piece = formats.parse(item)
    return dataclasses.replace(piece, format=format or piece.format or formats.READ_UNKNOWN_AS)


def _open(path: str):
    """Opens a work for reading in binary mode (fsspec for URLs other than file://)."""
    if path.startswith("file://"):
        path = path[len("file://") :]
    if "://" in path:
        try:
            import fsspec
        except ImportError:
            raise ImportError(
                f"reading {path} needs fsspec and its backend: pip install fsspec s3fs (or gcsfs...)"
            ) from None
        return fsspec.open(path, "rb").open()
    return open(path, "rb")


def records(
    item: str,
    offset: int | None = None,
    format: str | None = None,
    *,
    seek: tuple[int, int] | None = None,
    source: dict | None = None,
):
    """The records of an item (see the module docstring for their types).

    ``seek`` (record, byte), when there is no ``offset``: a record at or
    before the slice's start and where it begins; the reader seeks there and
    skips to the start (a split's remainder: its slice's first record).
    ``source`` (the lease's): a Postgres table slice's key range
    (worker_sdk.pgtable), or a Delta file's partition values, added to
    each of its rows.
    """
    piece = parse(item, format)
    if piece.format == formats.POSTGRES:
        from . import pgtable

        yield from pgtable.rows(piece, source)
        return
    if piece.format == "parquet":
        constants = (source or {}).get("columns")
        if constants:
            for row in _parquet_rows(piece):
                yield {**row, **constants}
            return
        yield from _parquet_rows(piece)
        return
    reader, skip = (_tfrecords, _skip_tfrecords) if piece.format == "tfrecord" else (_lines, _skip_lines)
    with _open(piece.path) as handle:
        if piece.start is None:
            yield from reader(handle)
            return
        if offset is not None:
            handle.seek(offset)
        elif seek is not None and seek[0] <= piece.start:
            handle.seek(seek[1])
            skip(handle, piece.start - seek[0])
        else:
            skip(handle, piece.start)
        produced = 0
        for record in reader(handle):
            if produced == piece.end - piece.start:
                return
            produced += 1
            yield record
        if produced < piece.end - piece.start:
            raise ValueError(
                f"{item}: the file ended after {produced} of the slice's {piece.end - piece.start} records"
            )


# Bytes read at a time while skipping lines to a slice's first record, and
# searched at a time for the last of them.
SKIP_CHUNK = 64 * 1024
SKIP_BLOCK = 4 * 1024


def _skip_lines(handle, count: int) -> None:
    """Moves ``handle`` past ``count`` lines.

    Line ends are counted by ``bytes.count``, a chunk at a time, not line
    by line in Python: a slice without its byte offset (one named in a
    job's works) skips every record before it, which cost as much as
    reading them (bench/RESULTS.md). A file that ends first is left at its
    end: the caller then finds too few records and says so.
    """
    at = handle.tell()
    while count:
        chunk = handle.read(SKIP_CHUNK)
        if not chunk:
            return
        ends = chunk.count(b"\n")
        if ends < count:
            count -= ends
            at += len(chunk)
            continue
        # The line end sought is in this chunk: find its block, then its
        # byte (the shortest prefix of the block that holds the rest).
        block = 0
        while (ends := chunk.count(b"\n", block, block + SKIP_BLOCK)) < count:
            count -= ends
            block += SKIP_BLOCK
        low, high = block + 1, min(block + SKIP_BLOCK, len(chunk))
        while low < high:
            middle = (low + high) // 2
            if chunk.count(b"\n", block, middle) < count:
                low = middle + 1
            else:
                high = middle
        handle.seek(at + low)
        return


def _skip_tfrecords(handle, count: int) -> None:
    """Moves ``handle`` past ``count`` TFRecords, reading their headers only."""
    for _ in range(count):
        header = handle.read(12)
        if len(header) < 12:
            return  # the file ended: the caller finds too few records
        (length,) = struct.unpack("<Q", header[:8])
        handle.seek(length + 4, 1)  # the data and its footer's checksum


def _lines(handle):
    for line in handle:
        if line.endswith(b"\n"):
            line = line[:-2] if line.endswith(b"\r\n") else line[:-1]
        yield line


def _tfrecords(handle):
    while True:
        header = handle.read(12)
        if not header:
            return
        if len(header) < 12:
            raise ValueError("corrupt TFRecord: truncated header")
        (length,) = struct.unpack("<Q", header[:8])
        data = handle.read(length)
        footer = handle.read(4)
        if len(data) < length or len(footer) < 4:
            raise ValueError("corrupt TFRecord: truncated record")
        yield data


def _parquet_rows(piece: formats.Slice):
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise ImportError("reading Parquet needs pyarrow: pip install pyarrow") from None
    with _open(piece.path) as handle:
        parquet = pq.ParquetFile(handle)
        start = piece.start or 0
        end = piece.end if piece.end is not None else parquet.metadata.num_rows
        first_row = 0
        for group in range(parquet.num_row_groups):
            rows = parquet.metadata.row_group(group).num_rows
            # Only the row groups that overlap [start, end) are read.
            if first_row + rows > start and first_row < end:
                table = parquet.read_row_group(group)
                low, high = max(start - first_row, 0), min(end - first_row, rows)
                yield from table.slice(low, high - low).to_pylist()
            first_row += rows
            if first_row >= end:
                break


def of_lease(lease, format: str | None = None):
    """The records of a leased item, using everything the lease says about where they are."""
    return records(lease.item, lease.offset, format, seek=lease.seek, source=getattr(lease, "source", None))


def dataset(item: str, offset: int | None = None, format: str | None = None):
    """The item's records as a ``tf.data.Dataset`` (scalar strings, or a dict of tensors for Parquet)."""
    from .tf._require import require

    tf = require("worker_sdk.readers.dataset")
    piece = parse(item, format)
    if piece.format == formats.POSTGRES:
        from . import pgtable

        dtypes = {"int": tf.int64, "float": tf.float64, "other": tf.string}
        columns = pgtable.columns(piece)
        signature = {name: tf.TensorSpec(shape=[], dtype=dtypes[kind]) for name, kind in columns}
        strings = [name for name, kind in columns if kind == "other"]

        def rows():
            for row in records(item, offset, format):
                yield {**row, **{name: _text(row[name]) for name in strings}}

        return tf.data.Dataset.from_generator(rows, output_signature=signature)
    if piece.format != "parquet":
        return tf.data.Dataset.from_generator(
            lambda: records(item, offset, format), output_signature=tf.TensorSpec(shape=[], dtype=tf.string)
        )
    signature = _parquet_signature(piece, tf)
    return tf.data.Dataset.from_generator(lambda: records(item, offset, format), output_signature=signature)


def _text(value) -> bytes:
    """A table value that is not a number, as a tf.string: text as is, anything else as its text form."""
    if value is None:
        return b""
    if isinstance(value, bytes):
        return value
    return str(value).encode()


def _parquet_signature(piece: formats.Slice, tf):
    import pyarrow as pa
    import pyarrow.parquet as pq

    with _open(piece.path) as handle:
        schema = pq.ParquetFile(handle).schema_arrow
    signature = {}
    for field in schema:
        if pa.types.is_integer(field.type) or pa.types.is_boolean(field.type):
            dtype = tf.int64
        elif pa.types.is_floating(field.type):
            dtype = tf.float64
        else:
            dtype = tf.string
        signature[field.name] = tf.TensorSpec(shape=[], dtype=dtype)
    return signature
