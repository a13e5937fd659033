import re

import pytest

from tests.api.helpers import create_job, take

pytestmark = pytest.mark.django_db


@pytest.fixture
def busy_job(worker_client, job_name):
    job = create_job(
        worker_client, job_name, [f"/d/{i}" for i in range(8)], shuffle=False, num_epochs=2, max_attempts=2
    )
    for worker in ("fast-1", "fast-2", "slow"):
        leases = take(worker_client, job["id"], worker, 2)["leases"]
        take(
            worker_client,
            job["id"],
            worker,
            1,
            complete=[{"id": lease["id"], "token": lease["token"]} for lease in leases],
        )
    lease = take(worker_client, job["id"], "slow")["leases"][0]
    worker_client.post(
        f"/api/v1/leases/{lease['id']}/fail/",
        {"token": lease["token"], "error": "ValueError: bad row 17"},
        format="json",
    )
    return job


def test_the_job_page_shows_epochs_workers_failures_and_throughput(browser_for, busy_job):
    html = browser_for("viewer").get(f"/jobs/{busy_job['id']}/").content.decode()
    assert "epoch 0: 6 done" in html  # the stacked bar's label says it in words
    assert "fast-1" in html and "fast-2" in html and "slow" in html
    assert "ValueError: bad row 17" in html
    assert "Items per minute over the last 30 complete minutes" in html
    # Each complete minute has its value on hover; the y axis is labelled.
    assert len(re.findall(r"<title>\d\d:\d\d: \d+ items?/min</title>", html)) == 30
    assert 'class="tick y">0</text>' in html and 'class="unit">items/min</text>' in html
    # The timeline: a lane per worker, a bar per lease linking to its item; the slow worker holds one now.
    assert html.count('class="lane"') == 3 and "Held right now" in html
    assert re.search(r'<a href="/jobs/\d+/items/\d+/"><rect class="seg leased"', html)
    assert "6 / 16 done" in html


def test_the_live_fragment_is_the_page_body_without_the_layout(browser_for, busy_job):
    html = browser_for("viewer").get(f"/jobs/{busy_job['id']}/live/").content.decode()
    assert "Watermark per epoch" in html and "<html" not in html


def test_the_audit_filters_by_worker_state_and_epoch(browser_for, busy_job):
    viewer = browser_for("viewer")
    html = viewer.get(f"/jobs/{busy_job['id']}/audit/?worker=fast-1&state=done").content.decode()
    assert html.count("<td>fast-1</td>") == 2 and "<td>fast-2</td>" not in html
    assert "format=csv" in html and "worker=fast-1" in html
    assert "No items match." in viewer.get(f"/jobs/{busy_job['id']}/audit/?epoch=1&state=done").content.decode()
    # A worker prefix matches every worker whose name starts with it.
    html = viewer.get(f"/jobs/{busy_job['id']}/audit/?worker=fast-&state=done").content.decode()
    assert html.count("<td>fast-1</td>") == 2 and html.count("<td>fast-2</td>") == 2 and "<td>slow</td>" not in html


def test_a_bad_filter_is_an_error_shown_not_ignored(browser_for, busy_job):
    response = browser_for("viewer").get(f"/jobs/{busy_job['id']}/audit/?epoch=x&state=bogus&page=-3")
    html = response.content.decode()
    assert response.status_code == 400 and 'role="alert"' in html
    assert "Epoch “x”: Enter a whole number." in html
    assert "State “bogus”: Select a valid choice." in html and "Page “-3”" in html
    assert "Download CSV" not in html and 'class="audit"' not in html


def test_the_download_is_exactly_the_selection_on_screen(browser_for, busy_job):
    viewer = browser_for("viewer")
    # (query, rows on screen): the default view is what workers finished (6 done), newest first.
    for query, count in (("", 6), ("?state=pending", 7), ("?worker=fast-", 4), ("?epoch=0&state=failed", 0)):
        html = viewer.get(f"/jobs/{busy_job['id']}/audit/{query}").content.decode()
        on_screen = re.findall(r'<td class="item"><a href="/jobs/\d+/items/(\d+)/">', html)
        csv_url = re.search(r'<a class="button" href="([^"]+)" download>', html).group(1).replace("&amp;", "&")
        response = viewer.get(csv_url)
        lines = b"".join(response.streaming_content).decode().splitlines()[1:]
        assert len(on_screen) == count and [line.split(",")[0] for line in lines] == on_screen, (query, csv_url)


def test_the_csv_link_streams_the_same_selection_for_a_logged_in_user(browser_for, busy_job):
    viewer = browser_for("viewer")
    response = viewer.get(f"/api/v1/jobs/{busy_job['id']}/items/?format=csv&worker=fast-2&state=done")
    body = b"".join(response.streaming_content).decode().splitlines()
    assert response.status_code == 200 and len(body) == 3 and all(",fast-2," in line for line in body[1:])


def test_the_jobs_list_shows_progress_rate_and_workers(browser_for, busy_job):
    html = browser_for("viewer").get("/").content.decode()
    assert busy_job["name"] in html and "6 / 16 done" in html and "1 failed" not in html
    table = browser_for("viewer").get("/jobs/table/?state=running").content.decode()
    assert busy_job["name"] in table and "<html" not in table


def test_empty_states_say_so(browser_for):
    viewer = browser_for("viewer")
    assert "No jobs" in viewer.get("/?state=failed").content.decode()
