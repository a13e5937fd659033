"""gunicorn's settings for every gunicorn this project starts (``--config python:server.gunicorn_conf``).

``make run``, the image's CMD and the test servers pass it. Everything else
is given on their command lines.
"""

import os


def child_exit(server, worker):
    # A worker that exits (killed, recycled, crashed) leaves its live-sum
    # gauge file in PROMETHEUS_MULTIPROC_DIR, and /metrics would go on adding
    # the dead process's last values (waiting takes) until the web server
    # restarts. prometheus_client's mark_process_dead removes it; the master
    # runs this hook for each worker it reaps.
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)
