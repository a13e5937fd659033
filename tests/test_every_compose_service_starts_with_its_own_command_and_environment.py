"""docker-compose.yml's app services start as deployed, without a Docker engine.

The image's filesystem is rebuilt in a temp folder from the Dockerfile (its
COPY, WORKDIR, ENV and RUN lines), each service then runs its own command (or
the image's CMD) with only the environment compose would give it: the image's
ENV, the env_file (.env.example, as an operator copies it), the service's
``environment`` interpolated the way compose does. Container paths are mapped
under the temp folder, the ``postgres`` and ``redis`` hosts to this suite's
servers (a fresh database), the published port to a free one. A folder or a
variable that one service lacks therefore fails here as it would in compose.

The docs' docker compose commands (docs/deploy.md, docs/monitoring.md: the
blocks marked ``run-by:`` this file) are run here too: ``docker compose exec
SERVICE ...`` in that service's environment, ``up`` checked against the
services and profiles this test starts.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
import yaml
from django.conf import settings

from tests.docs.blocks import blocks_run_by
from tests.support import database_url, running_database, wait_until

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent

pytestmark = pytest.mark.timeout(120)


def read_env_file(path: Path) -> dict[str, str]:
    values = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            values[key.strip()] = value.strip()
    return values


def interpolate(text: str, variables: dict[str, str]) -> str:
    """Compose's interpolation: $$, $VAR, ${VAR}, ${VAR:-default}, ${VAR-default}, ${VAR:?error}, ${VAR?error}."""

    def replace(match):
        if match.group(0) == "$$":
            return "$"
        name = match.group("braced") or match.group("bare")
        op, arg = match.group("op"), match.group("arg") or ""
        value = variables.get(name)
        if op in (":-", ":?") and value == "":
            value = None
        if value is not None:
            return value
        if op in (":?", "?"):
            raise AssertionError(f"compose refuses to start: {name} is required ({arg})")
        return arg if op in (":-", "-") else ""

    pattern = r"\$\$|\$\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:-|-|:\?|\?)(?P<arg>[^}]*))?\}|\$(?P<bare>[A-Za-z_][A-Za-z0-9_]*)"
    return re.sub(pattern, replace, text)


def dockerfile_instructions() -> list[tuple[str, str]]:
    text = (ROOT / "Dockerfile").read_text()
    lines, current = [], ""
    for raw in text.splitlines():
        if not current and (not raw.strip() or raw.lstrip().startswith("#")):
            continue
        if raw.rstrip().endswith("\\"):
            current += raw.rstrip()[:-1] + " "
            continue
        current += raw
        instruction, _, rest = current.strip().partition(" ")
        lines.append((instruction.upper(), rest.strip()))
        current = ""
    return lines


