"""WebSocket routes served by Channels (deuz_project.asgi mounts them); an unknown path is closed with 4404."""

from channels.generic.websocket import AsyncWebsocketConsumer
from django.urls import path, re_path

from runs.api.pages_socket import LivePagesConsumer
from runs.api.stream_socket import RunStreamConsumer

NOT_FOUND = 4404


class NoRouteConsumer(AsyncWebsocketConsumer):
    """Every other WebSocket path: closed with 4404, where Channels' router would answer 500 with a traceback."""

    async def connect(self) -> None:
        await self.accept()
        await self.close(code=NOT_FOUND, reason="No such WebSocket route.")


websocket_urlpatterns = [
    path("ws/runs/<str:run_id>/", RunStreamConsumer.as_asgi()),
    path("ws/live/", LivePagesConsumer.as_asgi()),  # pages that update themselves (runs.api.pages_socket)
    re_path(r"", NoRouteConsumer.as_asgi()),  # last: anything else, instead of the router's 500
]
