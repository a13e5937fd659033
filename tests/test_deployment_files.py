"""docker-compose.yml cannot be run here (no Docker engine); it is checked as data."""

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
