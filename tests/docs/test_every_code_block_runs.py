"""Every command and script in README.md and docs/ runs as written, against a real server.

Each page's blocks run in the page's order, each as a newcomer would after
``make run``, from the repository root: the sample files of ``make run`` in
``.shardline/sample/``, ``.venv``, ``examples/`` and ``manage.py`` there, the
server at ``http://localhost:8000`` (the suite's server stands in for it: the
address is the one word replaced), ``manage.py`` on the suite's database.
Shell blocks leave their variables to the blocks after them, as one terminal
would; every page starts with ``SHARDLINE_URL`` and ``SHARDLINE_TOKEN``
exported, as the pages say. How each fence says it is treated:
tests/docs/blocks.py.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from .blocks import COMMANDS, DATA, FLAGS, ROOT, SCRIPTS, Block, all_blocks, pages

VENV = Path(sys.prefix)
SERVER = "http://localhost:8000"
# Programs a block may need that the suite installs only under .ci/run: missing, the block is skipped, unless CI
# requires them (then missing fails).
OPTIONAL = {"promtool": "SHARDLINE_REQUIRE_PROMETHEUS"}
# What the sandbox has of the repository (a checkout, after make run).
LINKED = ["examples", "manage.py", "deploy", ".env.example", "docker-compose.yml"]
SAMPLE_FILES, SAMPLE_LINES = 12, 500  # server/management/commands/serve.py writes these


def runnable() -> list[Block]:
    return [block for block in all_blocks() if block.runs]


def marks_of(block: Block) -> list:
    marks = [pytest.mark.timeout(420)]
    if "tensorflow" in block.text:
        marks.append(pytest.mark.tf)
    return marks


class Page:
    """One page's blocks, run in order in one sandbox, as one reader would in one terminal."""

    def __init__(self, path: str, sandbox: Path, env: dict[str, str]):
        self.path = path
        self.sandbox = sandbox
        self.env = env
        self.blocks = [block for block in all_blocks() if block.path == path]
        self.done: dict[int, str | None] = {}  # block line -> None (passed) or why it failed

    def run_through(self, target: Block) -> str | None:
        for block in self.blocks:
            if block.line not in self.done:
                self.done[block.line] = self.run(block)
            if block.line == target.line:
                return self.done[block.line]
        raise AssertionError(f"{target.id} is not a block of {self.path}")

    def run(self, block: Block) -> str | None:
        how = block.how
        if how == "data":
            return None
        if how == "run-by":
            return check_run_by(block)
        if how == "fragment":
            return check_fragment(block)
        if how == "dry-run":
            return dry_run(block)
        text = block.text.replace(SERVER, self.env["SHARDLINE_URL"])
        if block.language in SCRIPTS:
            script = self.sandbox.parent / f"block-{block.line}.py"
            script.write_text(text)
            return self.execute(block, [sys.executable, str(script)])
        for words in block.commands():
            program = next((word for word in words if "=" not in word), "")
            if program in OPTIONAL and shutil.which(program, path=self.env["PATH"]) is None:
                if os.environ.get(OPTIONAL[program]) == "1":
                    return f"{program} is not installed, and {OPTIONAL[program]}=1 requires it"
                return f"skip: {program} is not installed"
        saved = self.sandbox.parent / f"env-{block.line}"
        script = f'set -a\nset -eo pipefail\n{text}\nenv -0 > "{saved}"\n'
        failed = self.execute(block, ["bash", "-c", script])
        if failed is None:
            pairs = (item.split("=", 1) for item in saved.read_text().split("\0") if "=" in item)
            self.env = {key: value for key, value in pairs if key not in ("PWD", "OLDPWD", "SHLVL", "_")}
        return failed

    def execute(self, block: Block, args: list[str]) -> str | None:
        process = subprocess.Popen(
            args,
            cwd=self.sandbox,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        try:
            output, _ = process.communicate(timeout=360)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            output, _ = process.communicate()
            return f"{block.id} did not end in 360 s:\n{output[-4000:]}"
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
        if process.returncode != 0:
            return f"{block.id} exited with {process.returncode}:\n{block.text}\n--- output ---\n{output[-6000:]}"
        return None


def check_fragment(block: Block) -> str | None:
    if block.language in SCRIPTS:
        try:
            compile(block.text, block.id, "exec")
        except SyntaxError as error:
            return f"{block.id} is not valid Python: {error}"
        return None
    done = subprocess.run(["bash", "-n"], input=block.text, capture_output=True, text=True)
    return None if done.returncode == 0 else f"{block.id} is not valid shell: {done.stderr}"


def check_run_by(block: Block) -> str | None:
    test = ROOT / block.run_by
    if not test.is_file():
        return f"{block.id} says it is run by {block.run_by}, which does not exist"
    if "blocks_run_by(" not in test.read_text():
        return f"{block.id} says it is run by {block.run_by}, which never reads the docs' blocks (blocks_run_by)"
    return None


def dry_run(block: Block) -> str | None:
    """make -n for make, --collect-only for pytest: what each line would run exists, nothing runs."""
    for words in block.commands():
        program = Path(words[0]).name
        if program == "make":
            args = ["make", "-n", *words[1:]]
        elif program == "pytest" or words[1:3] == ["-m", "pytest"]:
            tests = [word for word in words if word.startswith("tests/")]
            args = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *tests]
        else:
            return f"{block.id}: a dry-run block holds make and pytest lines only, not {' '.join(words)!r}"
        done = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            return f"{block.id}: {' '.join(args)} failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
    return None


