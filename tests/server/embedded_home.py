"""The environment of commands that use an embedded Postgres of their own (SHARDLINE_HOME; the ``home`` fixture, conftest.py)."""

import os

from tests.support import ROOT


def environment(home) -> dict:
    """This process's environment without the machine's database and broker, with ``home`` as SHARDLINE_HOME."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("DATABASE_URL", "CELERY_BROKER_URL", "DJANGO_SETTINGS_MODULE")
    }
    return {**env, "SHARDLINE_HOME": str(home), "PYTHONPATH": str(ROOT)}
