"""Record counting for slicing: which works exist, how many records each has,
and where (in bytes) a given record starts.

Formats (worker_sdk.formats: by extension, or a ``#format=NAME`` suffix) are counted so:

    parquet   rows, from the footer metadata
    lines     one record per line (the last may lack "\\n")
    tfrecord  records found by walking their headers, each length checked against its CRC32C

Works are local paths, ``file://`` URLs, or any fsspec URL whose backend is
installed (``s3://`` with s3fs, ``gs://`` with gcsfs, ...). A directory or a
glob expands to its files in sorted order.
"""

from __future__ import annotations

import bisect
import os
import struct
from dataclasses import dataclass, field

import fsspec
import numpy as np

from worker_sdk import formats

CHUNK = 8 * 1024 * 1024
# The scan keeps the byte offset of every INDEX_STEP-th record; an exact
# slice start is found from the nearest one by skipping fewer than that many
# records. A 10-million-line file keeps 40,000 offsets, not 10 million.
INDEX_STEP = 256


class SourceError(Exception):
    """A work that cannot be sliced: missing, unreadable, corrupt. The message names it."""


@dataclass
class Work:
    path: str  # as the worker will read it (the item's path part)
    format: str | None  # None: not a sliceable format, one item per epoch
    forced: bool = False  # the format was named by a #format= suffix (kept on the items)
    records: int = 0
    # TFRecord: (record number, byte offset) every INDEX_STEP records.
    index: list[tuple[int, int]] = field(default_factory=list)
    # Lines: the byte offset of every INDEX_STEP-th line.
    line_starts: object = None
    # Records known already (a table's, from its metadata or its slicing read).
    counted: bool = False
    # A Postgres table's slicing transaction (server/tables/postgres.py).
    table: object = None
    # Values every record of the work has that the file does not hold (a
    # Delta partition's), handed to readers with each lease (Unit.source).
    columns: dict | None = None
    # Why the server hands this work out whole though slices were asked for
    # (it has no filesystem for its URL), as DeepRec does with a work whose
    # records it cannot count. None: counted and sliced as its format allows.
    whole: str | None = None


def outside_roots(path: str, roots: list[str] | None) -> bool:
    """Whether ``path`` (a local path, ``file://`` or another URL) lies outside every root.

    Local paths are compared after resolving ``..`` and symlinks (both the
    path's and the roots'), so neither a ``../`` nor a link inside a root
    leads out of it. URLs are compared after collapsing ``..`` segments.
    ``None`` allows everything (DEBUG without roots, server/data_policy.py);
    an empty list allows nothing.
    """
    if roots is None:
        return False
    local = _local_path(path)
    for root in roots:
        root_local = _local_path(root)
        if local is not None and root_local is not None:
            target, base = os.path.realpath(local), os.path.realpath(root_local)
            if target == base or target.startswith(base.rstrip(os.sep) + os.sep):
                return False
        elif local is None and root_local is None:
            target, base = _normal_url(path), _normal_url(root)
            if (
                target is not None
                and base is not None
                and (target == base.rstrip("/") or target.startswith(base.rstrip("/") + "/"))
            ):
                return False
    return True


def _local_path(path: str) -> str | None:
    if path.startswith("file://"):
        return path[len("file://") :] or "/"
    return None if "://" in path else path


def _normal_url(url: str) -> str | None:
    scheme, _, rest = url.partition("://")
    if not rest:
        return None
    host, slash, tail = rest.partition("/")
    parts: list[str] = []
    for part in tail.split("/"):
        if part == "..":
            if not parts:
                return None  # above the bucket: never inside a root
            parts.pop()
        elif part not in ("", "."):
            parts.append(part)
    return f"{scheme.lower()}://{host}/" + "/".join(parts)


def check_roots(path: str, roots: list[str] | None) -> None:
    """SourceError unless the server may read ``path`` (``roots`` as ``outside_roots`` takes them)."""
    if not outside_roots(path, roots):
        return
    if not roots:
        raise SourceError(
            f"{path}: the server reads no files: no data roots are set. An admin allows the folders and URL prefixes "
            "it may read with SHARDLINE_DATA_ROOTS (e.g. SHARDLINE_DATA_ROOTS=/data); a list of files without "
            "num_slices needs none (workers read them, the server never opens them)"
        )
    raise SourceError(
        f"{path}: outside the allowed data roots ({', '.join(roots)}; SHARDLINE_DATA_ROOTS); the slicer does not read it"
    )


