"""A view's wait reaches the gateway only under a run id the gateway opened: a client cannot plant one.

A client may send its own X-Shardline-Gateway (or x_shardline_gateway, which
the WSGI environ reads as the same header, joined to the gateway's with a
comma): such a run id was never opened, so nothing is kept for it.
"""

from types import SimpleNamespace

from server.api import waits


def request_with(run: str):
    return SimpleNamespace(META={"HTTP_X_SHARDLINE_GATEWAY": run})


def test_a_run_the_gateway_opened_hands_its_wait_over_once():
    wait = waits.Wait(5.0, 1)
    run = waits.open_run("unit-1")
    waits.offer(request_with(run), None, wait)
    assert waits.taken(run) is wait
    assert waits.taken(run) is None


def test_a_run_id_sent_by_a_client_keeps_nothing():
    opened = waits.open_run("unit-2")
    for planted in ("evil", f"evil,{opened}", f"{opened},{opened}"):
        waits.offer(request_with(planted), None, waits.Wait(5.0, 1))
        assert planted not in waits._offered
    assert waits.taken(opened) is None
    assert "unit-2" not in waits._runs
