"""The transport retries 5xx/429 (honouring Retry-After) and raises other errors at once."""

import http.server
import json
import threading
import time

import pytest

from worker_sdk import APIError, AuthError, LeaseLostError
from worker_sdk.transport import Transport


class Scripted(http.server.BaseHTTPRequestHandler):
    """Answers each request with the next (status, headers, body) of the server's script."""

    def do_POST(self):
        sent = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.server.seen.append((self.command, self.path, dict(self.headers), sent))
        status, headers, body = self.server.script.pop(0)
        self.server.times.append(time.monotonic())
        payload = json.dumps(body).encode()
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if headers.get("X-Cut-Off"):  # the server goes away halfway through its answer
            self.wfile.write(payload[: len(payload) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(payload)

    do_GET = do_POST

    def log_message(self, *args):
        pass


@pytest.fixture
def scripted():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Scripted)
    server.script, server.times, server.seen = [], [], []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()


def transport(server, **kwargs):
    return Transport(f"http://127.0.0.1:{server.server_address[1]}", "token", backoff_base=0.01, **kwargs)


def test_503_and_429_are_retried_honouring_retry_after(scripted):
    scripted.script = [
        # Lowercased, as an ASGI server sends every header name.
        (503, {"retry-after": "0.3"}, {"error": "unavailable", "message": "db restarting"}),
        (429, {"Retry-After": "0.2"}, {"error": "throttled", "message": "slow down"}),
        (200, {}, {"ok": True}),
    ]
    assert transport(scripted).request("POST", "/x", json={}) == {"ok": True}
    gaps = [b - a for a, b in zip(scripted.times, scripted.times[1:])]
    assert gaps[0] >= 0.3 and gaps[1] >= 0.2


def test_an_answer_cut_off_halfway_is_asked_for_again(scripted):
    scripted.script = [
        (200, {"X-Cut-Off": "1"}, {"leases": ["lost on the way"]}),
        (200, {}, {"leases": ["the first answer, again"]}),
    ]
    answer = transport(scripted).request("POST", "/x", json={}, idempotency_key="k")
    assert answer == {"leases": ["the first answer, again"]} and len(scripted.times) == 2


class ClosesIdle(Scripted):
    """Keeps each connection open after an answer, then closes it under the next request unanswered.

    As uvicorn does to a kept-alive connection idle past its timeout when a
    request goes out on it at that moment.
    """

    protocol_version = "HTTP/1.1"
    answered = False

    def do_POST(self):
        if self.answered:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self.server.dropped += 1
            self.close_connection = True
            return
        self.answered = True
        super().do_POST()


def test_a_kept_alive_connection_closed_under_a_request_is_sent_again_at_once_unlogged(caplog):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), ClosesIdle)
    server.script, server.times, server.seen, server.dropped = [(200, {}, {"n": 1}), (200, {}, {"n": 2})], [], [], 0
    threading.Thread(target=server.serve_forever, daemon=True).start()
    waits = []

    class Counted(Transport):
        def backoff(self, attempt):
            waits.append(attempt)
            return 0.0

    try:
        client = Counted(f"http://127.0.0.1:{server.server_address[1]}", "token", retry_seconds=5)
        with caplog.at_level("DEBUG", logger="worker_sdk.transport"):
            assert client.request("POST", "/x", json={}) == {"n": 1}
            assert client.request("POST", "/x", json={}) == {"n": 2}
    finally:
        server.shutdown()
    assert server.dropped == 1 and len(server.seen) == 2  # the second went out twice, answered on a new connection
    assert waits == []  # no backoff
    assert [r.levelname for r in caplog.records] == ["DEBUG"] and "closed the connection" in caplog.text


