from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from dashboard.login import ThrottledLoginView

from . import views

urlpatterns = [
    path("api/v1/", include("server.api.urls")),
    path("api/schema/", SpectacularAPIView.as_view(permission_classes=[]), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema", permission_classes=[]), name="swagger-ui"),
    path("healthz", views.healthz, name="healthz"),
    # Browsers ask for /favicon.ico whatever the page links.
    path("favicon.ico", RedirectView.as_view(url="/static/dashboard/favicon.svg"), name="favicon"),
    path("metrics", views.prometheus, name="metrics"),
    # The admin signs in through the same throttled login page.
    path("admin/login/", RedirectView.as_view(url="/accounts/login/", query_string=True)),
    path("admin/", admin.site.urls),
    path("accounts/login/", ThrottledLoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("", include("dashboard.urls")),
]

# JSON, not Django's HTML pages, for URLs under /api/ that no view matches.
handler404 = views.not_found
handler500 = views.server_error


def warm() -> None:
    """Builds the URL resolver's tables now, in each web process as it starts, not at its first request.

    The first request a process served waited about 300 ms for them, and a
    training loop met that wait whenever its SDK opened a connection to a
    process that had served nothing yet (bench/RESULTS.md, "A web process's
    first request"). The server's entry points call this once Django is set up.
    """
    from django.urls import get_resolver, reverse

    get_resolver().resolve("/api/v1/jobs/1/leases/")
    reverse("job-take", args=[1])
