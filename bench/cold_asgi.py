"""server/asgi.py without its warm-up (server.urls.warm): the cold side of bench/first_request.py."""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "server.settings")

from django.core.wsgi import get_wsgi_application  # noqa: E402

from server.conf import env_int  # noqa: E402
from server.gateway import Gateway  # noqa: E402

application = Gateway(get_wsgi_application(), threads=env_int("SHARDLINE_WEB_THREADS", 8, minimum=1))
