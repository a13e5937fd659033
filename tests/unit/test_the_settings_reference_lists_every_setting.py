"""The settings reference (docs/settings.md, generated) lists every environment variable the code reads.

Found: README's table left out the SDK's variables (SHARDLINE_URL,
SHARDLINE_TOKEN, SHARDLINE_RUN...) and docker-compose's
SHARDLINE_CELERY_CONCURRENCY. The reference is now made from the code that
reads each variable (docs/_ext/shardline_reference.py): these tests hold the
scan to the code and the descriptions (docs/settings.yaml) to the scan.
"""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docs" / "_ext"))

import shardline_reference as reference  # noqa: E402

# How the code reads a variable, found another way than the reference's scan (a
# regular expression over the text): the typed helpers of server/conf.py,
# os.environ, os.getenv, compose's ${...}.
READS = re.compile(
    r"""(?:env_\w+\(\s*|environ(?:\.get)?[\[(]\s*|getenv\(\s*)["']([A-Z][A-Z0-9_]+)["']|\$\{([A-Z][A-Z0-9_]+)"""
)
SDK = {
    "SHARDLINE_URL",
    "SHARDLINE_TOKEN",
    "SHARDLINE_RUN",
    "SHARDLINE_RETRY_SECONDS",
    "SHARDLINE_TASK",
    "SHARDLINE_WORKER",
    "SHARDLINE_RESTORE_GENERATION",
}


def read_variables() -> set[str]:
    found = set()
    for path in [*reference.python_sources(), ROOT / "docker-compose.yml"]:
        for match in READS.finditer(path.read_text()):
            found.add(match.group(1) or match.group(2))
    return found


def test_the_scan_finds_every_variable_the_code_reads():
    scanned = set(reference.scan())
    assert read_variables() <= scanned, read_variables() - scanned
    assert SDK | {"SHARDLINE_PORT", "SHARDLINE_CELERY_CONCURRENCY", "DATABASE_URL", "SECRET_KEY"} <= scanned


def test_every_variable_read_is_described_once_and_true_to_the_code():
    assert reference.settings_problems() == []


def test_the_reference_lists_every_setting_the_sdk_and_the_server_included():
    page = reference.settings_markdown()
    ignored = set(reference.descriptions()["not_settings"])
    missing = sorted(name for name in set(reference.scan()) - ignored if f"| `{name}` |" not in page)
    assert not missing, f"read by the code but not in the settings reference: {missing}"
    sdk = page[page.index("## SDK") : page.index("## The `shardline` command")]
    assert all(f"| `{name}` |" in sdk for name in SDK), sdk
    assert "| `SHARDLINE_PG_CONNECTION_<NAME>` |" in sdk
    # Defaults come from the code: each component's own.
    assert "| `SHARDLINE_RETRY_SECONDS` | `120` |" in sdk
    assert "| `SHARDLINE_RETRY_SECONDS` | `30` |" in page[page.index("## The `shardline` command") :]
    assert "| `SHARDLINE_MAX_BODY_BYTES` | `268435456` |" in page


def test_a_variable_read_but_not_described_is_a_problem(tmp_path, monkeypatch):
    module = tmp_path / "new_setting.py"
    module.write_text('from .conf import env_int\n\nNEW = env_int("SHARDLINE_NOBODY_DESCRIBED", 7)\n')
    sources = reference.python_sources()
    monkeypatch.setattr(reference, "python_sources", lambda: [*sources, module])
    problems = reference.settings_problems()
    assert f"SHARDLINE_NOBODY_DESCRIBED is read ({module}:3) but not described in docs/settings.yaml" in problems


def test_a_default_stated_twice_is_a_problem(monkeypatch):
    described = reference.descriptions()
    described["settings"]["SHARDLINE_MAX_TAKE"]["default"] = "500"
    monkeypatch.setattr(reference, "descriptions", lambda: described)
    assert any("SHARDLINE_MAX_TAKE: the server code's default is '1000'" in p for p in reference.settings_problems())
