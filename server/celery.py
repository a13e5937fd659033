"""The Celery app: `celery -A server worker` starts a worker.

CELERY_BROKER_URL selects the broker (Redis in docker-compose and CI). Without
it, the broker is kombu's filesystem transport under $SHARDLINE_HOME/broker,
which needs no server: what `make run` uses beside the embedded Postgres.
"""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "server.settings")

app = Celery("shardline")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["server"])
