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

Tables are works too (docs/tables.md):

    postgres  postgresql://CONNECTION?table=schema.name[&key=a,b]
              rows in key order, of the database that the admin's named
              connection CONNECTION reaches (never a host, port, database or
              user of the work's own); a slice is the item
              postgresql://CONNECTION?table=...&as_of=SNAPSHOT&start=S&end=E:
              records [S, E) of the table's rows as of a Postgres snapshot
    delta     delta:///path/to/table[?version=N][&where=col=value,...]
              a Delta Lake table (delta+s3://bucket/path: on S3)
    iceberg   iceberg://catalog/namespace.table[?snapshot=ID][&where=col=value,...]
              an Iceberg table of a catalog pyiceberg is configured for
              (where: equalities on partition columns, which pick files)

A lakehouse table's slices are slices of its Parquet data files, read as
Parquet. No table work carries a secret or an address: a Postgres work names
a connection (the server's are defined by its admin; each worker connects
with its own credentials, worker_sdk/pgtable.py), an Iceberg work a catalog
configured for pyiceberg; ``check_table`` refuses anything else.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qs, quote, urlsplit

EXTENSIONS = {
    "lines": (".csv", ".tsv", ".txt", ".jsonl", ".ndjson", ".json"),
    "tfrecord": (".tfrecord", ".tfrecords"),
    "parquet": (".parquet", ".pq"),
}
FORMATS = tuple(EXTENSIONS)

# Works named by these URL schemes are tables (see the module docstring).
POSTGRES_SCHEMES = ("postgresql", "postgres")
LAKEHOUSE_SCHEMES = ("delta", "iceberg")
POSTGRES = "postgres"  # the format of a Postgres table's slices
# The query parameters of a Postgres table work (the slicer adds as_of, start
# and end to its slices). Nothing else: every connection option is the
# named connection's, so a work cannot point the server anywhere else.
POSTGRES_WORK_PARAMS = ("table", "key")
POSTGRES_SLICE_PARAMS = ("as_of", "start", "end")

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


def scheme_of(work: str) -> str:
    """The URL scheme of ``work``, lower case ('' for a local path); delta+s3:// is delta's."""
    head, sep, _ = work.partition("://")
    head = head.lower().partition("+")[0]
    return head if sep and head.isalpha() else ""


def table_kind(work: str) -> str | None:
    """'postgres', 'delta' or 'iceberg' for a table work (or a Postgres slice), None for a file."""
    scheme = scheme_of(work)
    if scheme in POSTGRES_SCHEMES:
        return POSTGRES
    return scheme if scheme in LAKEHOUSE_SCHEMES else None


def table_location(work: str) -> str:
    """Where a Delta or Iceberg table lives, as data roots are written (the server checks it against them).

    A Delta table's path or URI (delta:///p -> /p, delta+s3://b/p -> s3://b/p), ``iceberg://catalog``.
    """
    parts = urlsplit(work)
    scheme = parts.scheme.lower()
    if scheme == "iceberg":
        return f"iceberg://{parts.netloc}"
    if scheme == "delta":
        # delta://host/p names no store: kept as it is, so it matches no root (expand refuses it).
        return f"delta://{parts.netloc}{parts.path}" if parts.netloc else parts.path
    return f"{scheme.partition('+')[2]}://{parts.netloc}{parts.path}"


def redact(work: str) -> str:
    """``work`` with any password replaced by ***, for messages."""
    parts = urlsplit(work) if "://" in work else None
    if parts is None or not parts.scheme:
        return work
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, host = netloc.rpartition("@")
        if ":" in userinfo:
            netloc = f"{userinfo.split(':', 1)[0]}:***@{host}"
    query = "&".join(
        f"{name}=***" if name.lower() in ("password", "passfile", "sslpassword") else piece
        for piece in parts.query.split("&")
        if piece
        for name in [piece.split("=", 1)[0]]
    )
    if netloc == parts.netloc and query == parts.query:
        return work  # geturl() would drop the empty host of delta:///path
    return parts._replace(netloc=netloc, query=query).geturl()


def connection_name(work: str) -> str:
    """The connection a Postgres table work (or slice) names: ``postgresql://NAME?table=...`` (FormatError otherwise)."""
    parts = urlsplit(work)
    try:
        port = parts.port
    except ValueError:
        port = "?"
    name = parts.hostname or ""
    if "@" in parts.netloc or port is not None or parts.path not in ("", "/") or not _is_connection_name(name):
        raise FormatError(
            f"{redact(work)}: a table work names a connection, never a host, port, database or user of its own: "
            "postgresql://CONNECTION?table=schema.name, where CONNECTION is a name the admin defined "
            "(docs/tables.md)"
        )
    return name


def _is_connection_name(name: str) -> bool:
    # The names server/conf.py accepts: a letter, then up to 62 letters, digits or '_'.
    return 0 < len(name) <= 63 and name[0].isalpha() and all(c.isalnum() or c == "_" for c in name) and name.isascii()


def check_table(work: str) -> None:
    """Refuses a table work that carries a secret or an address of its own, or lacks what names the table (FormatError)."""
    kind = table_kind(work)
    if kind is None:
        return
    parts = urlsplit(work)
    params = parse_qs(parts.query, keep_blank_values=True)
    shown = redact(work)
    if parts.password is not None or {"password", "passfile", "sslpassword"} & {p.lower() for p in params}:
        raise FormatError(
            f"{shown}: a work must not carry a password (it would be stored, logged and handed to every worker); "
            "name a connection instead: postgresql://CONNECTION?table=schema.name"
        )
    if kind == POSTGRES:
        connection_name(work)
        if not params.get("table", [""])[0]:
            raise FormatError(f"{shown}: name the table: postgresql://CONNECTION?table=schema.name")
        unknown = set(params) - set(POSTGRES_WORK_PARAMS) - set(POSTGRES_SLICE_PARAMS)
        if not unknown and any(len(values) > 1 for values in params.values()):
            raise FormatError(f"{shown}: each parameter may be given once")
        if unknown:
            raise FormatError(
                f"{shown}: parameter(s) {', '.join(sorted(unknown))} refused: a Postgres table work takes table and "
                "key only; where and how to connect is the named connection's, set by the admin"
            )
    elif kind == "delta":
        if parts.scheme.lower() == "delta" and parts.netloc:
            raise FormatError(
                f"{shown}: a local Delta table is delta:///path/to/table, a remote one delta+s3://bucket/path"
            )
        if not (parts.netloc or parts.path).strip("/"):
            raise FormatError(f"{shown}: name the table's location: delta:///path/to/table or delta+s3://bucket/path")
        _check_params(shown, params, "version")
    else:
        if not parts.netloc or "." not in parts.path.strip("/"):
            raise FormatError(f"{shown}: name the catalog and the table: iceberg://catalog/namespace.table")
        _check_params(shown, params, "snapshot")


def _check_params(shown: str, params: dict, version: str) -> None:
    unknown = set(params) - {version, "where"}
    if unknown:
        raise FormatError(f"{shown}: unknown parameter(s) {', '.join(sorted(unknown))}; use {version} and where")
    if version in params and not params[version][0].isdigit():
        raise FormatError(f"{shown}: {version} must be a number")
    for condition in params.get("where", [""])[0].split(","):
        if "where" in params and ("=" not in condition or not condition.split("=", 1)[0].strip()):
            raise FormatError(f"{shown}: where takes column=value conditions, separated by commas")


def format_of(path: str) -> str | None:
    """The format of ``path`` by its extension, None when it has no known one."""
    if table_kind(path) == POSTGRES:
        return POSTGRES
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
    if table_kind(rest) == POSTGRES:
        return _parse_table_slice(item, rest)
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
    separator = "&" if table_kind(path) == POSTGRES and "?" in path else "?"
    item = f"{path}{separator}start={start}&end={end}"
    return f"{item}{_FORMAT_SUFFIX}{forced_format}" if forced_format else item


def table_slice_path(work: str, as_of: str) -> str:
    """A Postgres table work pinned to a snapshot: the path part of its slices' items."""
    return f"{work}&as_of={quote(as_of, safe=':,')}"


def _parse_table_slice(item: str, rest: str) -> Slice:
    """A Postgres table work or slice: the other parameters stay in the path, start and end are the range."""
    base, _, query = rest.partition("?")
    kept, found = [], {}
    for piece in query.split("&"):
        name = piece.split("=", 1)[0]
        if name in ("start", "end"):
            found[name] = piece.split("=", 1)[1] if "=" in piece else ""
        elif piece:
            kept.append(piece)
    path = base + ("?" + "&".join(kept) if kept else "")
    if not found:
        return Slice(path, None, None, POSTGRES)
    if set(found) != {"start", "end"}:
        raise FormatError(f"malformed slice {item!r}: a slice needs both start and end (path?start=S&end=E)")
    try:
        start, end = int(found["start"]), int(found["end"])
    except ValueError:
        raise FormatError(f"malformed slice {item!r}: start and end must be integers") from None
    if not 0 <= start <= end:
        raise FormatError(f"malformed slice {item!r}: need 0 <= start <= end")
    return Slice(path, start, end, POSTGRES)
