"""Routes of the reviewers' console, mounted at /console/."""

from django.urls import path

from approvals.console import views

app_name = "console"

urlpatterns = [
    path("", views.approval_queue, name="queue"),
    path("<str:run_id>/<str:approval_id>/", views.approval_detail, name="detail"),
]
