"""The ASGI entry point, how Shardline is served: gunicorn with uvicorn workers (docs/design.md, "Serving").

Django's WSGI handler runs on a pool of SHARDLINE_WEB_THREADS threads per
process, each keeping its database connection; takes and heartbeats that
wait for work do so on the event loop, holding neither (server/gateway.py).
"""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "server.settings")

from django.core.wsgi import get_wsgi_application  # noqa: E402  (after the environment it reads)

from server.conf import env_int  # noqa: E402
from server.gateway import Gateway  # noqa: E402

application = Gateway(get_wsgi_application(), threads=env_int("SHARDLINE_WEB_THREADS", 8, minimum=1))

from server.urls import warm  # noqa: E402  (after Django is set up)

warm()
