"""WebSocket routes served by Channels (deuz_project.asgi mounts them)."""

from django.urls import path

from approvals.consumers import LivePagesConsumer
from runs.consumers import RunStreamConsumer

websocket_urlpatterns = [
    path("ws/runs/<str:run_id>/", RunStreamConsumer.as_asgi()),
    path("ws/live/", LivePagesConsumer.as_asgi()),  # pages that update themselves (approvals.consumers)
]
