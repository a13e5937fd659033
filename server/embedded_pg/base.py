"""The Django database backend of the embedded Postgres: Postgres, started on first connection.

Settings name this backend instead of starting the server themselves, so that
importing them starts nothing and the server is started by whichever entry
point first needs it (the web app, a Celery worker, a management command, the
test suite).
"""

from django.db.backends.postgresql import base

from . import ensure_running


class DatabaseWrapper(base.DatabaseWrapper):
    def get_connection_params(self):
        # Where the socket is (the data folder, or a shorter runtime path) is
        # known only once the server runs.
        self.settings_dict["HOST"], self.settings_dict["PORT"] = ensure_running()
        return super().get_connection_params()
