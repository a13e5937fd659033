"""Delta Lake and Iceberg tables sliced at one version, from their metadata alone.

The slicer pins the table: a Delta table at the version asked (``version=``)
or its latest, an Iceberg table at the snapshot asked (``snapshot=``) or its
current one. Both formats only ever add and remove whole Parquet files, so
the live data files of the pinned version, sliced like any Parquet work, are
that version's rows, whatever is committed afterwards (until a vacuum or an
expiry removes the files). Row counts come from the metadata (Delta's add
actions' ``numRecords``, Iceberg's manifest entries' ``record_count``); no
data file is opened.

What would make a file's rows differ from the table's is refused rather than
approximated: deletes kept beside the files (Delta deletion vectors, Iceberg
delete files), reader features that a plain Parquet reader cannot apply,
data files that are not Parquet. ``where`` picks whole files by partition
value, so it takes equalities on partition columns only: a condition on
another column would need the rows read to count them. An empty value
(``where=region=``) matches a null partition value.

Delta keeps partition values in its log, not in the files: each file's go
with its slices (``Work.columns``, a lease's ``source``) and readers add
them to every row. Iceberg writes every column into its files.

Credentials never come from the work: deltalake takes the object store's
from the environment (AWS_*, ...), pyiceberg its catalog's from its own
configuration (~/.pyiceberg.yaml or PYICEBERG_CATALOG__NAME__* variables).
"""

from __future__ import annotations

import functools
from urllib.parse import parse_qs, unquote, urlsplit

from worker_sdk import formats

from .. import sources

INSTALL = 'pip install ".[tables]"'

# Delta reader features under which a version's Parquet files, read as they
# are, hold its rows. deletionVectors and columnMapping are allowed here and
# checked on the version itself: they matter only when in use.
DELTA_READER_FEATURES = frozenset(
    {
        "deletionVectors",
        "columnMapping",
        "timestampNtz",
        "v2Checkpoint",
        "vacuumProtocolCheck",
        "variantType",
        "variantType-preview",
    }
)


def expand(work: str, roots: list[str] | None) -> tuple[list[sources.Work], dict]:
    """The pinned version's live data files as counted Parquet works, sorted by path, and the job's record of it."""
    shown = formats.redact(work)
    if formats.table_kind(work) == "delta":
        kind, version, found = "delta", *_delta(work, shown)
    else:
        kind, version, found = "iceberg", *_iceberg(work, shown, roots)
    works = [
        sources.Work(
            path,
            "parquet",
            forced=formats.format_of(path) != "parquet",
            records=records,
            counted=True,
            columns=columns or None,
        )
        for path, records, columns in sorted(found, key=lambda entry: entry[0])
        if records > 0
    ]
    record = {
        "work": shown,
        "kind": kind,
        # Iceberg snapshot ids reach 2^63: as text, so that JavaScript clients of the API keep every digit.
        "version": str(version) if kind == "iceberg" and version is not None else version,
        "rows": sum(w.records for w in works),
        "files": len(works),
        "key": None,
    }
    return works, record


def _params(work: str, shown: str, version_name: str) -> tuple[int | None, list[tuple[str, str]]]:
    params = parse_qs(urlsplit(work).query, keep_blank_values=True)
    version = params.get(version_name, [None])[0]
    if version is not None and not version.isdigit():
        raise sources.SourceError(f"{shown}: {version_name} must be a number")
    where = []
    for condition in filter(None, params.get("where", [""])[0].split(",")):
        column, _, value = condition.partition("=")
        where.append((column.strip(), value))
    return (int(version) if version is not None else None), where


def _not_a_partition(shown: str, column: str, partitions: list[str]) -> sources.SourceError:
    return sources.SourceError(
        f"{shown}: where {column}=...: {column} is not a partition column "
        f"(partition columns: {', '.join(partitions) or 'none'}); only partition columns can be filtered, "
        "since the rows are counted from the table's metadata without reading them"
    )


