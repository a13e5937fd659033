"""A real Prometheus scrapes a real server, and every query of the Grafana dashboard has data.

deploy/prometheus/ and deploy/grafana/ (docs/monitoring.md) are checked with
Debian's `prometheus` and `promtool`: the config and the alert rules as
promtool checks them, the rules' unit tests, and then, live, a gunicorn
server (several workers, one metrics folder, a metrics token as an operator
sets one) that readers of a sliced job (with splits), a lost lease and a job
still under way have moved, scraped every second by a Prometheus that runs
deploy/prometheus/prometheus.yml with only the target, the token file and
the intervals changed. Every `expr` of deploy/grafana/shardline.json, its
variables substituted as Grafana would, must then return a series with a
number, and every alert rule must evaluate without an error.

Outside CI a machine without the binaries skips these tests, naming the
package; .ci/run sets SHARDLINE_REQUIRE_PROMETHEUS=1, where that is a failure.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import signal
import subprocess
import uuid
from pathlib import Path

import pytest
import requests
import yaml

from tests.support import ROOT, Api, ServerProcess, free_port, wait_until
from tests.tail.harness import collect, sliced_job, start_reader, write_files

PROMETHEUS_DIR = ROOT / "deploy" / "prometheus"
DASHBOARD = ROOT / "deploy" / "grafana" / "shardline.json"
METRICS_TOKEN = "metrics-token-for-the-prometheus-test"

MISSING = [name for name in ("prometheus", "promtool") if shutil.which(name) is None]
if MISSING:
    message = f"these tests need {' and '.join(MISSING)} from Debian's prometheus package (apt-get install prometheus)"
    if os.environ.get("SHARDLINE_REQUIRE_PROMETHEUS") == "1":
        raise RuntimeError(message)
    pytest.skip(message, allow_module_level=True)


def promtool(*args: str, cwd: Path = PROMETHEUS_DIR) -> str:
    done = subprocess.run(["promtool", *args], cwd=cwd, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, f"promtool {' '.join(args)}:\n{done.stdout}{done.stderr}"
    return done.stdout


def deployed_config() -> dict:
    return yaml.safe_load((PROMETHEUS_DIR / "prometheus.yml").read_text())


def local_config(folder: Path, target: str, token: str | None, interval: str | None = None) -> Path:
    """prometheus.yml as deployed, with the container's paths and the web service's address mapped here."""
    config = deployed_config()
    config["rule_files"] = [str(PROMETHEUS_DIR / name) for name in config["rule_files"]]
    if interval:
        config["global"].update(scrape_interval=interval, evaluation_interval=interval)
    (scrape,) = config["scrape_configs"]
    if interval:
        scrape["scrape_timeout"] = interval
    scrape["static_configs"] = [{"targets": [target]}]
    token_file = folder / "shardline_metrics_token"
    token_file.write_text(token or "")
    scrape["authorization"]["credentials_file"] = str(token_file)
    path = folder / "prometheus.yml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.mark.timeout(60)
def test_promtool_passes_the_config_the_rules_and_their_unit_tests(tmp_path):
    # As written (the token file exists only in the container), then with
    # every file it names in place, as the container has them.
    assert "SUCCESS" in promtool("check", "config", "--syntax-only", "prometheus.yml")
    promtool("check", "config", str(local_config(tmp_path, "web:8000", METRICS_TOKEN)))
    assert "SUCCESS" in promtool("check", "rules", "alerts.yml")
    assert "SUCCESS" in promtool("test", "rules", "alerts_test.yml")
    # The unit tests cover every rule.
    rules = {
        rule["alert"]
        for group in yaml.safe_load((PROMETHEUS_DIR / "alerts.yml").read_text())["groups"]
        for rule in group["rules"]
    }
    tested = {
        test["alertname"]
        for case in yaml.safe_load((PROMETHEUS_DIR / "alerts_test.yml").read_text())["tests"]
        for test in case["alert_rule_test"]
    }
    assert rules == tested, rules ^ tested


def dashboard_queries() -> list[tuple[str, str]]:
    """(panel title, expr) of every target of every panel."""
    dashboard = json.loads(DASHBOARD.read_text())
    queries = []
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            queries.append((panel["title"], target["expr"]))
    assert len(queries) >= 15, queries
    return queries


def substitute(expr: str, scrape_job: str) -> str:
    """Grafana's variables: every job (the `All` of $job), the scrape job, and a rate interval that fits 1 s scrapes."""
    expr = expr.replace("$__rate_interval", "1m").replace("$scrape_job", scrape_job).replace("$job", ".*")
    assert "$" not in expr, f"a variable this test does not know: {expr}"
    return expr