def missing_filesystem(path: str) -> str | None:
    """Why the server has no filesystem at all for ``path``'s URL scheme (None: it has one, or it is a local path).

    Asks fsspec's registry only: nothing is instantiated or contacted. Such
    a work (under the data roots: the policy is checked first, the same on
    every deployment) is handed out whole when slices are asked for.
    """
    if "://" not in path or path.startswith("file://"):
        return None
    protocol = path.split("://", 1)[0]
    try:
        fsspec.get_filesystem_class(protocol)
    except (ImportError, ValueError) as exc:
        return f"the server has no filesystem for {protocol}:// ({exc})"
    return None


def _has_glob(path: str) -> bool:
    return any(ch in path for ch in "*?[")


def expand(work: str) -> list[Work]:
    """A work as the files it stands for: itself, a directory's files, or a glob's matches."""
    try:
        path, forced = formats.split_format(work)
    except formats.FormatError as exc:
        raise SourceError(str(exc)) from None

    def found(p: str, fs_p: str) -> Work:
        return Work(p, forced or formats.format_of(fs_p), forced=forced is not None)

    missing = missing_filesystem(path)
    if missing is not None:
        return [Work(path, None, whole=missing)]
    try:
        fs, fs_path = fsspec.core.url_to_fs(path)
    except Exception as exc:  # noqa: BLE001  (a backend's constructor raises what its library does)
        if "://" not in path:
            raise SourceError(f"{path}: cannot be opened ({type(exc).__name__}: {exc})") from None
        # A filesystem that cannot start here (HDFS without a JVM, a missing
        # client library): the server cannot count the work, workers may
        # still read it. DeepRec hands such a work out whole; so do we.
        scheme = path.split("://", 1)[0]
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return [Work(path, None, whole=f"the server cannot open {scheme}:// ({reason})")]
    protocol = path.split("://", 1)[0] + "://" if "://" in path else ""

    def outward(p: str) -> str:
        # Keep the user's spelling (file://, s3://) on the items handed out.
        return protocol + p.lstrip("/") if protocol and protocol != "file://" else (protocol + p if protocol else p)

    try:
        if _has_glob(fs_path):
            matches = sorted(p for p in fs.glob(fs_path) if fs.isfile(p))
            if not matches:
                raise SourceError(f"{work}: the pattern matches no file")
            return [found(outward(p), p) for p in matches]
        if fs.isdir(fs_path):
            files = sorted(p for p in fs.ls(fs_path, detail=False) if fs.isfile(p))
            if not files:
                raise SourceError(f"{work}: the directory has no files")
            return [found(outward(p), p) for p in files]
        if not fs.exists(fs_path):
            raise SourceError(f"{work}: no such file")
    except PermissionError as exc:
        raise SourceError(f"{work}: not readable ({exc.strerror or exc})") from None
    return [found(path, fs_path)]


def count(work: Work, progress=None) -> None:
    """Counts ``work``'s records (and indexes their offsets); ``progress(records)`` is called as it goes."""
    if work.counted:
        return
    try:
        if work.format == "lines":
            _count_lines(work, progress)
        elif work.format == "tfrecord":
            _count_tfrecords(work, progress)
        elif work.format == "parquet":
            _count_parquet(work)
    except SourceError:
        raise
    except FileNotFoundError:
        raise SourceError(f"{work.path}: no such file") from None
    except PermissionError as exc:
        raise SourceError(f"{work.path}: not readable ({exc.strerror or exc})") from None
    except OSError as exc:
        raise SourceError(f"{work.path}: cannot be read ({exc})") from None


def _chunks(path: str):
    """The file's bytes as numpy views of one reused CHUNK-sized buffer.

    Reading into the same buffer (rather than mapping the file, or a new
    bytes object per read) costs no page faults and no allocation per chunk:
    the scan then runs near the speed of `wc -l`. A view is valid until the
    next one is produced.
    """
    buffer = bytearray(CHUNK)
    view = np.frombuffer(buffer, dtype=np.uint8)
    with fsspec.open(path, "rb") as handle:
        raw = getattr(handle, "f", handle)  # a local file's own object: readinto without a copy
        while True:
            read = raw.readinto(buffer)
            if not read:
                return
            yield view[:read]


