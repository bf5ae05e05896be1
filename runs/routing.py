"""WebSocket routes served by Channels (deuz_project.asgi mounts them); an unknown path is closed with 4404."""

from django.urls import path, re_path

from approvals.consumers import LivePagesConsumer
from runs.api.sockets import NoRouteConsumer, RunStreamConsumer

websocket_urlpatterns = [
    path("ws/runs/<str:run_id>/", RunStreamConsumer.as_asgi()),
    path("ws/live/", LivePagesConsumer.as_asgi()),  # pages that update themselves (approvals.consumers)
    re_path(r"", NoRouteConsumer.as_asgi()),  # last: anything else, instead of the router's 500
]
