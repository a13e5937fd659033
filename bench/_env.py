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


def prepare(token_name: str) -> str:
    """Sets up Django, migrates and vacuums the database, and makes a worker token: the token's key.

    Uses DATABASE_URL when set, else the embedded Postgres. The vacuum is
    what autovacuum does in a deployment: it is off on some machines, where
    the dead item rows that earlier benches left once made the server's CPU
    per 1,000 records 125 ms where it is 3-8 (bench/RESULTS.md).
    """
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from server.services import accounts

    call_command("migrate", verbosity=0, interactive=False)
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")
    user, _ = accounts.ensure_user("bench", "worker")
    _token, key = accounts.create_token(user, "worker", name=token_name)
    return key


def serve(token_name: str, workers: int = 4):
    """``prepare``, then starts the ASGI server of tests/support.py: (server, key). The caller stops the server."""
    key = prepare(token_name)
    from django.conf import settings

    from tests.support import ServerProcess, database_url

    return ServerProcess(database_url(settings.DATABASES["default"]), workers=workers).start(), key


def tf_records(records):
    """``records()`` (bytes) through ``from_generator``, with the options ``WorkQueue.dataset()`` sets: no queue in it."""
    import tensorflow as tf

    options = tf.data.Options()
    options.experimental_optimization.inject_prefetch = False
    options.autotune.enabled = False
    dataset = tf.data.Dataset.from_generator(records, output_signature=tf.TensorSpec(shape=[], dtype=tf.string))
    return dataset.with_options(options).as_numpy_iterator()
