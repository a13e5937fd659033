"""A web worker that dies leaves no metrics file behind (issue 26).

Found: nothing called prometheus_client's mark_process_dead when gunicorn
replaced a worker, so its live-sum gauge file (waiting takes) stayed in
PROMETHEUS_MULTIPROC_DIR and /metrics added the dead process's last value
until the web server restarted. Every gunicorn of the project now runs
server/gunicorn_conf.py, whose child_exit hook removes it.
"""

import os
import signal

import requests

from tests.support import ServerProcess, wait_until


def _gauge_pids(folder) -> set[int]:
    return {int(name.rsplit("_", 1)[1][:-3]) for name in os.listdir(folder) if name.startswith("gauge_livesum_")}


def test_a_killed_workers_gauge_file_goes_with_it(test_database_url, live_keys, tmp_path):
    server = ServerProcess(test_database_url, workers=2, extra_env={"PROMETHEUS_MULTIPROC_DIR": str(tmp_path)})
    server.start()
    try:
        workers = {
            int(pid) for pid in open(f"/proc/{server.process.pid}/task/{server.process.pid}/children").read().split()
        }

        def both_wrote():
            requests.get(server.url + "/metrics", timeout=5)
            return workers <= _gauge_pids(tmp_path)

        wait_until(both_wrote, 30, 0.05, "both workers to write their gauge files")
        victim = min(workers)
        os.kill(victim, signal.SIGKILL)
        wait_until(lambda: victim not in _gauge_pids(tmp_path), 30, 0.05, "the dead worker's gauge file to go")
        # The master replaced it, and the survivor's file is still there.
        assert max(workers) in _gauge_pids(tmp_path)
        assert requests.get(server.url + "/healthz", timeout=5).status_code == 200
    finally:
        server.stop()
