"""make docs fails on any warning: a link to a page or an anchor that does not exist fails the build.

The same command as the Makefile's (sphinx-build -E -W --keep-going -n), with
docs/conf.py, on a small site of its own: the pages link one another, then one
link breaks. And the real site builds with no warning at all.
"""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(180)


def sphinx_build(source: Path, out: Path) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "sphinx", "-E", "-W", "--keep-going", "-n", "-q", "-b", "html"]
    return subprocess.run(
        [*command, "-c", str(ROOT / "docs"), str(source), str(out)], capture_output=True, text=True, timeout=150
    )


def make_makefile_command() -> list[str]:
    makefile = (ROOT / "Makefile").read_text()
    recipe = makefile[makefile.index("\ndocs: venv\n") :].splitlines()[2].strip()
    return recipe.replace("$(BIN)/", "").split()


def site(tmp_path: Path, link: str) -> Path:
    source = tmp_path / "src"
    source.mkdir()
    (source / "index.md").write_text("# Home\n\n```{toctree}\nguide\n```\n\nSee [the guide](guide.md#a-section).\n")
    (source / "guide.md").write_text(f"# Guide\n\n## A section\n\nBack [home]({link}).\n")
    return source


def test_the_makefile_builds_the_docs_with_warnings_as_errors():
    command = make_makefile_command()
    assert command[:1] == ["sphinx-build"] and {"-W", "-n", "-E", "--keep-going"} <= set(command), command


def test_a_site_whose_links_resolve_builds(tmp_path):
    built = sphinx_build(site(tmp_path, "index.md"), tmp_path / "out")
    assert built.returncode == 0, built.stdout + built.stderr


@pytest.mark.parametrize("link", ["no-such-page.md", "index.md#no-such-heading", "#no-such-label"])
def test_a_broken_internal_link_fails_the_build(tmp_path, link):
    built = sphinx_build(site(tmp_path, link), tmp_path / "out")
    assert built.returncode != 0
    assert "guide.md:5" in built.stderr and "not found" in built.stderr, built.stderr


def test_the_docs_build_with_no_warning(tmp_path):
    built = sphinx_build(ROOT / "docs", tmp_path / "html")
    assert built.returncode == 0 and "WARNING" not in built.stderr, built.stderr
    api = (tmp_path / "html" / "api-reference.html").read_text()
    assert "/api/v1/jobs/{job_id}/leases/" in api and "TakeRequest" in api
    settings = (tmp_path / "html" / "settings.html").read_text()
    assert "SHARDLINE_URL" in settings and "DATABASE_URL" in settings
