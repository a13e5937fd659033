"""System checks that need the database (run by `migrate`, and by `check --database default`)."""

from django.core.checks import Tags, Warning, register
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
            "(README, Operating). Set autovacuum = on in postgresql.conf.",
            id="shardline.W001",
        )
    ]
