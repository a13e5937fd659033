"""The dashboard in a real headless Chromium (Debian's package), driven by Playwright.

Screenshots of every page land in test-artifacts/ (git-ignored).
"""

import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.support import ROOT, wait_until

CHROMIUM = "/usr/bin/chromium"
# Playwright's sync API keeps an event loop running in this thread; Django's
# guard would then refuse the test database's own set-up and tear-down calls.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
ARTIFACTS = ROOT / "test-artifacts"

# Outside CI a machine without the browser skips these tests, saying what to
# install; .ci/run sets SHARDLINE_REQUIRE_BROWSER=1, where a missing browser
# is a failure, so the dashboard is never left untested without notice.
MISSING = None
if not Path(CHROMIUM).exists():
    MISSING = f"browser tests need Debian's chromium at {CHROMIUM} (apt-get install chromium; .ci/run installs it)"
else:
    try:
        import playwright.sync_api as sync_api
    except ImportError:
        MISSING = "browser tests need the playwright package (make venv installs it)"
if MISSING:
    if os.environ.get("SHARDLINE_REQUIRE_BROWSER") == "1":
        raise RuntimeError(MISSING)
    pytest.skip(MISSING, allow_module_level=True)


@pytest.fixture(scope="module")
def accounts(django_db_setup, django_db_blocker):
    from server.services import accounts as service

    users = {}
    with django_db_blocker.unblock():
        for role in ("admin", "viewer"):
            user, _ = service.ensure_user(f"browser-{role}-{uuid.uuid4().hex[:6]}", role)
            user.set_password("correct horse battery")
            user.save()
            users[role] = user.get_username()
        from django.db import connections

        # This connection would otherwise outlive the test database's tear-down.
        connections.close_all()
    return users


@pytest.fixture(scope="module")
def chromium():
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"],
        )
        yield browser
        browser.close()


@pytest.fixture
def page_for(chromium, live_server_url, accounts):
    contexts = []

    def log_in(role):
        context = chromium.new_context(viewport={"width": 1280, "height": 900}, accept_downloads=True)
        contexts.append(context)
        page = context.new_page()
        page.goto(f"{live_server_url}/")
        assert "/accounts/login/" in page.url
        page.get_by_label("User name").fill(accounts[role])
        page.get_by_label("Password").fill("correct horse battery")
        page.get_by_role("button", name="Log in").click()
        page.wait_for_url(f"{live_server_url}/")
        return page

    yield log_in
    for context in contexts:
        context.close()


def shot(page, name):
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def start_sdk_worker(live_server_url, key, name, works, worker, cost):
    # Each item costs ``cost`` seconds of work: a fast and a slow worker, whose progress the page shows.
    code = (
        "import sys, time; from worker_sdk import WorkQueue\n"
        f"q = WorkQueue({works!r}, name={name!r}, worker={worker!r})\n"
        f"for item in q.items(): time.sleep({cost})\n"
    )
    env = {**os.environ, "SHARDLINE_URL": live_server_url, "SHARDLINE_TOKEN": key, "PYTHONPATH": str(ROOT)}
    env.pop("SHARDLINE_RUN", None)
    return subprocess.Popen([sys.executable, "-c", code], env=env, cwd=ROOT)


def done_count(page) -> int:
    text = page.locator(".progress-text").first.inner_text()
    return int(re.match(r"(\d+) / \d+ done", text).group(1))