def test_a_server_that_closes_every_connection_unanswered_is_retried_and_logged(caplog):
    class Never(ClosesIdle):
        answered = True  # from the first request on

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Never)
    server.script, server.times, server.seen, server.dropped = [], [], [], 0
    threading.Thread(target=server.serve_forever, daemon=True).start()
    from worker_sdk import ConnectionError as ShardlineConnectionError

    try:
        client = Transport(
            f"http://127.0.0.1:{server.server_address[1]}", "token", retry_seconds=0.5, backoff_base=0.01
        )
        with caplog.at_level("WARNING", logger="worker_sdk.transport"):
            with pytest.raises(ShardlineConnectionError, match="Connection aborted"):
                client.request("POST", "/x", json={})
    finally:
        server.shutdown()
    assert server.dropped >= 3  # the quiet repeat, then the retries with backoff
    assert any("retrying" in r.getMessage() for r in caplog.records if r.levelname == "WARNING")


def test_client_errors_are_raised_at_once_as_their_class(scripted):
    scripted.script = [
        (409, {}, {"error": "lease_lost", "message": "lease 5 is not held"}),
        (403, {}, {"error": "permission_denied", "message": "needs the worker role"}),
        (400, {}, {"error": "invalid", "message": "invalid input: count", "fields": {"count": ["bad"]}}),
    ]
    client = transport(scripted)
    with pytest.raises(LeaseLostError):
        client.request("POST", "/x")
    with pytest.raises(AuthError) as auth:
        client.request("POST", "/x")
    with pytest.raises(APIError) as invalid:
        client.request("POST", "/x")
    assert auth.value.status == 403 and invalid.value.body["fields"] == {"count": ["bad"]}
    assert len(scripted.times) == 3  # one request each: nothing retried


def test_retrying_stops_at_the_deadline_with_the_last_problem(scripted):
    from worker_sdk import ConnectionError as ShardlineConnectionError

    scripted.script = [(503, {"Retry-After": "0.2"}, {"message": "down"})] * 20
    with pytest.raises(ShardlineConnectionError, match="HTTP 503: down"):
        transport(scripted, retry_seconds=0.5).request("POST", "/x")


def test_a_retry_pace_bounds_every_wait_the_server_asks_for_included(scripted):
    # A heartbeat retries at its own pace: a lease of a few seconds would run
    # out behind the backoff's 5 s or a Retry-After.
    scripted.script = [(503, {"Retry-After": "30"}, {"error": "unavailable", "message": "db restarting"})] * 3
    scripted.script.append((200, {}, {"ok": True}))
    slow = Transport(f"http://127.0.0.1:{scripted.server_address[1]}", "token", backoff_base=5.0)
    began = time.monotonic()
    assert slow.request("POST", "/x", json={}, retry_pace=0.1) == {"ok": True}
    assert time.monotonic() - began < 5  # three waits of at most 0.1 s each, not 30 s
    assert len(scripted.times) == 4


def test_a_request_carries_its_token_body_and_query_as_sent(scripted):
    scripted.script = [(200, {}, {"ok": True}), (200, {}, {"ok": True})]
    client = transport(scripted)
    assert client.request("POST", "/x", json={"count": 2, "name": "é"}, idempotency_key="k1") == {"ok": True}
    assert client.request("GET", "/y", params={"state": ["done", "failed"], "epoch": 3, "user": None}) == {"ok": True}
    (method, path, headers, body), (get, query, _headers, _body) = scripted.seen
    assert (method, path, json.loads(body)) == ("POST", "/x", {"count": 2, "name": "é"})
    assert headers["Authorization"] == "Token token" and headers["Idempotency-Key"] == "k1"
    assert headers["Content-Type"] == "application/json"
    # None leaves the key out, a list repeats it (as requests encoded them).
    assert (get, query) == ("GET", "/y?state=done&state=failed&epoch=3")


def test_a_redirect_is_an_error_that_names_where_it_pointed_not_followed(scripted):
    from worker_sdk.errors import ShardlineError

    scripted.script = [(301, {"location": "https://shardline.example/x"}, {})]
    with pytest.raises(ShardlineError, match="redirected.*https://shardline.example/x.*SHARDLINE_URL"):
        transport(scripted).request("POST", "/x", json={})
    assert len(scripted.times) == 1


