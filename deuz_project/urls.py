"""HTTP routes: admin, the site's sign-in and account pages, the REST API with its OpenAPI document and docs, the
health probe, Prometheus's metrics, the home page."""

from django.contrib import admin
from django.urls import include, path, re_path

from deuz_project import views
from deuz_project.middleware import API_NOT_FOUND
from observability.exposition import metrics
from runs.api.documents import ApiDocsView, ApiSchemaView
from runs.api.events import run_events
from runs.pages.chat import chat_example
from runs.pages.views import run_live

# Errors answer JSON under /api/ and plain pages elsewhere (deuz_project.views).
handler400 = "deuz_project.views.bad_request"
handler403 = "deuz_project.views.permission_denied"
handler404 = "deuz_project.views.page_not_found"
handler500 = "deuz_project.views.server_error"

urlpatterns = [
    path("", views.home, name="home"),
    path("healthz", views.healthz, name="healthz"),
    path("metrics", metrics, name="metrics"),
    path("admin/", admin.site.urls),
    # The site's own sign-in for every role (LOGIN_URL) under accounts/, a user's API tokens under account/tokens/.
    path("", include("accounts.pages.urls")),
    # The stream is an async view (daphne keeps it open), apart from the DRF API.
    path("api/runs/<str:run_id>/events/", run_events, name="run-events"),  # answers its own 405 (JSON)
    path("runs/<str:run_id>/live/", run_live, name="run-live"),
    path("runs/", include("runs.pages.urls")),
    path("chat/", include("runs.pages.chat_urls")),
    path("examples/ai-sdk-chat/", chat_example, name="chat-example"),  # the AI SDK's Chat in a page (README)
    path("console/", include("approvals.console.urls")),
    path("api/webhooks/", include("notifications.api.urls")),
    path("api/", include("runs.api.urls")),
    path("api/", include("accounts.api.urls")),
    path("api/schema/", ApiSchemaView.as_view(), name="schema"),
    path("api/docs/", ApiDocsView.as_view(url_name="schema"), name="swagger-ui"),
    # Last: any other /api/ path answers the JSON 404 even with DEBUG on, where Django would render its HTML debug
    # page instead of handler404. It matches with or without a trailing slash, so APPEND_SLASH never redirects under
    # /api/; an endpoint's path without its slash is served by deuz_project.middleware.ApiSlashOptionalMiddleware.
    re_path(r"^api/", views.api_not_found, name=API_NOT_FOUND),
]