def test_create_a_job_watch_it_progress_and_audit_it(page_for, live_server_url, live_keys):
    page = page_for("admin")
    shot(page, "01-jobs-list")
    page.get_by_role("link", name="New job").click()
    name = f"browser-{uuid.uuid4().hex[:6]}"
    works = [f"/data/part-{i:02d}.csv" for i in range(12)]
    page.get_by_label("Name").fill(name)
    page.get_by_label("Works").fill("\n".join(works))
    page.get_by_label("Lease timeout (s)").fill("30")
    shot(page, "02-create-form")
    page.get_by_role("button", name="Create job").click()
    page.wait_for_url(re.compile(r".*/jobs/\d+/$"))
    assert page.get_by_role("heading", name=re.compile(name)).is_visible()
    assert done_count(page) == 0
    shot(page, "03-job-page-new")

    fast = start_sdk_worker(live_server_url, live_keys["worker"], name, works, "fast-worker", 0.4)
    slow = start_sdk_worker(live_server_url, live_keys["worker"], name, works, "slow-worker", 1.5)
    try:
        # The page refreshes its live part by itself: no reload here.
        wait_until(lambda: done_count(page) >= 3, 30, 0.25, "the progress bar to move")
        assert "fast-worker" in page.locator("section", has=page.get_by_role("heading", name="Workers")).inner_text()
        shot(page, "04-job-page-progress")
        fast.wait(60)
        slow.wait(60)
    finally:
        for worker in (fast, slow):
            if worker.poll() is None:
                worker.kill()
    wait_until(lambda: done_count(page) == 12, 15, 0.25, "every item to show as done")
    shot(page, "05-job-page-done")

    # The timeline: a lane per worker, a bar per item read, each bar naming its item on hover.
    page.reload()
    timeline = page.locator("#timeline")
    lanes = timeline.locator("table.timeline tbody tr")
    assert sorted(lanes.locator("th").all_inner_texts()) == ["fast-worker", "slow-worker"]
    assert timeline.locator("svg.lane rect").count() == 12
    first_bar = timeline.locator("svg.lane a").first
    assert re.match(r"/data/part-\d\d\.csv · (fast|slow)-worker · ", first_bar.locator("title").text_content())
    timeline.scroll_into_view_if_needed()
    shot(page, "05b-timeline")
    first_bar.click()
    page.wait_for_url(re.compile(r".*/jobs/\d+/items/\d+/$"))
    assert page.get_by_role("heading", name="History").is_visible()
    assert "(current)" in page.locator("ol.history").inner_text()
    shot(page, "05c-item-history")
    page.go_back()

    page.get_by_role("link", name="Audit").click()
    page.get_by_label("Worker").fill("slow-worker")
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url(re.compile(r".*worker=slow-worker.*"))
    workers_shown = set(page.locator("table.audit tbody tr td:nth-child(6)").all_inner_texts())
    assert workers_shown == {"slow-worker"}
    shot(page, "06-audit-filtered")

    with page.expect_download() as download_info:
        page.get_by_role("link", name="Download CSV").click()
    content = Path(download_info.value.path()).read_text().splitlines()
    assert content[0].startswith("id,item,epoch")
    # The download is the selection on screen: the same items, in the same order.
    on_screen = [
        re.search(r"/items/(\d+)/", href).group(1)
        for href in page.locator("table.audit td.item a").evaluate_all("links => links.map(a => a.href)")
    ]
    assert on_screen and [line.split(",")[0] for line in content[1:]] == on_screen
    assert all(",slow-worker," in line for line in content[1:])


def test_a_viewer_sees_no_create_button(page_for):
    page = page_for("viewer")
    assert page.get_by_role("heading", name="Jobs").is_visible()
    assert page.get_by_role("link", name="New job").count() == 0
    shot(page, "07-viewer-jobs-list")


def test_every_page_fits_a_narrow_screen(page_for, chromium, live_server_url, live_api):
    """390 px (a phone): no page scrolls sideways; wide tables scroll inside their own box."""
    worker = live_api("worker")
    name = f"narrow-{uuid.uuid4().hex[:6]}.run-with-a-long-name-{uuid.uuid4().hex}"
    works = [
        f"/data/a-rather-long-directory-name/day=2026-11-23/part-{i:05d}-of-00012.snappy.parquet" for i in range(12)
    ]
    job = worker.post("/api/v1/jobs/", json={"name": name, "works": works}).json()
    taken = worker.post(
        f"/api/v1/jobs/{job['id']}/leases/", json={"worker": "host-with-a-long-name:12345:worker0", "count": 3}
    ).json()
    held = [{"id": lease["id"], "token": lease["token"]} for lease in taken["leases"][:2]]
    worker.post(
        f"/api/v1/jobs/{job['id']}/leases/", json={"worker": "host-with-a-long-name:12345:worker0", "complete": held}
    )
    item = taken["leases"][0]["id"]
    page = page_for("admin")
    page.set_viewport_size({"width": 390, "height": 844})
    pages = {
        "jobs-list": "/",
        "new-job": "/jobs/new/",
        "job": f"/jobs/{job['id']}/",
        "audit": f"/jobs/{job['id']}/audit/?state=pending",
        "audit-error": f"/jobs/{job['id']}/audit/?epoch=x",
        "item": f"/jobs/{job['id']}/items/{item}/",
    }
    for label, path in pages.items():
        page.goto(live_server_url + path)
        width = page.evaluate("document.documentElement.scrollWidth")
        shot(page, f"08-narrow-{label}")
        assert width <= 390, f"{path} is {width}px wide on a 390px screen"
    page.context.clear_cookies()
    page.goto(live_server_url + "/accounts/login/")
    shot(page, "08-narrow-login")
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
