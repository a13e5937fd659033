"""System checks (run by `migrate`, and by `check`; the database ones by `check --database default`)."""

from django.conf import settings
from django.core.checks import Error, Tags, Warning, register
from django.db import connections
from django.db.utils import DatabaseError


@register(Tags.database)
def autovacuum_is_on(app_configs=None, databases=None, **kwargs):
    # Every lease and completion leaves a dead item row (and a dead entry in
    # the index that take reads); without autovacuum they pile up and every
    # take walks past them, slower and slower through an epoch.
    if not databases or "default" not in databases:
        return []
    try:
        with connections["default"].cursor() as cursor:
            # Inline, not sql.run: a check at migrate time, on a connection
            # that serves no request, so nothing to prepare or name.
            cursor.execute("SELECT current_setting('autovacuum')")
            setting = cursor.fetchone()[0]
    except DatabaseError:
        return []  # the connection's own errors are reported elsewhere
    if setting == "on":
        return []
    return [
        Warning(
            "autovacuum is off on the database server",
            hint="Dead item rows are then never removed and takes slow down as an epoch proceeds "
            "(docs/deploy.md, Vacuum). Set autovacuum = on in postgresql.conf.",
            id="shardline.W001",
        )
    ]


@register()
def table_connections_spare_the_own_database(app_configs=None, **kwargs):
    # A worker token creates jobs: a connection to the server's own database
    # would let it read sessions and users through table works (docs/tables.md,
    # "What the server reads"). By address here; by identity when slicing.
    from .conf import ALLOW_OWN_DATABASE, PG_CONNECTION_PREFIX
    from .data_policy import reaches_own_database

    return [
        Error(
            f"the Postgres connection {name!r} reaches the server's own database",
            hint=f"Point {PG_CONNECTION_PREFIX}{name.upper()} at another database, or, if its tables are meant to be "
            f"read by every holder of a worker token, add {ALLOW_OWN_DATABASE}=1 to its URL.",
            id="shardline.E010",
        )
        for name, definition in settings.SHARDLINE_PG_CONNECTIONS.items()
        if not definition[ALLOW_OWN_DATABASE] and reaches_own_database(definition["params"])
    ]