class Container:
    """A service's view of the image, mapped under one temp folder."""

    def __init__(self, root: Path, hosts: dict[str, str], ports: dict[str, str]):
        self.root = root
        self.hosts = hosts  # compose service name -> the URL that stands in for it here
        self.ports = ports  # container port -> free port here
        self.image_env: dict[str, str] = {}
        self.workdir = "/"
        self.cmd: list[str] | None = None

    def path(self, container_path: str) -> Path:
        return self.root / container_path.lstrip("/")

    def map_value(self, value: str) -> str:
        parts = []
        for part in value.split(","):
            if part.startswith("/"):
                part = str(self.path(part))
            else:
                url = urlsplit(part)
                if url.scheme and url.hostname in self.hosts:
                    part = self.hosts[url.hostname]
            parts.append(part)
        return ",".join(parts)

    def map_text(self, text: str) -> str:
        for inside, outside in self.ports.items():
            text = re.sub(rf":{inside}\b", f":{outside}", text)
        return text

    def env(self, extra: dict[str, str]) -> dict[str, str]:
        values = {**self.image_env, **extra}
        mapped = {key: self.map_value(value) for key, value in values.items()}
        # Only what a container has besides: a PATH to the image's Python and
        # the image's HOSTNAME; PYTHONPATH stands in for the installed package.
        mapped["PATH"] = f"{VENV_BIN}:/usr/local/bin:/usr/bin:/bin"
        mapped["PYTHONPATH"] = str(self.path(self.workdir))
        mapped["HOSTNAME"] = socket.gethostname()
        return mapped

    def build(self):
        ignored = [
            line.strip().split("/")[-1]
            for line in (ROOT / ".dockerignore").read_text().splitlines()
            if line.strip() and not line.startswith("#")
        ]
        for instruction, rest in dockerfile_instructions():
            if instruction in ("FROM", "EXPOSE", "USER"):
                continue
            if instruction == "WORKDIR":
                self.workdir = rest
                self.path(rest).mkdir(parents=True, exist_ok=True)
            elif instruction == "ENV":
                for pair in shlex.split(rest):
                    key, value = pair.split("=", 1)
                    self.image_env[key] = value
            elif instruction == "COPY":
                *sources, dest = shlex.split(rest)
                target = self.path(dest if dest.startswith("/") else f"{self.workdir}/{dest}")
                for source in sources:
                    origin = ROOT / source
                    if origin.is_dir():
                        shutil.copytree(origin, target, ignore=shutil.ignore_patterns(*ignored))
                    else:
                        target.mkdir(parents=True, exist_ok=True)
                        shutil.copy2(origin, target / origin.name)
            elif instruction == "RUN":
                for step in rest.split("&&"):
                    self.run_step(step.strip())
            elif instruction == "CMD":
                self.cmd = json.loads(rest)
            else:
                pytest.fail(f"this test does not know the Dockerfile instruction {instruction} {rest}")

    def run_step(self, step: str):
        words = shlex.split(step)
        assignments = {}
        while words and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[0]):
            key, value = words.pop(0).split("=", 1)
            assignments[key] = value
        program = words[0]
        if program == "pip":
            return  # this suite's virtualenv has the packages installed
        if program in ("useradd", "chown"):
            return  # one user here: whoever runs the tests owns the folders
        if program == "mkdir":
            for folder in (word for word in words[1:] if not word.startswith("-")):
                self.path(folder).mkdir(parents=True, exist_ok=True)
            return
        if program == "python":
            done = subprocess.run(
                words,
                cwd=self.path(self.workdir),
                env=self.env(assignments),
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert done.returncode == 0, f"Dockerfile step {step!r} failed:\n{done.stdout}\n{done.stderr}"
            return
        pytest.fail(f"this test does not know how to run the Dockerfile step {step!r}; teach it")


def free_port() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return str(sock.getsockname()[1])


@pytest.fixture
def fresh_database():
    # The suite's server: DATABASE_URL's, or the embedded Postgres.
    url = os.environ.get("DATABASE_URL") or database_url(running_database(settings.DATABASES["default"]))
    name = f"sl_compose_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    yield urlunsplit(urlsplit(url)._replace(path=f"/{name}"))
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def command_of(service: dict, container: Container, variables: dict[str, str]) -> list[str]:
    command = service.get("command")
    if command is None:
        assert container.cmd, "a service without a command needs the image's CMD"
        return [container.map_text(word) for word in container.cmd]
    if isinstance(command, str):
        command = shlex.split(interpolate(command, variables))
    else:
        command = [interpolate(word, variables) for word in command]
    return [container.map_text(word) for word in command]


def healthcheck_of(service: dict, container: Container, variables: dict[str, str]) -> list[str]:
    kind, *test = service["healthcheck"]["test"]
    test = [container.map_text(interpolate(word, variables)) for word in test]
    return ["sh", "-c", test[0]] if kind == "CMD-SHELL" else test


def stop(process: subprocess.Popen):
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def scrape_web_with_compose_prometheus(compose: dict, dotenv: dict[str, str], tmp_path: Path, web_port: str):
    """The prometheus service: Debian's binary for the image's, with the service's command, mounts and secret."""
    missing = [name for name in ("prometheus", "promtool") if shutil.which(name) is None]
    if missing:
        message = f"the prometheus service needs {' and '.join(missing)} (apt-get install prometheus)"
        if os.environ.get("SHARDLINE_REQUIRE_PROMETHEUS") == "1":
            pytest.fail(message)
        pytest.skip(f"{message}; migrate, web and worker passed")
    service = compose["services"]["prometheus"]
    root = tmp_path / "prometheus"
    port = free_port()

    def mapped(text: str) -> str:
        # The container's paths under root, the web service's address and the listen port as they are here.
        text = re.sub(r"(?<![\w/])(/etc/prometheus|/prometheus|/run/secrets)\b", lambda m: f"{root}{m.group(1)}", text)
        return text.replace("web:8000", f"127.0.0.1:{web_port}").replace("=:9090", f"=127.0.0.1:{port}")

    for volume in service["volumes"]:
        source, target = volume.split(":")[:2]
        inside = root / target.lstrip("/")
        if source.startswith("./"):
            shutil.copytree(ROOT / source, inside)  # a bind mount
        else:
            inside.mkdir(parents=True)  # a named volume, empty at first
    (root / "run" / "secrets").mkdir(parents=True)
    for secret in service["secrets"]:
        # compose writes the secret from the variable in .env (.env.example here).
        (root / "run" / "secrets" / secret).write_text(dotenv[compose["secrets"][secret]["environment"]])
    config = root / "etc" / "prometheus" / "prometheus.yml"
    config.write_text(mapped(config.read_text()))
    check = subprocess.run(["promtool", "check", "config", str(config)], capture_output=True, text=True, timeout=30)
    assert check.returncode == 0, check.stdout + check.stderr

    log = tmp_path / "prometheus.log"
    # The image's entrypoint is /bin/prometheus; its command is the service's.
    process = subprocess.Popen(
        ["prometheus", *(mapped(word) for word in service["command"])],
        cwd=root,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        health = [word.replace(":9090", f":{port}") for word in service["healthcheck"]["test"][1:]]
        began = time.monotonic()

        def healthy() -> bool:
            assert process.poll() is None, f"prometheus exited with {process.returncode}:\n{log.read_text()}"
            return subprocess.run(health, capture_output=True, timeout=10).returncode == 0

        wait_until(healthy, 30, 0.5, lambda: f"prometheus's health check:\n{log.read_text()}")
        # It scrapes web's /metrics with the token compose gives both (none in .env.example).
        query = urllib.parse.urlencode({"query": 'up{job="shardline"}'})

        def scraped() -> list:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/query?{query}", timeout=5) as answer:
                return json.load(answer)["data"]["result"]

        left = 30 - (time.monotonic() - began)
        result = wait_until(scraped, left, 0.5, lambda: f"prometheus's scrape of web:\n{log.read_text()}")
        assert result[0]["value"][1] == "1", f"the scrape of web failed: {result}\n{log.read_text()}"
    finally:
        stop(process)


def run_the_docs_compose_commands(compose: dict, container: Container, environment_of) -> None:
    """The operator's commands as the docs give them, against the services this test started."""
    blocks = blocks_run_by(__file__)
    assert {block.path for block in blocks} >= {"docs/deploy.md", "docs/monitoring.md"}
    profiles = {profile for service in compose["services"].values() for profile in service.get("profiles", [])}
    for block in blocks:
        for words in block.commands():
            where = f"{block.id}: {' '.join(words)}"
            if words == ["cp", ".env.example", ".env"]:
                continue  # what this test reads as the operator's .env
            assert words[:2] == ["docker", "compose"], f"{where}: this test runs docker compose commands only"
            rest = words[2:]
            while rest[:1] == ["--profile"]:
                assert rest[1] in profiles, f"{where}: no service has the profile {rest[1]}"
                rest = rest[2:]
            if rest[:2] == ["up", "-d"]:
                unknown = set(rest[2:]) - set(compose["services"])
                assert not unknown, f"{where}: no such services {unknown}"
                continue  # up is what this test does (grafana aside: it cannot run here)
            assert rest[:1] == ["exec"] and rest[1] in ("web", "worker"), f"{where}: teach this test to run it"
            done = subprocess.run(
                [container.map_text(word) for word in rest[2:]],
                cwd=container.path(container.workdir),
                env=environment_of(rest[1]),
                stdin=subprocess.DEVNULL,  # no terminal: createsuperuser says how to run it, and exits 0
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert done.returncode == 0, f"{where} failed:\n{done.stdout}{done.stderr}"


def test_migrate_web_and_worker_start_from_the_image_with_only_what_compose_gives_them(tmp_path, fresh_database):
    broker = os.environ.get("CELERY_BROKER_URL", "")
    if not broker.startswith("redis://"):
        # The compose stack's broker is Redis; the suite's default (the
        # filesystem broker of a machine with no servers) cannot stand in.
        # .ci/run always sets one.
        pytest.skip("set CELERY_BROKER_URL to a Redis server (redis://...) to run the compose services")
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    # The operator's .env: the example, as docs/deploy.md says to copy it.
    dotenv = read_env_file(ROOT / ".env.example")
    app = {name: service for name, service in services.items() if "build" in service}
    assert set(app) == {"migrate", "web", "worker"}
    # The others: postgres and redis stand for this suite's servers, prometheus
    # runs below from Debian's package, grafana cannot run here (no package, no
    # engine): tests/test_deployment_files.py checks its provisioning and dashboard.
    assert set(services) - set(app) == {"postgres", "redis", "prometheus", "grafana"}

    ports = {}
    for service in app.values():
        for mapping in service.get("ports", []):
            ports[interpolate(mapping, dotenv).rsplit(":", 1)[-1]] = free_port()
    container = Container(tmp_path / "image", {"postgres": fresh_database, "redis": broker}, ports)
    container.build()
    for service in app.values():
        for volume in service.get("volumes", []):
            container.path(interpolate(volume, dotenv).split(":")[1]).mkdir(parents=True, exist_ok=True)

    def environment_of(name: str) -> dict[str, str]:
        service = app[name]
        # The env_file first, then the service's environment over it, as compose does.
        env_file = dotenv if service.get("env_file") == ".env" else {}
        environment = {key: interpolate(str(value), dotenv) for key, value in service["environment"].items()}
        return container.env({**env_file, **environment})

    def start(name: str) -> tuple[subprocess.Popen, Path]:
        log = tmp_path / f"{name}.log"
        process = subprocess.Popen(
            command_of(app[name], container, dotenv),
            cwd=container.path(container.workdir),
            env=environment_of(name),
            stdout=log.open("w"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        return process, log

    # compose starts a service after the ones it depends on: migrate first.
    migrate, log = start("migrate")
    assert migrate.wait(60) == 0, log.read_text()

    running = {name: start(name) for name in ("web", "worker")}
    try:
        deadline = time.monotonic() + 60
        for name, (process, log) in running.items():
            checks = []

            def healthy() -> bool:
                assert process.poll() is None, f"{name} exited with {process.returncode}:\n{log.read_text()}"
                check = subprocess.run(
                    healthcheck_of(app[name], container, dotenv),
                    cwd=container.path(container.workdir),
                    env=environment_of(name),
                    capture_output=True,
                    text=True,
                    timeout=30,
                )
                checks.append(check)
                return check.returncode == 0

            def failed() -> str:
                return f"{name}'s health check:\n{checks[-1].stdout}{checks[-1].stderr}\n{log.read_text()}"

            wait_until(healthy, max(0.0, deadline - time.monotonic()), 1, failed)

        with urllib.request.urlopen(f"http://127.0.0.1:{ports['8000']}/healthz", timeout=5) as answer:
            assert answer.status == 200
        worker_log = running["worker"][1].read_text()
        assert " ready." in worker_log, worker_log
        for name, (_process, log) in running.items():
            text = log.read_text()
            assert "Traceback" not in text and "ERROR" not in text, f"{name}:\n{text}"
        metrics_dir = Path(environment_of("web")["PROMETHEUS_MULTIPROC_DIR"])
        assert any(metrics_dir.glob("*.db")), "the web workers write their metrics where /metrics reads them"
        run_the_docs_compose_commands(compose, container, environment_of)
        scrape_web_with_compose_prometheus(compose, dotenv, tmp_path, ports["8000"])
    finally:
        for process, _log in running.values():
            stop(process)