class Prometheus:
    def __init__(self, config: Path, storage: Path):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = storage.parent / "prometheus.log"
        self.process = subprocess.Popen(
            [
                "prometheus",
                f"--config.file={config}",
                f"--storage.tsdb.path={storage}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--log.level=warn",
            ],
            stdout=self.log.open("w"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def ready(self) -> bool:
        assert self.process.poll() is None, f"prometheus exited:\n{self.log.read_text()}"
        try:
            return requests.get(self.url + "/-/ready", timeout=2).status_code == 200
        except requests.RequestException:
            return False

    def query(self, expr: str) -> list[dict]:
        answer = requests.get(self.url + "/api/v1/query", params={"query": expr}, timeout=10)
        body = answer.json()
        assert answer.status_code == 200 and body["status"] == "success", f"{expr}: {body}"
        return body["data"]["result"]

    def stop(self):
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()


def has_a_number(result: list[dict]) -> bool:
    return any(not math.isnan(float(series["value"][1])) for series in result)


@pytest.fixture
def server(test_database_url, tmp_path):
    """gunicorn with several workers sharing one metrics folder, /metrics behind a token: as deployed."""
    metrics_dir = tmp_path / "metrics"
    metrics_dir.mkdir()
    server = ServerProcess(
        test_database_url,
        workers=2,
        extra_env={"PROMETHEUS_MULTIPROC_DIR": str(metrics_dir), "SHARDLINE_METRICS_TOKEN": METRICS_TOKEN},
    )
    server.start()
    yield server
    server.stop()


@pytest.fixture
def prometheus(server, tmp_path):
    folder = tmp_path / "prometheus"
    folder.mkdir()
    config = local_config(folder, f"127.0.0.1:{server.port}", METRICS_TOKEN, interval="1s")
    instance = Prometheus(config, folder / "data")
    try:
        wait_until(instance.ready, 20, 0.1, "prometheus to be ready")
        yield instance
    finally:
        instance.stop()


def run_sliced_job_until_a_split(sdk_env: dict, tmp_path: Path, rounds: int = 4) -> None:
    """Three readers of a sliced job, one slow (tests/tail): the fast ones run out and splits happen."""
    for round_no in range(rounds):
        works = write_files(tmp_path, 2, 600)
        name = f"metrics-tail-{uuid.uuid4().hex[:6]}"
        queue = sliced_job(works, name, sdk_env["SHARDLINE_RUN"], 6)
        barrier = tmp_path / f"barrier-{round_no}"
        barrier.mkdir()
        delays = [0.0005, 0.0005, 0.01]
        children = [
            start_reader(sdk_env, "ranges", name, 6, delay, f"m{round_no}-{index}", works, barrier, len(delays))
            for index, delay in enumerate(delays)
        ]
        for code, stdout, stderr in collect(children, 60, "the readers"):
            assert code == 0 and "finished" in stdout, f"a reader failed (exit {code}):\n{stderr[-3000:]}"
        if queue._client.job(queue.job["id"])["splits"]:
            return
    raise AssertionError(f"no split in {rounds} rounds: the split panels would have nothing to show")


def lose_a_lease(api: Api) -> None:
    """Worker a's lease expires and worker b's take gets the item back: a's complete answers 409 lease_lost."""
    job = api.post(
        "/api/v1/jobs/",
        {"name": f"metrics-lost-{uuid.uuid4().hex[:6]}", "works": ["/lost/0"], "lease_timeout": 1, "shuffle": False},
    ).json()
    (held,) = api.post(f"/api/v1/jobs/{job['id']}/leases/", {"worker": "a", "count": 1}).json()["leases"]

    def taken_back():
        return api.post(f"/api/v1/jobs/{job['id']}/leases/", {"worker": "b", "count": 1}).json()["leases"]

    (retaken,) = wait_until(taken_back, 20, 0.2, "worker b's take to get the expired item")
    lost = api.post(f"/api/v1/leases/{held['id']}/complete/", {"token": held["token"]})
    assert lost.status_code == 409, lost.text
    assert api.post(f"/api/v1/leases/{retaken['id']}/complete/", {"token": retaken["token"]}).status_code == 200


@pytest.mark.timeout(90)
def test_prometheus_scrapes_the_server_and_every_dashboard_query_has_data(
    server, prometheus, live_keys, celery_worker, tmp_path, monkeypatch
):
    sdk_env = {
        "SHARDLINE_URL": server.url,
        "SHARDLINE_TOKEN": live_keys["worker"],
        "SHARDLINE_RUN": uuid.uuid4().hex[:10],
        "SHARDLINE_RETRY_SECONDS": "60",
    }
    for key, value in sdk_env.items():
        monkeypatch.setenv(key, value)
    api = Api(server.url, live_keys["worker"])

    # Scraped with the token: the server refuses /metrics without it.
    assert requests.get(server.url + "/metrics", timeout=10).status_code == 401
    wait_until(lambda: prometheus.query('up{job="shardline"} == 1'), 20, 0.2, "the first scrape with the token")

    # A job still under way, first seen with nothing done: its rate and ETA have a slope to show.
    name = f"metrics-open-{uuid.uuid4().hex[:6]}"
    open_job = api.post("/api/v1/jobs/", {"name": name, "works": [f"/open/{i}" for i in range(6)], "shuffle": False})
    assert open_job.status_code in (200, 201), open_job.text
    job_id = open_job.json()["id"]
    done = f'shardline_job_items{{exported_job="{name}", state="done"}}'
    wait_until(lambda: prometheus.query(f"{done} == 0"), 20, 0.2, "a scrape of the new job")

    # The Data stall panels read rates: a loop's counters must rise between
    # two scrapes. The sliced readers below may report all they have before
    # one scrape (a CI run found the panels empty), so a held lease's
    # heartbeats report twice, each seen by a scrape of its own.
    (held,) = api.post(f"/api/v1/jobs/{job_id}/leases/", {"worker": "stalled-loop", "count": 1}).json()["leases"]
    waited_series = f'shardline_data_wait_seconds_total{{exported_job="{name}", worker="stalled-loop"}}'
    for waited, busy in ((1.0, 1.0), (3.0, 1.5)):
        beat = {
            "leases": [{"id": held["id"], "token": held["token"]}],
            "stall": {"clock": "metrics-test", "waited": waited, "busy": busy},
        }
        assert api.post("/api/v1/leases/extend/", beat).status_code == 200
        wait_until(lambda w=waited: prometheus.query(f"{waited_series} == {w}"), 20, 0.2, "a scrape of the stall")

    # Its readers read through ranges().records(): their heartbeats also
    # carry their loops' data stall, which the Data stall panels show.
    run_sliced_job_until_a_split(sdk_env, tmp_path)
    lose_a_lease(api)

    for _ in range(3):  # one at a time: the done count climbs over several scrapes
        (lease,) = api.post(f"/api/v1/jobs/{job_id}/leases/", {"worker": "open-worker", "count": 1}).json()["leases"]
        assert api.post(f"/api/v1/leases/{lease['id']}/complete/", {"token": lease["token"]}).status_code == 200
    wait_until(lambda: prometheus.query(f"{done} == 3"), 20, 0.2, "a scrape after the last completion")

    # The lost lease as the alerts see it: taken back once expired, its holder refused.
    for expr in (
        "shardline_leases_reclaimed_total >= 1",
        'shardline_leases_lost_total{op="complete"} >= 1',
        'shardline_lease_operations_total{op="complete", outcome="lease_lost"} >= 1',
    ):
        wait_until(lambda expr=expr: prometheus.query(expr), 20, 0.2, expr)

    scrape_job = deployed_config()["scrape_configs"][0]["job_name"]
    queries = [(title, substitute(expr, scrape_job)) for title, expr in dashboard_queries()]
    empty: dict[str, list] = {}

    def every_query_has_data() -> bool:
        empty.clear()
        for title, expr in queries:
            result = prometheus.query(expr)
            if not has_a_number(result):
                empty[f"{title}: {expr}"] = result
        return not empty

    # Only metrics this server exports (and Prometheus's own `up` and `scrape_*` per target).
    scraped = {
        series["metric"]["__name__"] for series in prometheus.query(f'group by (__name__) ({{job="{scrape_job}"}})')
    }
    unquoted = [re.sub(r'"[^"]*"', '""', expr) for _title, expr in queries]
    used = {name for expr in unquoted for name in re.findall(r"\b(shardline_\w+|scrape_\w+|up)\b", expr)}
    assert used <= scraped, f"the dashboard names metrics that the server does not export: {used - scraped}"

    try:
        wait_until(every_query_has_data, 20, 0.5, "every dashboard query to have data")
    except AssertionError:
        raise AssertionError(f"dashboard queries without data: {json.dumps(empty, indent=1)}") from None

    # Every alert rule evaluated against these series without an error.
    def rules_evaluated():
        groups = requests.get(prometheus.url + "/api/v1/rules", timeout=10).json()["data"]["groups"]
        rules = [rule for group in groups for rule in group["rules"]]
        return rules if rules and all(not rule["lastEvaluation"].startswith("0001-") for rule in rules) else None

    rules = wait_until(rules_evaluated, 20, 0.2, "every rule to be evaluated")
    assert {rule["name"] for rule in rules} >= {"ShardlineJobStalled", "ShardlineLeasesLost", "ShardlineJobLostWorkers"}
    assert all(rule["health"] == "ok" for rule in rules), [(r["name"], r.get("lastError")) for r in rules]