def _has_deletes(shown: str, snapshot_id: int, which: str) -> sources.SourceError:
    return sources.SourceError(
        f"{shown}: snapshot {snapshot_id} has delete files ({which}), whose deleted rows a reader of the data files "
        "would see; compact it (rewrite_data_files) or read a snapshot without deletes"
    )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _delta(work: str, shown: str) -> tuple[int, list[tuple[str, int, dict]]]:
    try:
        import deltalake
        import pyarrow as pa
        import pyarrow.compute as pc
    except ImportError:
        raise sources.SourceError(f"{shown}: reading Delta tables needs deltalake: {INSTALL}") from None
    if urlsplit(work).scheme.lower() == "delta" and urlsplit(work).netloc:
        raise sources.SourceError(
            f"{shown}: a local Delta table is delta:///path/to/table, a remote one delta+s3://bucket/path "
            "(or delta+gs://, delta+az://...)"
        )
    root = formats.table_location(work)
    version, where = _params(work, shown, "version")
    try:
        table = deltalake.DeltaTable(root)
        latest = table.version()
        if version is not None and version != latest:
            if version > latest:
                raise sources.SourceError(f"{shown}: no version {version} (the latest is {latest})")
            table.load_as_version(version)
    except deltalake.exceptions.TableNotFoundError:
        raise sources.SourceError(f"{shown}: no Delta table at {root}") from None
    except (deltalake.exceptions.DeltaError, OSError) as exc:
        raise sources.SourceError(f"{shown}: cannot be read ({_first_line(exc)})") from None
    pinned = table.version()

    protocol = table.protocol()
    unknown = set(protocol.reader_features or ()) - DELTA_READER_FEATURES
    if protocol.min_reader_version > 3 or unknown:
        needs = ", ".join(sorted(unknown)) or f"reader version {protocol.min_reader_version}"
        raise sources.SourceError(
            f"{shown}: version {pinned} needs what a Parquet reader of its files cannot apply ({needs})"
        )
    mode = table.metadata().configuration.get("delta.columnMapping.mode", "none")
    if mode != "none":
        raise sources.SourceError(
            f"{shown}: version {pinned} maps its columns ({mode} mode): its files name them otherwise than the table"
        )
    if "deletionVectors" in (protocol.reader_features or ()):
        # The descriptors are not among the add actions that deltalake
        # shows; its list of deletion vectors reads their (small) bitmaps.
        try:
            carrying = pa.table(table.deletion_vectors()).column("filepath").to_pylist()
        except (deltalake.exceptions.DeltaError, OSError) as exc:
            raise sources.SourceError(f"{shown}: its deletion vectors cannot be read ({_first_line(exc)})") from None
        if carrying:
            raise sources.SourceError(
                f"{shown}: version {pinned} has deletion vectors on {len(carrying)} file(s) (such as {carrying[0]}), "
                "whose deleted rows a reader of the files would see; purge them (REORG TABLE ... APPLY (PURGE)) "
                "or read a version without them"
            )

    actions = pa.table(table.get_add_actions(flatten=True))
    partitions = list(table.metadata().partition_columns)
    for column, value in where:
        if column not in partitions:
            raise _not_a_partition(shown, column, partitions)
        if actions.num_rows == 0:
            break
        values = actions.column(f"partition.{column}")
        if value == "":
            keep = pc.is_null(values)
        else:
            try:
                wanted = pa.scalar(value).cast(values.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                raise sources.SourceError(
                    f"{shown}: where {column}={value}: not a value of type {values.type}"
                ) from None
            keep = pc.fill_null(pc.equal(values, wanted), False)
        actions = actions.filter(keep)

    values = {column: actions.column(f"partition.{column}").to_pylist() for column in partitions}
    found = []
    for row, (path, records) in enumerate(
        zip(actions.column("path").to_pylist(), actions.column("num_records").to_pylist())
    ):
        if records is None:
            raise sources.SourceError(
                f"{shown}: {path} has no row count in the table's log (numRecords): write the table with statistics"
            )
        # Relative paths are URL-encoded in the log (a space in a partition
        # value is on disk as %20, in the log as %2520); absolute ones are URIs.
        columns = {column: _json_value(values[column][row]) for column in partitions}
        found.append((path if "://" in path else f"{root.rstrip('/')}/{unquote(path)}", records, columns))
    return pinned, found


def _json_value(value):
    """A partition value as JSON keeps it: numbers, text, booleans and null as they are, anything else as text."""
    return value if value is None or isinstance(value, (bool, int, float, str)) else str(value)


def _iceberg(work: str, shown: str, roots: list[str] | None) -> tuple[int | None, list[tuple[str, int, None]]]:
    try:
        from pyiceberg.catalog import load_catalog
        from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError
        from pyiceberg.expressions import AlwaysTrue, And, EqualTo, IsNull
        from pyiceberg.expressions.literals import literal
        from pyiceberg.manifest import FileFormat
        from pyiceberg.transforms import IdentityTransform
        from pyiceberg.utils.config import Config
    except ImportError:
        raise sources.SourceError(f"{shown}: reading Iceberg tables needs pyiceberg: {INSTALL}") from None
    parts = urlsplit(work)
    name, identifier = parts.netloc, parts.path.strip("/")
    snapshot_id, where = _params(work, shown, "snapshot")
    # Read afresh: pyiceberg reads its configuration once, when imported, and
    # a Celery worker lives through changes of it.
    try:
        config = Config().get_catalog_config(name)
    except ValueError as exc:
        raise sources.SourceError(f"{shown}: pyiceberg's configuration is malformed ({_first_line(exc)})") from None
    if not config:
        # pyiceberg reads a '_' in a variable's name as '-': a catalog with a '_' in its name is configured in the file only.
        raise sources.SourceError(
            f"{shown}: configure pyiceberg's catalog {name}: a 'catalog: {name}:' entry in ~/.pyiceberg.yaml, "
            f"or PYICEBERG_CATALOG__{name.upper().replace('-', '_')}__TYPE, __URI... in the environment of the server "
            "and its Celery workers"
        )
    try:
        catalog = load_catalog(name, **config)
    except Exception as exc:  # each catalog type fails its own way: a driver missing, a bad URI, no server
        raise sources.SourceError(f"{shown}: cannot open pyiceberg's catalog {name} ({_first_line(exc)})") from None
    try:
        table = catalog.load_table(identifier)
    except (NoSuchTableError, NoSuchNamespaceError):
        raise sources.SourceError(f"{shown}: no table {identifier} in catalog {name}") from None
    except Exception as exc:
        raise sources.SourceError(f"{shown}: cannot be read ({_first_line(exc)})") from None
    # Planning reads the manifests, which lie under the table's location.
    sources.check_roots(table.location(), roots)

    if snapshot_id is None:
        snapshot = table.current_snapshot()
        if snapshot is None:
            return None, []  # created, never written
    else:
        snapshot = table.snapshot_by_id(snapshot_id)
        if snapshot is None:
            raise sources.SourceError(
                f"{shown}: no snapshot {snapshot_id} (the current one is {table.metadata.current_snapshot_id})"
            )

    schema = table.schemas().get(snapshot.schema_id) or table.schema()
    spec = table.spec()
    identity = [
        schema.find_column_name(field.source_id)
        for field in spec.fields
        if isinstance(field.transform, IdentityTransform) and schema.find_column_name(field.source_id)
    ]
    conditions = []
    for column, value in where:
        if column not in identity:
            raise _not_a_partition(shown, column, identity)
        if value == "":
            conditions.append(IsNull(column))
            continue
        try:
            literal(value).to(schema.find_field(column).field_type)
        except ValueError:
            raise sources.SourceError(
                f"{shown}: where {column}={value}: not a value of type {schema.find_field(column).field_type}"
            ) from None
        conditions.append(EqualTo(column, value))

    try:
        row_filter = functools.reduce(And, conditions, AlwaysTrue())
        tasks = list(table.scan(snapshot_id=snapshot.snapshot_id, row_filter=row_filter).plan_files())
    except ValueError as exc:
        if "equality deletes" in str(exc):  # pyiceberg refuses to plan a scan that has them
            raise _has_deletes(shown, snapshot.snapshot_id, "equality deletes") from None
        raise sources.SourceError(f"{shown}: cannot be read ({_first_line(exc)})") from None
    except OSError as exc:
        raise sources.SourceError(f"{shown}: cannot be read ({_first_line(exc)})") from None
    carrying = [task.file.file_path for task in tasks if task.delete_files]
    if carrying:
        raise _has_deletes(shown, snapshot.snapshot_id, f"on {len(carrying)} data file(s), such as {carrying[0]}")

    found = []
    for task in tasks:
        data = task.file
        if data.file_format != FileFormat.PARQUET:
            raise sources.SourceError(f"{shown}: {data.file_path} is {data.file_format.value}, not Parquet")
        if data.record_count is None:
            raise sources.SourceError(f"{shown}: {data.file_path} has no row count in its manifest")
        # A residual is what the partition does not settle: a file written
        # under a spec that did not partition by the column holds other rows too.
        if where and task.residual != AlwaysTrue():
            raise sources.SourceError(
                f"{shown}: {data.file_path} was written before {', '.join(c for c, _ in where)} partitioned the table; "
                "where picks whole files only"
            )
        found.append((data.file_path, data.record_count, None))
    return snapshot.snapshot_id, found
