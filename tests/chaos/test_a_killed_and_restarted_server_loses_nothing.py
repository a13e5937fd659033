"""The web server is SIGKILLed (master and workers) twice mid-run and restarted on the same port.

Proves: four SDK workers ride out both crashes by retrying (they really met
the dead server), the run completes, and the audit shows every item done
exactly once with only the newest lease's completion accepted.
"""

import pytest

from tests.support import ServerProcess, wait_until

from .harness import Worker, audit, job_named, run_workers_until_done

ITEMS, EPOCHS, WORKERS = 120, 1, 4


@pytest.fixture
def own_server(test_database_url):
    server = ServerProcess(test_database_url, workers=2).start()
    yield server
    server.stop()


def test_a_killed_and_restarted_server_loses_nothing(own_server, sdk_env):
    env = {**sdk_env, "SHARDLINE_URL": own_server.url}
    queue = "chaos_server"
    workers = [Worker(env, f"s{i}", queue, ITEMS, EPOCHS, 0.1, 3.0) for i in range(WORKERS)]
    job_id = wait_until(lambda: job_named(queue, env["SHARDLINE_RUN"]), 30, 0.1, "the job to exist")
    servers = [own_server]
    crash_at = [ITEMS // 4, ITEMS // 2]

    def during(done):
        if crash_at and done >= crash_at[0]:
            crash_at.pop(0)
            servers[-1].kill()
            restarted = ServerProcess(own_server.env["DATABASE_URL"], workers=2)
            restarted.port, restarted.url = own_server.port, own_server.url
            servers.append(restarted.start())

    try:
        run_workers_until_done(workers, job_id, ITEMS * EPOCHS, during)
    finally:
        servers[-1].stop()
    assert len(servers) == 3, "the run ended before both crashes"
    assert any("retrying" in "".join(w.stderr) for w in workers), "no worker met the dead server"
    figures = audit(job_id, ITEMS, EPOCHS)
    print(
        f"\nchaos server: 2 SIGKILLs of the web server, 2 restarts, {figures['rows']} items done once, 0 lost, "
        f"{figures['releases']} leases taken back after the crashes"
    )
