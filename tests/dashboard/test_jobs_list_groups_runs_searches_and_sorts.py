import re

import pytest

from tests.api.helpers import create_job, take

pytestmark = pytest.mark.django_db


def names_in(html: str) -> list[str]:
    return re.findall(r'<a href="/jobs/(\d+)/">', html)


def test_runs_of_one_queue_are_grouped_and_search_finds_them(browser_for, worker_client, job_name):
    runs = [create_job(worker_client, job_name, ["/a"], run=f"run{i}") for i in range(3)]
    assert [(job["name"], job["queue"], job["run"]) for job in runs] == [
        (f"{job_name}.run{i}", job_name, f"run{i}") for i in range(3)
    ]
    other = create_job(worker_client, f"other-{job_name}", ["/a"])
    viewer = browser_for("viewer")
    html = viewer.get(f"/?q={job_name}").content.decode()
    assert f'{job_name} <span class="sub">3 runs on this page</span>' in html
    assert all(f">run run{i}</a>" in html for i in range(3))
    assert sorted(names_in(html)) == sorted(str(job["id"]) for job in [*runs, other])
    assert names_in(viewer.get(f"/?q=other-{job_name}").content.decode()) == [str(other["id"])]
    assert f"matching “nothing-{job_name}”" in viewer.get(f"/?q=nothing-{job_name}").content.decode()


def test_columns_sort_and_elapsed_is_shown(browser_for, worker_client, job_name):
    jobs = [create_job(worker_client, f"{job_name}-{letter}", ["/a", "/b"]) for letter in "bca"]
    take(worker_client, jobs[0]["id"])  # running: it has an elapsed time
    viewer = browser_for("viewer")
    ids = {job["name"][-1]: str(job["id"]) for job in jobs}
    by_name = names_in(viewer.get(f"/?q={job_name}&sort=name").content.decode())
    assert by_name == [ids["a"], ids["b"], ids["c"]]
    assert names_in(viewer.get(f"/?q={job_name}&sort=-name").content.decode()) == [ids["c"], ids["b"], ids["a"]]
    by_elapsed = viewer.get(f"/?q={job_name}&sort=-elapsed").content.decode()
    assert names_in(by_elapsed)[0] == ids["b"]
    assert re.search(r'<td class="num">\d+s</td>', by_elapsed)
    # The header links keep the search and toggle the order.
    assert f'href="?q={job_name}&amp;sort=-name">Job ▲' in viewer.get(f"/?q={job_name}&sort=name").content.decode()


def test_a_bad_sort_or_state_is_an_error_shown(browser_for):
    response = browser_for("viewer").get("/?sort=price&state=sleeping")
    html = response.content.decode()
    assert (
        response.status_code == 400 and 'role="alert"' in html and "Sort “price”" in html and "State “sleeping”" in html
    )


def test_a_new_job_page_says_how_to_connect(browser_for, worker_client, job_name):
    job = create_job(worker_client, job_name, ["/data/a.csv", "/data/b.csv"], shuffle=False, seed=7, num_epochs=2)
    html = browser_for("viewer").get(f"/jobs/{job['id']}/").content.decode()
    assert "Connect a training script" in html and "export SHARDLINE_URL=http://testserver" in html
    assert (
        "work_queue = WorkQueue(\n    [&#x27;/data/a.csv&#x27;, &#x27;/data/b.csv&#x27;],\n    num_epochs=2,\n"
        f"    shuffle=False,\n    seed=7,\n    name=&#x27;{job_name}&#x27;,\n)"
    ) in html


@pytest.mark.django_db(transaction=True)  # each statement its own now(): the story has an order
def test_an_item_page_tells_its_story(browser_for, worker_client, job_name):
    job = create_job(worker_client, job_name, ["/a"], max_attempts=3)
    lease = take(worker_client, job["id"], "w1")["leases"][0]
    worker_client.post(
        f"/api/v1/leases/{lease['id']}/fail/", {"token": lease["token"], "error": "OSError: disk"}, format="json"
    )
    again = take(worker_client, job["id"], "w2")["leases"][0]
    take(worker_client, job["id"], "w2", complete=[{"id": again["id"], "token": again["token"], "records": 4}])
    viewer = browser_for("viewer")
    html = viewer.get(f"/jobs/{job['id']}/items/{lease['id']}/").content.decode()
    assert "<code>/a</code>" in html and "2 of 3" in html and "4 records" in html
    assert html.index(">retried</span>") < html.index(">completed</span>") and "OSError: disk" in html
    # The failures on the job page link to the item.
    assert f'href="/jobs/{job["id"]}/items/{lease["id"]}/">/a</a>' in viewer.get(f"/jobs/{job['id']}/").content.decode()
    assert viewer.get(f"/jobs/{job['id']}/items/987654321/").status_code == 404


def test_a_dotted_name_without_a_run_is_a_queue_of_its_own(browser_for, worker_client, job_name):
    # The run is a field the caller sends, never read back from the name.
    job = create_job(worker_client, f"{job_name}.v2", ["/a"])
    assert (job["queue"], job["run"]) == (f"{job_name}.v2", "")
    html = browser_for("viewer").get(f"/?q={job_name}").content.decode()
    assert "runs on this page" not in html and ">run v2</a>" not in html
    assert names_in(html) == [str(job["id"])]
