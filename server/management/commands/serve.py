"""`make run`: migrate, make sure there is an admin and a sample job, serve.

Runs gunicorn with uvicorn workers (the web server of a deployment, not
runserver; docs/design.md, "Serving", says why ASGI) and stops it
cleanly on Ctrl-C or SIGTERM, then stops the embedded Postgres if this
command started it.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from server import embedded_pg
from server.conf import env_int, env_str
from server.services import jobs

SAMPLE_FILES = 12
SAMPLE_LINES = 500


def sample_folder():
    return embedded_pg.home() / "sample"


def _broker() -> str:
    url = settings.CELERY_BROKER_URL
    return "filesystem (no server needed)" if url == "filesystem://" else url.split("@")[-1]


def _check_port(host: str, port: int) -> None:
    """Refuses a port another program listens on, before anything starts or says it runs.

    gunicorn would log "Connection in use" five times and exit, after the
    banner said the server was running.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gunicorn binds
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise CommandError(
                f"cannot serve on {host}:{port}: {exc.strerror}. Another program listens there: stop it, or "
                f"choose another port, e.g. SHARDLINE_PORT={port + 1} make run"
            ) from None


class Command(BaseCommand):
    help = "Migrate, create an admin and a sample job if missing, and serve the web app until Ctrl-C."

    def add_arguments(self, parser):
        parser.add_argument("--host", default=env_str("SHARDLINE_HOST", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=settings.SHARDLINE_PORT)
        parser.add_argument("--workers", type=int, default=env_int("SHARDLINE_WEB_WORKERS", 3, minimum=1))
        parser.add_argument("--no-sample", action="store_true", help="do not create the sample job")

    def handle(self, host, port, workers, no_sample, **options):
        _check_port(host, port)
        call_command("migrate", interactive=False, verbosity=0)
        login = self._ensure_admin()
        sample = None if no_sample else self._ensure_sample_job()

        metrics_dir = embedded_pg.home() / "prometheus"
        shutil.rmtree(metrics_dir, ignore_errors=True)
        metrics_dir.mkdir(parents=True)
        env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir)}
        # Without roots the server reads no file (docs/tables.md, "What the server
        # reads"): let it slice the sample's folder, and say so.
        roots = list(settings.SHARDLINE_DATA_ROOTS)
        if not roots:
            roots = [str(sample_folder())]
            env["SHARDLINE_DATA_ROOTS"] = roots[0]

        # Ctrl-C is handled from here on: one arriving while the servers
        # start must stop them too, not leave them running without us.
        children: list[subprocess.Popen] = []
        self._stopping = False
        signal.signal(signal.SIGINT, lambda signum, frame: self._stop(children))
        signal.signal(signal.SIGTERM, lambda signum, frame: self._stop(children))
        children += [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "gunicorn",
                    "--config",
                    "python:server.gunicorn_conf",
                    # ASGI: waiting takes and heartbeats hold no thread (server/api/waits.py).
                    "server.asgi",
                    "--worker-class",
                    "uvicorn_worker.UvicornWorker",
                    "--bind",
                    f"{host}:{port}",
                    "--workers",
                    str(workers),
                    "--graceful-timeout",
                    "10",
                    "--log-level",
                    "warning",
                ],
                env=env,
            ),
            # Slices tables and large files (jobs with num_slices).
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "celery",
                    "-A",
                    "server",
                    "worker",
                    "--loglevel",
                    "warning",
                    "--concurrency",
                    "1",
                    "--hostname",
                    f"shardline@{host}",
                ],
                env=env,
            ),
        ]
        self._banner(host, port, login, sample, roots)
        self._wait(children)

    def _ensure_admin(self):
        User = get_user_model()
        if User.objects.filter(is_superuser=True).exists():
            return None
        username = env_str("SHARDLINE_ADMIN_USER", "admin")
        password = env_str("SHARDLINE_ADMIN_PASSWORD") or secrets.token_urlsafe(12)
        User.objects.create_superuser(username=username, email="", password=password)
        generated = not env_str("SHARDLINE_ADMIN_PASSWORD")
        return username, password if generated else None

    def _ensure_sample_job(self):
        folder = sample_folder()
        folder.mkdir(parents=True, exist_ok=True)
        paths = []
        for index in range(SAMPLE_FILES):
            path = folder / f"part-{index:03d}.csv"
            if not path.exists():
                path.write_text("".join(f"{index},{line},{(index * 7 + line) % 10}\n" for line in range(SAMPLE_LINES)))
            paths.append(str(path))
        spec = jobs.JobSpec(
            name="sample",
            works=paths,
            num_epochs=2,
            seed=2024,
            lease_timeout=float(settings.SHARDLINE_DEFAULT_LEASE_TIMEOUT),
            max_attempts=settings.SHARDLINE_DEFAULT_MAX_ATTEMPTS,
        )
        job, _created = jobs.create_or_attach(spec)
        return job

    def _banner(self, host, port, login, sample, roots):
        shown = "localhost" if host in ("127.0.0.1", "0.0.0.0") else host
        url = f"http://{shown}:{port}"
        lines = [
            "",
            f"Shardline is running at {url}",
            f"  API docs (Swagger UI): {url}/api/docs/",
            f"  Django admin:          {url}/admin/",
            f"  health / metrics:      {url}/healthz  {url}/metrics",
            f"  Celery worker:         broker {_broker()}",
            f"  database:              {'embedded Postgres in ' + str(embedded_pg.data_dir()) if settings.DATABASE_IS_EMBEDDED else 'DATABASE_URL'}",
            f"  data roots:            {', '.join(roots)} (SHARDLINE_DATA_ROOTS: what the server may read to slice)",
            f"  table connections:     {', '.join(sorted(settings.SHARDLINE_PG_CONNECTIONS)) or 'none'}"
            " (SHARDLINE_PG_CONNECTION_<NAME>)",
        ]
        if login:
            username, password = login
            if password:
                lines.append(f"  log in as {username!r} with password {password!r} (generated now, shown once)")
            else:
                lines.append(f"  log in as {username!r} with the password in SHARDLINE_ADMIN_PASSWORD")
        else:
            lines.append("  log in with the admin account created on the first run")
        if sample:
            lines.append(
                f"  sample job: {sample.name!r} (id {sample.id}), {sample.units_count} files x {sample.num_epochs} epochs"
            )
        lines += [
            "  API token for workers:  .venv/bin/python manage.py create_token trainer --role worker",
            "Press Ctrl-C to stop.",
            "",
        ]
        self.stdout.write("\n".join(lines))
        self.stdout.flush()

    def _stop(self, children):
        self._stopping = True
        for child in children:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)

    def _wait(self, children):
        failed = False
        try:
            if self._stopping:  # Ctrl-C came while they started
                self._stop(children)
            while any(child.poll() is None for child in children):
                try:
                    children[0].wait(timeout=1)
                except subprocess.TimeoutExpired:
                    pass
                if not self._stopping and any(child.poll() is not None for child in children):
                    self.stderr.write("a server process exited; stopping the others")
                    failed = True
                    self._stop(children)
            for child in children:
                try:
                    child.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    child.kill()
        finally:
            if settings.DATABASE_IS_EMBEDDED:
                self._stop_embedded_postgres()
            self.stdout.write("stopped")
        if failed:
            raise CommandError("a server process exited on its own (its log is above)")

    def _stop_embedded_postgres(self):
        # Whoever started it (this command, or an earlier `manage.py migrate`):
        # the server is stopped unless another process still uses it.
        from django.db import connections

        connections.close_all()
        # The web and Celery processes have exited; their server backends end a moment later.
        deadline = time.monotonic() + 5
        while (others := embedded_pg.other_clients()) and time.monotonic() < deadline:
            time.sleep(0.2)
        if others:
            self.stdout.write(
                f"left the embedded Postgres running: {others} other connection{'s' if others != 1 else ''} use it "
                f"(`manage.py embedded_pg stop` stops it)"
            )
        elif embedded_pg.stop():
            how = "started by this command" if embedded_pg.started_here else "started by an earlier command"
            self.stdout.write(f"stopped the embedded Postgres ({how})")
