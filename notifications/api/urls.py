"""Routes of the webhooks API, included under ``api/webhooks/`` by deuz_project.urls."""

from django.urls import path

from notifications.api import views

urlpatterns = [
    path("", views.WebhookCollectionApi.as_view(), name="api-webhooks"),
    path("<str:id>/", views.WebhookDetailApi.as_view(), name="api-webhook-detail"),
    path("<str:id>/deliveries/", views.WebhookDeliveryListApi.as_view(), name="api-webhook-deliveries"),
]
