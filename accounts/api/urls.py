"""Routes of the tokens API, included under ``api/`` by deuz_project.urls."""

from django.urls import path

from accounts.api import views

urlpatterns = [
    path("tokens/", views.TokenCollectionApi.as_view(), name="api-tokens"),
    path("tokens/<str:id>/", views.TokenDetailApi.as_view(), name="api-token-detail"),
]