def _count_lines(work: Work, progress) -> None:
    # One pass: the newline positions of each chunk (numpy), from which the
    # start of every INDEX_STEP-th line is kept; a slice start is then found
    # by skipping fewer than INDEX_STEP lines from the nearest kept one.
    records, position = 0, 0
    starts = [np.zeros(1, dtype=np.int64)]  # line 0 starts at byte 0
    last = 10
    for chunk in _chunks(work.path):
        newlines = np.flatnonzero(chunk == 10)
        # Global newline g ends line g; line g + 1 is kept when it is a
        # multiple of INDEX_STEP, i.e. g % INDEX_STEP == INDEX_STEP - 1.
        first = (INDEX_STEP - 1 - records) % INDEX_STEP
        starts.append(newlines[first::INDEX_STEP].astype(np.int64) + (position + 1))
        records += len(newlines)
        last = int(chunk[-1])
        position += len(chunk)
        if progress:
            progress(records)
    if last != 10:
        records += 1  # a last line without its newline is still a record
    work.records = records
    work.line_starts = np.concatenate(starts)


def _masked_crc(data: bytes) -> int:
    import crc32c

    crc = crc32c.crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _count_tfrecords(work: Work, progress) -> None:
    records, offset = 0, 0
    index = [(0, 0)]
    with fsspec.open(work.path, "rb") as handle:
        while True:
            header = handle.read(12)
            if not header:
                break
            if len(header) < 12:
                raise SourceError(f"{work.path}: corrupt TFRecord: truncated record header at byte {offset}")
            length, length_crc = struct.unpack("<QI", header)
            if _masked_crc(header[:8]) != length_crc:
                raise SourceError(f"{work.path}: corrupt TFRecord: length checksum mismatch at byte {offset}")
            end = offset + 12 + length + 4
            handle.seek(end)
            if handle.tell() != end or (length and not _exists_at(handle, end)):
                raise SourceError(
                    f"{work.path}: corrupt TFRecord: record at byte {offset} runs past the end of the file"
                )
            records += 1
            offset = end
            if records % INDEX_STEP == 0:
                index.append((records, offset))
            if progress and records % 65536 == 0:
                progress(records)
    work.records = records
    work.index = [entry for entry in index if entry[0] < records] or [(0, 0)]


def _exists_at(handle, end: int) -> bool:
    # Seeking past the end succeeds on most file systems: check the file is
    # really that long by reading the byte just before `end`.
    handle.seek(end - 1)
    present = handle.read(1) != b""
    handle.seek(end)
    return present


def _count_parquet(work: Work) -> None:
    import pyarrow.parquet as pq

    try:
        with fsspec.open(work.path, "rb") as handle:
            work.records = pq.ParquetFile(handle).metadata.num_rows
    except (OSError, ValueError) as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        raise SourceError(f"{work.path}: not a readable Parquet file ({exc})") from None
    work.index = [(0, 0)]


def offsets_of(work: Work, records: list[int]) -> list[int | None]:
    """The byte offsets where each of ``records`` starts (None for Parquet and tables: their readers seek otherwise)."""
    if work.format in ("parquet", formats.POSTGRES):
        return [None] * len(records)
    with fsspec.open(work.path, "rb") as handle:
        if work.format == "lines":
            return [_line_offset(work, handle, record) for record in records]
        return [_record_offset(work, handle, record) for record in records]


def _record_offset(work: Work, handle, record: int) -> int:
    position = bisect.bisect_right(work.index, (record, float("inf"))) - 1
    known, offset = work.index[position]
    while known < record:
        handle.seek(offset)
        (length,) = struct.unpack("<Q", handle.read(12)[:8])
        offset += 12 + length + 4
        known += 1
    return offset


def _line_offset(work: Work, handle, record: int) -> int:
    offset = int(work.line_starts[record // INDEX_STEP])
    skip = record % INDEX_STEP
    if skip == 0:
        return offset
    handle.seek(offset)
    window = b""
    while True:
        more = handle.read(32 * 1024)
        if not more:
            raise SourceError(f"{work.path}: the file changed while it was being sliced")
        window += more
        newlines = np.flatnonzero(np.frombuffer(window, dtype=np.uint8) == 10)
        if len(newlines) >= skip:
            return offset + int(newlines[skip - 1]) + 1
