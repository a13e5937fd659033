"""The server's own install (`pip install .[server,tables]`, what `make run` installs) needs no TensorFlow,
torch or test tool: every server module imports, and the server starts and answers, with them missing."""

import subprocess
import sys
import textwrap

from tests.support import ROOT, operator_env

HEAVY = ("tensorflow", "torch", "tf_keras", "tensorboard", "pytest", "playwright", "schemathesis", "hypothesis")

SCRIPT = textwrap.dedent(
    f"""
    import importlib, pkgutil, sys

    class Refuse:
        # Makes `import tensorflow` (and the rest) fail as if not installed.
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in {HEAVY!r}:
                raise ModuleNotFoundError(f"No module named {{name!r}}")
            return None

    sys.meta_path.insert(0, Refuse())
    import django
    django.setup()
    import dashboard, server
    for package in (server, dashboard):
        for module in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            importlib.import_module(module.name)
    from django.core.management import call_command
    call_command("check")
    from django.test import Client
    print(Client().get("/healthz").status_code)
    """
)


def test_every_server_module_imports_and_healthz_answers_without_them(test_database_url):
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        cwd=ROOT,
        env=operator_env(
            DATABASE_URL=test_database_url,
            DJANGO_SETTINGS_MODULE="server.settings",
            SECRET_KEY="test",
            ALLOWED_HOSTS="testserver",
        ),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "200"