def test_the_proxy_the_environment_names_carries_the_requests(scripted, monkeypatch):
    for name in ("HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("http_proxy", f"http://127.0.0.1:{scripted.server_address[1]}")
    scripted.script = [(200, {}, {"ok": True})]
    # A name that resolves nowhere: only the proxy can answer for it.
    far = Transport("http://shardline.invalid:8000", "token", retry_seconds=0)
    assert far.request("POST", "/x", json={}) == {"ok": True}
    assert scripted.seen[0][1] == "http://shardline.invalid:8000/x"  # the absolute form a proxy is sent

    monkeypatch.setenv("no_proxy", "shardline.invalid")
    from worker_sdk import ConnectionError as ShardlineConnectionError

    with pytest.raises(ShardlineConnectionError, match="gave up"):
        Transport("http://shardline.invalid:8000", "token", retry_seconds=0).request("POST", "/x", json={})
    assert len(scripted.seen) == 1


def test_a_server_that_is_not_there_is_a_connection_error_after_the_retries():
    import socket

    from worker_sdk import ConnectionError as ShardlineConnectionError

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # bound, never listening: connections are refused
        nowhere = Transport(f"http://127.0.0.1:{port}", "token", retry_seconds=0.3, backoff_base=0.01)
        with pytest.raises(ShardlineConnectionError, match=r"gave up on POST .* after \d+ attempts"):
            nowhere.request("POST", "/x", json={})


@pytest.mark.parametrize("url", ["http://127.0.0.1:80x0", "ftp://shardline.internal", "http://:8000", "host:8000"])
def test_a_server_url_that_cannot_work_is_an_error_at_once(url):
    from worker_sdk import ConfigurationError

    with pytest.raises(ConfigurationError, match="URL"):
        Transport(url, "token")


def clean_proxy_environment(monkeypatch):
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)


def test_what_the_environment_names_and_cannot_work_is_an_error_at_once_not_retried(monkeypatch, tmp_path):
    from worker_sdk import ConfigurationError

    clean_proxy_environment(monkeypatch)
    patient = Transport("http://shardline.invalid:8000", "token", retry_seconds=60)
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(tmp_path / "missing.pem"))
    began = time.monotonic()
    with pytest.raises(ConfigurationError, match="missing.pem"):
        patient.request("POST", "/x", json={})
    monkeypatch.delenv("REQUESTS_CA_BUNDLE")
    monkeypatch.setenv("http_proxy", "ftp://proxy.invalid:21")
    with pytest.raises(ConfigurationError, match="proxy"):
        Transport("http://shardline.invalid:8000", "token", retry_seconds=60).request("POST", "/x", json={})
    assert time.monotonic() - began < 5  # neither waited out the 60-s retry budget


def test_a_proxys_credentials_go_to_it_as_proxy_authorization(scripted, monkeypatch):
    import base64

    clean_proxy_environment(monkeypatch)
    monkeypatch.setenv("http_proxy", f"http://user%40corp:s%3Acret@127.0.0.1:{scripted.server_address[1]}")
    scripted.script = [(200, {}, {"ok": True})]
    assert Transport("http://shardline.invalid:8000", "token").request("POST", "/x", json={}) == {"ok": True}
    expected = "Basic " + base64.b64encode(b"user@corp:s:cret").decode()
    sent = {name.lower(): value for name, value in scripted.seen[0][2].items()}
    assert sent["proxy-authorization"] == expected


def test_no_proxy_may_name_networks(scripted, monkeypatch):
    clean_proxy_environment(monkeypatch)
    monkeypatch.setenv("http_proxy", "http://proxy.invalid:3128")  # would fail: only a direct connection answers
    monkeypatch.setenv("no_proxy", "10.0.0.0/8, 127.0.0.0/8")
    scripted.script = [(200, {}, {"ok": True})]
    direct = Transport(f"http://127.0.0.1:{scripted.server_address[1]}", "token", retry_seconds=0)
    assert direct.request("POST", "/x", json={}) == {"ok": True}
    assert scripted.seen[0][1] == "/x"  # the origin form: no proxy in between
