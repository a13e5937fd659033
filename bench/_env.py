"""What every benchmark sets before it imports the project, and the percentile they report."""

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "server.settings")
os.environ.setdefault("LOG_LEVEL", "WARNING")
# Benchmarks serve nobody: a throw-away key when none is set (DATABASE_URL makes one required).
os.environ.setdefault("SECRET_KEY", "benchmark-only-not-secret")


def percentile(values, q):
    """The q-quantile of values (nearest rank); NaN for none."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def serve(token_name: str, workers: int = 4):
    """Migrates the database, makes a worker token and starts the ASGI server of tests/support.py: (server, key).

    The caller stops the server. Uses DATABASE_URL when set, else the embedded Postgres.
    """
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    from server.services import accounts
    from tests.support import ServerProcess, database_url

    call_command("migrate", verbosity=0, interactive=False)
    user, _ = accounts.ensure_user("bench", "worker")
    _token, key = accounts.create_token(user, "worker", name=token_name)
    return ServerProcess(database_url(settings.DATABASES["default"]), workers=workers).start(), key
