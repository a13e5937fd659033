from django.urls import path
from django.views.generic import RedirectView

from . import views

app_name = "dashboard"

urlpatterns = [
    path("", views.jobs_list, name="jobs"),
    # The jobs list lives at /; /jobs/ is where people look for it.
    path("jobs/", RedirectView.as_view(pattern_name="dashboard:jobs"), name="jobs-redirect"),
    path("jobs/table/", views.jobs_table, name="jobs-table"),
    path("jobs/new/", views.job_create, name="job-create"),
    path("jobs/<int:job_id>/", views.job_detail, name="job"),
    path("jobs/<int:job_id>/works.json", views.job_works, name="job-works"),
    path("jobs/<int:job_id>/live/", views.job_live, name="job-live"),
    path("jobs/<int:job_id>/timeline/", views.job_timeline, name="job-timeline"),
    path("jobs/<int:job_id>/actions/<str:action>/", views.job_action, name="job-action"),
    path("jobs/<int:job_id>/snapshots/<int:snapshot_id>/restore/", views.snapshot_restore, name="snapshot-restore"),
    path("jobs/<int:job_id>/audit/", views.audit, name="audit"),
    path("jobs/<int:job_id>/items/<int:item_id>/", views.item_detail, name="item"),
]
