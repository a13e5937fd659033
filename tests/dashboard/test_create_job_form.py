import pytest

from server.models import Job

pytestmark = pytest.mark.django_db


def test_a_valid_form_creates_the_job_and_shows_its_page(browser_for, job_name):
    worker = browser_for("worker")
    response = worker.post(
        "/jobs/new/",
        {
            "name": job_name,
            "works": "/data/a.csv\n\n  /data/b.csv \n",
            "num_epochs": 2,
            "shuffle": "on",
            "seed": 7,
            "max_attempts": 4,
        },
    )
    job = Job.objects.get(name=job_name)
    assert response.status_code == 302 and response["Location"] == f"/jobs/{job.id}/"
    assert (job.works_count, job.num_epochs, job.seed, job.max_attempts, job.shuffle) == (2, 2, 7, 4, True)
    page = worker.get(response["Location"]).content.decode()
    assert job_name in page and "Watermark per epoch" in page


def test_errors_are_shown_next_to_their_fields_and_the_input_is_kept(browser_for):
    worker = browser_for("worker")
    response = worker.post("/jobs/new/", {"name": "bad name!", "works": "/keep/me.csv", "num_epochs": 0})
    html = response.content.decode()
    assert response.status_code == 400
    assert 'id="id_name-error"' in html and 'id="id_num_epochs-error"' in html
    assert "/keep/me.csv" in html and 'value="bad name!"' in html
    assert Job.objects.count() == 0


def test_empty_works_are_refused(browser_for, job_name):
    response = browser_for("worker").post("/jobs/new/", {"name": job_name, "works": "\n  \n", "num_epochs": 1})
    assert response.status_code == 400 and 'id="id_works-error"' in response.content.decode()


def test_the_same_name_with_another_spec_is_an_error_on_the_name(browser_for, job_name):
    worker = browser_for("worker")
    worker.post("/jobs/new/", {"name": job_name, "works": "/a", "num_epochs": 1, "shuffle": "on"})
    response = worker.post("/jobs/new/", {"name": job_name, "works": "/b", "num_epochs": 1, "shuffle": "on"})
    assert response.status_code == 400
    assert "already exists with a different works" in response.content.decode()


def test_a_job_with_slices_shows_its_slicing_state(browser_for, job_name):
    worker = browser_for("worker")
    response = worker.post(
        "/jobs/new/", {"name": job_name, "works": "/data/big.csv", "num_epochs": 1, "num_slices": 10}, follow=True
    )
    assert "Slicing: 0 of 1 works inspected" in response.content.decode()
