"""ASGI entry point: HTTP goes to Django, WebSockets to the Channels routes in runs.routing."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "deuz_project.settings")

# Set up Django (the app registry) before importing anything that touches models.
django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from django.urls import get_resolver  # noqa: E402

from deuz_project.heap import heap_freeze_startup  # noqa: E402
from deuz_project.startup import agents_refuse_bad_entries, leg_modules_load  # noqa: E402
from runs.api.socket_auth import TokenOrSessionAuthMiddlewareStack  # noqa: E402
from runs.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        # Origin check against ALLOWED_HOSTS stops other sites from riding a user's session cookie; the user
        # comes from the session cookie or an `Authorization: Token KEY` header.
        "websocket": AllowedHostsOriginValidator(
            TokenOrSessionAuthMiddlewareStack(URLRouter(websocket_urlpatterns))
        ),
    }
)

# An agent entry that cannot be imported stops start-up here too, named (daphne started without manage.py runs
# no system checks).
agents_refuse_bad_entries()

# The views, imported now rather than on the first request, and what a follower's first continuation of a dead
# run would import (the channel layer, the stores), then everything loaded so far kept out of the garbage
# collector's full collections (deuz_project.heap).
get_resolver().url_patterns
leg_modules_load()
heap_freeze_startup()
