"""schemathesis against /api/schema/ on the real server (gunicorn + uvicorn): every check, an admin and a worker token.

Every check schemathesis has (no server error, status codes, content types,
response headers and schemas, positive data accepted, negative data
rejected, missing headers, unsupported methods, ignored auth, the stateful
checks) over examples, coverage cases, random fuzzing and stateful
sequences, with a fixed seed and a budget that fits CI. Then with a token
that is not one: every answer a 401 (no server error, documented). The number
of cases run is printed (-s) and must be substantial.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import requests

PHASES = "examples,coverage,fuzzing,stateful"


def run_schemathesis(url: str, token: str, folder: Path, max_examples: int, checks: str, seconds: int):
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
        checks,
        "--phases",
        PHASES,
        "--max-examples",
        str(max_examples),
        "--max-time",
        str(seconds),
        "--seed",
        "9",
        "--workers",
        "1",  # hypothesis' lambda reprs are not thread-safe on Python 3.11 (AST recursion errors)
        "--request-timeout",
        "40",
        # A take may wait up to 30 s for work (its documented long poll): not a slow answer.
        "--max-response-time",
        "35",
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
    result = subprocess.run(command, cwd=folder, capture_output=True, text=True, timeout=seconds + 60)
    (folder / "schemathesis.txt").write_text(result.stdout)  # the whole report, beside the events
    cases = 0
    for line in report.read_text().splitlines():
        event = json.loads(line)
        scenario = event.get("ScenarioFinished")
        if scenario:
            cases += len((scenario.get("recorder") or {}).get("cases") or {})
    return result, cases


# role: (max examples per operation, seconds, checks). A token that is not one is answered 401 everywhere:
# the data checks do not apply to it (its requests are refused before their data is read).
TOKENS = {
    "admin": (12, 28, "all"),
    "worker": (12, 28, "all"),
    "invalid": (4, 8, "not_a_server_error,status_code_conformance,content_type_conformance"),
}


@pytest.mark.parametrize("role", sorted(TOKENS))
def test_schemathesis_finds_no_fault(live_server_url, live_keys, tmp_path, role):
    max_examples, seconds, checks = TOKENS[role]
    token = live_keys.get(role, "shl_not-a-real-token")
    result, cases = run_schemathesis(live_server_url, token, tmp_path, max_examples, checks, seconds)
    assert result.returncode == 0, result.stdout[-12000:] + result.stderr[-2000:]
    print(f"\nschemathesis ({role} token, checks {checks}): {cases} cases, no fault")
    assert cases >= 50
