"""WebSocket routes served by Channels (deuz_project.asgi mounts them)."""

websocket_urlpatterns: list = []
