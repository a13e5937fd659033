"""Settings for the test suite: the project's settings plus a test-only SECRET_KEY.

The suite runs with DATABASE_URL set, where server/settings.py requires
SECRET_KEY (a deployment must set one). Server and Celery processes that the
tests start inherit it from this process's environment.
"""

import os

os.environ.setdefault("SECRET_KEY", "test-only-secret-key-not-for-any-deployment-0123456789")
# Outside DEBUG, a server without data roots reads no file; the suite's jobs
# slice files in temporary folders and name made-up local paths (/a,
# /data/big.csv), so every local path is allowed here. The default itself is
# tested with the roots unset (tests/security/test_without_data_roots_the_server_reads_no_file.py).
os.environ.setdefault("SHARDLINE_DATA_ROOTS", "/")

from server.settings import *  # noqa: E402,F401,F403
