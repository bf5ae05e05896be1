"""Routes of the run pages, mounted at /runs/ (the live transcript is routed in the project)."""

from django.urls import path

from runs.pages import views

urlpatterns = [
    path("", views.run_list_page, name="run-list"),
    path("<str:run_id>/", views.run_detail, name="run-detail"),
    path("<str:run_id>/cancel/", views.run_cancel_page, name="run-cancel"),
    path("<str:run_id>/checkpoints/<int:step_index>/fork/", views.run_fork_page, name="run-fork"),
    path("<str:run_id>/effects/<str:operation_id>/resolve/", views.effect_resolve_submit,
         name="run-effect-resolve"),
]
