"""Settings for the test suite: the project's settings plus a test-only SECRET_KEY.

The suite runs with DATABASE_URL set, where server/settings.py requires
SECRET_KEY (a deployment must set one). Server and Celery processes that the
tests start inherit it from this process's environment.
"""

import os

os.environ.setdefault("SECRET_KEY", "test-only-secret-key-not-for-any-deployment-0123456789")

from server.settings import *  # noqa: E402,F401,F403
