"""Every environment variable the server, the SDK or docker-compose reads is in README's Settings.

Found: the table left out the SDK's variables (SHARDLINE_URL, SHARDLINE_TOKEN,
SHARDLINE_RUN...) and docker-compose's SHARDLINE_CELERY_CONCURRENCY.
"""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# How the code reads a variable: the typed helpers of server/conf.py, os.environ, compose's ${...}.
READS = re.compile(
    r"""(?:env_\w+\(\s*|environ(?:\.get)?[\[(]\s*|getenv\(\s*)["'](SHARDLINE_[A-Z0-9_]+)["']|\$\{(SHARDLINE_[A-Z0-9_]+)"""
)


def read_variables() -> set[str]:
    found = set()
    sources = [*ROOT.glob("server/**/*.py"), *ROOT.glob("worker_sdk/**/*.py"), *ROOT.glob("dashboard/**/*.py")]
    for path in [*sources, ROOT / "docker-compose.yml"]:
        for match in READS.finditer(path.read_text()):
            found.add(match.group(1) or match.group(2))
    return found


def settings_section() -> str:
    readme = (ROOT / "README.md").read_text()
    return readme[readme.index("\n## Settings") : readme.index("\n## Serving")]


def test_every_variable_read_is_in_the_settings_section():
    variables = read_variables()
    assert {"SHARDLINE_URL", "SHARDLINE_TOKEN", "SHARDLINE_PORT", "SHARDLINE_CELERY_CONCURRENCY"} <= variables
    section = settings_section()
    missing = sorted(v for v in variables if f"`{v}`" not in section and f"`{v}_" not in section)
    assert not missing, f"read by the code but not in README's Settings: {missing}"
