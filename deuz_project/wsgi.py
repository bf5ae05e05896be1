"""WSGI entry point for tools that need one; Deuz itself is served over ASGI (daphne)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "deuz_project.settings")

application = get_wsgi_application()
