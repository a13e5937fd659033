"""docker-compose.yml cannot be run here (no Docker engine); it is checked as data."""

import json
import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def load_compose():
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_compose_defines_postgres_migrate_and_web():
    compose = load_compose()
    services = compose["services"]
    assert {"postgres", "redis", "migrate", "web", "worker"} <= set(services)
    assert services["worker"]["command"][:4] == ["celery", "-A", "server", "worker"]
    assert services["worker"]["environment"]["CELERY_BROKER_URL"] == "redis://redis:6379/0"
    web = services["web"]
    assert web["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert web["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    # web runs the image's CMD (which wipes old metrics files first).
    assert "command" not in web
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert (
        "gunicorn --config python:server.gunicorn_conf server.asgi --worker-class uvicorn_worker.UvicornWorker"
        in dockerfile
    )
    assert web["environment"]["WEB_CONCURRENCY"] == "${SHARDLINE_WEB_WORKERS:-4}"
    assert "healthz" in " ".join(web["healthcheck"]["test"])
    assert services["migrate"]["command"] == ["python", "manage.py", "migrate", "--noinput"]
    assert services["postgres"]["volumes"] == ["pgdata:/var/lib/postgresql/data"]
    assert "autovacuum_naptime=10s" in services["postgres"]["command"]
    assert {"pgdata", "redisdata"} <= set(compose["volumes"])


def test_compose_points_the_app_at_its_postgres_and_env_file():
    web = load_compose()["services"]["web"]
    assert web["env_file"] == ".env"
    assert web["environment"]["DATABASE_URL"].startswith("postgres://shardline:")
    assert "@postgres:5432/shardline" in web["environment"]["DATABASE_URL"]


def test_env_example_names_every_variable_compose_interpolates():
    import re

    text = (ROOT / "docker-compose.yml").read_text()
    used = set(re.findall(r"\$\{([A-Z_]+)", text))
    example = {
        line.split("=", 1)[0]
        for line in (ROOT / ".env.example").read_text().splitlines()
        if "=" in line and not line.startswith("#")
    }
    assert used <= example, used - example


def test_dockerfile_builds_from_the_project_files():
    dockerfile = (ROOT / "Dockerfile").read_text()
    for part in ("COPY server", "COPY migrations", "pip install", "collectstatic", "USER shardline"):
        assert part in dockerfile


def test_compose_requires_a_secret_key_and_sets_the_data_roots():
    services = load_compose()["services"]
    for name in ("migrate", "web", "worker"):
        environment = services[name]["environment"]
        assert environment["SECRET_KEY"].startswith("${SECRET_KEY:?"), name
        assert environment["SHARDLINE_DATA_ROOTS"] == "${SHARDLINE_DATA_ROOTS:-/data}", name
        assert "${SHARDLINE_DATA_DIR:-./data}:/data:ro" in services[name]["volumes"], name


def test_compose_gives_every_long_running_service_a_health_check_and_a_restart_policy():
    services = load_compose()["services"]
    for name in ("postgres", "redis", "web", "worker"):
        assert services[name]["healthcheck"]["test"], name
        assert services[name]["restart"] == "unless-stopped", name
    assert services["migrate"]["restart"] == "no"
    assert services["worker"]["depends_on"]["migrate"]["condition"] == "service_completed_successfully"


def test_env_example_documents_the_security_and_data_settings():
    example = {
        line.split("=", 1)[0]
        for line in (ROOT / ".env.example").read_text().splitlines()
        if "=" in line and not line.startswith("#")
    }
    for name in (
        "SECRET_KEY",
        "ALLOWED_HOSTS",
        "SHARDLINE_HTTPS",
        "SHARDLINE_BEHIND_PROXY",
        "SHARDLINE_DATA_ROOTS",
        "SHARDLINE_LOGIN_MAX_FAILURES",
        "SHARDLINE_LOGIN_WINDOW_SECONDS",
    ):
        assert name in example, name


def test_compose_structure_holds_what_docker_compose_config_would_check():
    # `docker compose config` cannot run here: its checks on references, as data.
    compose = load_compose()
    services = compose["services"]
    declared = set(compose.get("volumes") or {})
    for name, service in services.items():
        assert "image" in service or "build" in service, name
        depends = service.get("depends_on", {})
        for other, condition in depends.items() if isinstance(depends, dict) else ((d, {}) for d in depends):
            assert other in services and other != name, f"{name} depends on unknown service {other}"
            assert condition.get("condition", "service_started") in (
                "service_started",
                "service_healthy",
                "service_completed_successfully",
            ), name
            if condition.get("condition") == "service_healthy":
                assert services[other].get("healthcheck", {}).get("test"), f"{name} waits on {other}'s health check"
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if not source.startswith(("$", ".", "/")):
                assert source in declared, f"{name} mounts undeclared volume {source}"
        if service.get("restart") != "no":
            assert service.get("healthcheck", {}).get("test"), f"{name} has no health check"


# Monitoring (docs/monitoring.md). Prometheus runs here in
# tests/test_every_compose_service_starts_with_its_own_command_and_environment.py
# and tests/server/test_prometheus_scrapes_and_every_dashboard_query_has_data.py;
# Grafana cannot (no Debian package, no Docker engine), so its provisioning
# and the dashboard are checked as data against what compose mounts.

GRAFANA_BUILTINS = {"__rate_interval", "__interval", "__range", "__range_s", "__interval_ms"}


def mounts(service: dict) -> dict[str, Path]:
    """Container path -> this checkout's path, for the service's bind mounts."""
    result = {}
    for volume in service.get("volumes", []):
        source, target = volume.split(":")[:2]
        if source.startswith("./"):
            result[target] = ROOT / source
    return result


def in_container(service: dict, path: str) -> Path:
    """The checkout's file that the service sees at ``path``."""
    for target, source in sorted(mounts(service).items(), key=lambda item: -len(item[0])):
        if path == target or path.startswith(target.rstrip("/") + "/"):
            return source / path[len(target) :].lstrip("/") if path != target else source
    raise AssertionError(f"nothing is mounted at {path}")


def test_monitoring_images_are_pinned_and_ports_are_safe():
    services = load_compose()["services"]
    for name, image in (("prometheus", "prom/prometheus:"), ("grafana", "grafana/grafana:")):
        assert services[name]["image"].startswith(image), name
        tag = services[name]["image"].split(":", 1)[1]
        assert tag[0] in "v0123456789" and tag != "latest", name
    # Prometheus has no login of its own: loopback only.
    assert all(port.startswith("127.0.0.1:") for port in services["prometheus"]["ports"])
    assert services["grafana"]["environment"]["GF_SECURITY_ADMIN_PASSWORD"].startswith("${GRAFANA_ADMIN_PASSWORD:?")


def test_prometheus_config_reaches_web_with_the_token_compose_gives_it():
    compose = load_compose()
    services = compose["services"]
    prometheus = services["prometheus"]
    flags = dict(word.split("=", 1) for word in prometheus["command"])
    config_path = in_container(prometheus, flags["--config.file"])
    config = yaml.safe_load(config_path.read_text())
    for rule_file in config["rule_files"]:
        assert (config_path.parent / rule_file).is_file(), rule_file
    (scrape,) = config["scrape_configs"]
    # The web service, on the port its container listens on.
    web_port = services["web"]["ports"][0].rsplit(":", 1)[1]
    assert scrape["static_configs"] == [{"targets": [f"web:{web_port}"]}]
    assert scrape["metrics_path"] == "/metrics"
    # The token file is the compose secret made from .env's SHARDLINE_METRICS_TOKEN, the web's own setting.
    (secret,) = prometheus["secrets"]
    assert scrape["authorization"]["credentials_file"] == f"/run/secrets/{secret}"
    assert compose["secrets"][secret] == {"environment": "SHARDLINE_METRICS_TOKEN"}
    assert services["web"]["env_file"] == ".env"
    assert "prometheusdata:/prometheus" in prometheus["volumes"] and flags["--storage.tsdb.path"] == "/prometheus"


def test_env_example_names_every_variable_a_secret_is_made_of():
    example = {
        line.split("=", 1)[0]
        for line in (ROOT / ".env.example").read_text().splitlines()
        if "=" in line and not line.startswith("#")
    }
    for name, secret in load_compose().get("secrets", {}).items():
        if "environment" in secret:
            # compose refuses to start when the variable is missing altogether.
            assert secret["environment"] in example, name


def test_grafana_provisioning_points_at_compose_prometheus_and_the_mounted_dashboard():
    services = load_compose()["services"]
    grafana = services["grafana"]
    provisioning = in_container(grafana, "/etc/grafana/provisioning")
    (datasource_file,) = (provisioning / "datasources").glob("*.yml")
    (datasource,) = yaml.safe_load(datasource_file.read_text())["datasources"]
    prometheus_port = services["prometheus"]["ports"][0].rsplit(":", 1)[1]
    assert datasource["type"] == "prometheus"
    assert datasource["url"] == f"http://prometheus:{prometheus_port}"
    assert datasource["isDefault"] is True  # the dashboard's DS_PROMETHEUS variable picks it
    (provider_file,) = (provisioning / "dashboards").glob("*.yml")
    (provider,) = yaml.safe_load(provider_file.read_text())["providers"]
    assert provider["type"] == "file"
    # The files Grafana finds in the provider's folder: those compose mounts there.
    folder = provider["options"]["path"].rstrip("/")
    files = [source for target, source in mounts(grafana).items() if target.rsplit("/", 1)[0] == folder]
    assert files == [ROOT / "deploy" / "grafana" / "shardline.json"], files
    home = grafana["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert in_container(grafana, home) == ROOT / "deploy" / "grafana" / "shardline.json"
    assert grafana["depends_on"]["prometheus"]["condition"] == "service_started"


def test_the_grafana_dashboard_is_well_formed():
    # No maintained package validates a dashboard against Grafana's schema
    # (grafana-foundation-sdk builds dashboards; its decoders check nothing):
    # what Grafana needs of each panel, checked here.
    dashboard = json.loads((ROOT / "deploy" / "grafana" / "shardline.json").read_text())
    assert dashboard["uid"] == "shardline" and dashboard["title"]
    assert dashboard["schemaVersion"] >= 39
    variables = {variable["name"]: variable for variable in dashboard["templating"]["list"]}
    assert variables["DS_PROMETHEUS"]["type"] == "datasource"
    assert variables["DS_PROMETHEUS"]["query"] == "prometheus"
    datasource = {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}
    for name, variable in variables.items():
        if variable["type"] == "query":
            assert variable["datasource"] == datasource, name
    ids, cells = set(), []
    for panel in dashboard["panels"]:
        assert panel["id"] not in ids, f"duplicate panel id {panel['id']}"
        ids.add(panel["id"])
        grid = panel["gridPos"]
        assert all(isinstance(grid[key], int) for key in ("h", "w", "x", "y")), panel["title"]
        assert grid["x"] + grid["w"] <= 24 and grid["w"] > 0 and grid["h"] > 0, panel["title"]
        cells += [
            (panel["title"], x, y)
            for x in range(grid["x"], grid["x"] + grid["w"])
            for y in range(grid["y"], grid["y"] + grid["h"])
        ]
        if panel["type"] == "row":
            continue
        assert panel["title"] and panel["description"], panel
        assert panel["datasource"] == datasource, panel["title"]
        assert panel["targets"], panel["title"]
        refs = [target["refId"] for target in panel["targets"]]
        assert len(refs) == len(set(refs)), panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == datasource, panel["title"]
            assert target["expr"].strip(), panel["title"]
            for used in re.findall(r"\$\{?(\w+)", target["expr"]):
                assert used in variables or used in GRAFANA_BUILTINS, f"{panel['title']}: unknown variable ${used}"
    taken = {}
    for title, x, y in cells:
        assert (x, y) not in taken, f"panels {taken[(x, y)]!r} and {title!r} overlap"
        taken[(x, y)] = title