@pytest.fixture(scope="session")
def newcomer(tmp_path_factory, live_server_url, live_keys, test_database_url, celery_worker):
    """A function making a page's sandbox and environment: the repository after make run, the suite's server."""

    def make(path: str) -> Page:
        home = tmp_path_factory.mktemp(Path(path).stem)
        sandbox = home / "repo"
        sample = sandbox / ".shardline" / "sample"
        sample.mkdir(parents=True)
        for index in range(SAMPLE_FILES):
            lines = (f"{index},{line},{(index * 7 + line) % 10}\n" for line in range(SAMPLE_LINES))
            (sample / f"part-{index:03d}.csv").write_text("".join(lines))
        (sandbox / ".venv").symlink_to(VENV)
        for name in LINKED:
            (sandbox / name).symlink_to(ROOT / name)
        own = ("SHARDLINE_URL", "SHARDLINE_TOKEN", "SHARDLINE_RUN", "SHARDLINE_WORKER", "SHARDLINE_TASK")
        env = {
            key: value
            for key, value in os.environ.items()
            if key not in own
            and key not in ("SHARDLINE_RESTORE_GENERATION", "SHARDLINE_CONFIG", "DJANGO_SETTINGS_MODULE")
            and not key.startswith(("SHARDLINE_PG_CONNECTION_", "PYTEST_"))
        }
        env.update(
            PATH=f"{VENV / 'bin'}:{os.environ['PATH']}",
            PYTHONPATH=str(ROOT),
            DATABASE_URL=test_database_url,
            XDG_CONFIG_HOME=str(home / "config"),
            TF_CPP_MIN_LOG_LEVEL="2",
            SHARDLINE_URL=live_server_url,
            SHARDLINE_TOKEN=live_keys["worker"],
        )
        return Page(path, sandbox, env)

    made: dict[str, Page] = {}
    return lambda path: made.setdefault(path, make(path))


def test_every_block_says_what_it_is():
    blocks = all_blocks()
    assert {block.path for block in blocks} >= {"README.md", "docs/training.md", "docs/cli.md", "docs/api.md"}
    unknown = [
        f"{block.id}: ```{block.language} {' '.join(block.flags)}"
        for block in blocks
        if block.language not in COMMANDS | SCRIPTS | DATA
        or any(flag not in FLAGS and not flag.startswith("run-by:") for flag in block.flags)
    ]
    assert not unknown, "name each block's language and how it runs (tests/docs/blocks.py):\n" + "\n".join(unknown)
    code = [block for block in blocks if block.runs]
    fragments = [block.id for block in code if block.how == "fragment"]
    ran = [block.id for block in code if block.how in ("run", "run-by")]
    # A fragment is the exception: most commands and scripts run as written.
    assert len(fragments) * 4 <= len(code), f"{len(fragments)} fragments of {len(code)} blocks: {fragments}"
    assert len(ran) * 2 > len(code), ran
    assert all(path.exists() for path in pages())


@pytest.mark.parametrize("block", [pytest.param(b, id=b.id, marks=marks_of(b)) for b in runnable()])
def test_the_block_runs(block, newcomer):
    failed = newcomer(block.path).run_through(block)
    if failed and failed.startswith("skip: "):
        pytest.skip(failed.removeprefix("skip: "))
    assert failed is None, failed
