from django.urls import path

from . import lease_views, token_views, views

urlpatterns = [
    path("jobs/", views.JobListCreateView.as_view(), name="job-list"),
    path("jobs/<int:job_id>/", views.JobDetailView.as_view(), name="job-detail"),
    path("jobs/<int:job_id>/pause/", views.PauseJobView.as_view(), name="job-pause"),
    path("jobs/<int:job_id>/resume/", views.ResumeJobView.as_view(), name="job-resume"),
    path("jobs/<int:job_id>/cancel/", views.CancelJobView.as_view(), name="job-cancel"),
    path("jobs/<int:job_id>/retry-failed/", views.RetryFailedView.as_view(), name="job-retry-failed"),
    path("jobs/<int:job_id>/watermarks/", views.WatermarksView.as_view(), name="job-watermarks"),
    path("jobs/<int:job_id>/records/", views.RecordsView.as_view(), name="job-records"),
    path("jobs/<int:job_id>/leases/", lease_views.TakeView.as_view(), name="job-take"),
    path("jobs/<int:job_id>/leases/resume/", lease_views.ResumeLeasesView.as_view(), name="job-resume-leases"),
    path("jobs/<int:job_id>/items/", views.ItemsView.as_view(), name="job-items"),
    path("jobs/<int:job_id>/items/<int:item_id>/history/", views.ItemHistoryView.as_view(), name="item-history"),
    path("jobs/<int:job_id>/snapshots/", views.SnapshotCreateView.as_view(), name="job-snapshot"),
    path(
        "jobs/<int:job_id>/snapshots/<int:snapshot_id>/restore/",
        views.SnapshotRestoreView.as_view(),
        name="job-snapshot-restore",
    ),
    path("leases/extend/", lease_views.ExtendManyView.as_view(), name="lease-extend-many"),
    path("leases/complete/", lease_views.CompleteManyView.as_view(), name="lease-complete-many"),
    path("leases/<int:lease_id>/complete/", lease_views.CompleteView.as_view(), name="lease-complete"),
    path("leases/<int:lease_id>/fail/", lease_views.FailView.as_view(), name="lease-fail"),
    path("leases/<int:lease_id>/release/", lease_views.ReleaseView.as_view(), name="lease-release"),
    path("leases/<int:lease_id>/extend/", lease_views.ExtendView.as_view(), name="lease-extend"),
    path("leases/<int:lease_id>/split/", lease_views.SplitView.as_view(), name="lease-split"),
    path("workers/", views.WorkersView.as_view(), name="worker-list"),
    path("tokens/", token_views.TokenListCreateView.as_view(), name="token-list"),
    path("tokens/<int:token_id>/revoke/", token_views.TokenRevokeView.as_view(), name="token-revoke"),
]
