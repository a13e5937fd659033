"""schemathesis against /api/schema/: every operation, with a valid admin token and with an invalid one.

Proves: no generated request (schema examples, boundary/coverage cases and
random fuzzing, valid and invalid inputs) gets a 5xx from the live server.
The number of cases run is printed (-s) and must be substantial.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import requests


def run_schemathesis(url: str, token: str, folder: Path, max_examples: int) -> tuple[subprocess.CompletedProcess, int]:
    # The schema is public; fetched without the token (an invalid token is a 401 everywhere, the schema included).
    schema = folder / "schema.yaml"
    schema.write_bytes(requests.get(f"{url}/api/schema/", timeout=30).content)
    report = folder / "events.ndjson"
    command = [
        str(Path(sys.executable).with_name("schemathesis")),
        "run",
        str(schema),
        "--url",
        url,
        "--header",
        f"Authorization: Token {token}",
        "--checks",
        "not_a_server_error",
        "--phases",
        "examples,coverage,fuzzing",
        "--max-examples",
        str(max_examples),
        "--seed",
        "9",
        "--workers",
        "1",  # hypothesis' lambda reprs are not thread-safe on Python 3.11 (AST recursion errors)
        "--request-timeout",
        "20",
        "--generation-database",
        "none",
        "--suppress-health-check",
        "all",
        "--no-shrink",
        "--no-color",
        "--report",
        "ndjson",
        "--report-ndjson-path",
        str(report),
    ]
    # Run in the test's folder: schemathesis keeps state in .schemathesis/ of its working directory.
    result = subprocess.run(command, cwd=folder, capture_output=True, text=True, timeout=120)
    cases = 0
    for line in report.read_text().splitlines():
        event = json.loads(line)
        scenario = event.get("ScenarioFinished")
        if scenario:
            cases += len((scenario.get("recorder") or {}).get("cases") or {})
    return result, cases


# (token, max examples per operation): with an invalid token every answer is a 401, so fewer suffice.
TOKENS = {"valid": ("admin", 15), "invalid": (None, 5)}


@pytest.mark.parametrize("token_kind", sorted(TOKENS))
def test_fuzzing_every_endpoint_finds_no_server_error(live_server_url, live_keys, tmp_path, token_kind):
    role, max_examples = TOKENS[token_kind]
    token = live_keys[role] if role else "shl_not-a-real-token"
    result, cases = run_schemathesis(live_server_url, token, tmp_path, max_examples)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    print(f"\nschemathesis ({token_kind} token): {cases} cases, 0 server errors")
    assert cases >= 50
