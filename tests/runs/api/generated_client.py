"""A client nobody here wrote: openapi-python-client generates one from `/api/schema/`, as an API user would, and
it talks to the application in this process.

The generated package is built once per test session from the document the application serves at that moment,
so a change of the document is read by the next run. Its requests go through an httpx transport that hands them to
Django's test client: no socket, no server, yet every byte of every answer is parsed by the generated code, with
``raise_on_unexpected_status`` so an answer whose status the document does not list fails the test.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import httpx
from asgiref.sync import async_to_sync
from django.test import Client as DjangoClient

__all__ = ["PACKAGE", "django_transport", "generate_client", "generated_client"]

#: The generated package's name (the generator would derive one from the document's title).
PACKAGE = "deuz_client"
#: The generator's configuration: no formatter run after it (ruff would rewrite nothing that matters here).
CONFIG = f"post_hooks: []\nproject_name_override: deuz-client\npackage_name_override: {PACKAGE}\n"


def generate_client(schema: dict, folder: Path) -> ModuleType:
    """Generate the client of ``schema`` into ``folder`` and import it."""
    (folder / "schema.json").write_text(json.dumps(schema))
    (folder / "config.yaml").write_text(CONFIG)
    generator = Path(sys.executable).with_name("openapi-python-client")
    done = subprocess.run(
        [str(generator), "generate", "--path", "schema.json", "--output-path", "out", "--meta", "none",
         "--config", "config.yaml", "--overwrite"],
        cwd=folder, capture_output=True, text=True, timeout=120,
    )
    # The generator reports what it could not turn into code as warnings on an exit status of 0: each is a part of
    # the document a client would not have, so any of them fails.
    assert done.returncode == 0 and "Warning" not in done.stdout + done.stderr, done.stdout + done.stderr
    sys.path.insert(0, str(folder))
    importlib.invalidate_caches()
    # The generator writes the package's modules straight into "out", with relative imports between them.
    (folder / PACKAGE).symlink_to(folder / "out", target_is_directory=True)
    return importlib.import_module(PACKAGE)


#: Headers of the connection, not of the request: the test client makes its own.
_TRANSPORT_HEADERS = {"host", "content-length", "connection", "accept-encoding", "user-agent"}


async def _joined(chunks) -> list[bytes]:
    return [chunk async for chunk in chunks]


def django_transport(authorization: str) -> httpx.MockTransport:
    """An httpx transport that answers each request with Django's test client, as ``authorization``."""
    django = DjangoClient()

    def answer(request: httpx.Request) -> httpx.Response:
        # Every header the generated code set (Idempotency-Key, Last-Event-ID...), as a server would receive it.
        headers = {name: value for name, value in request.headers.items() if name.lower() not in _TRANSPORT_HEADERS}
        headers["Authorization"] = authorization
        path = request.url.raw_path.decode()
        response = django.generic(request.method, path, data=request.content, headers=headers)
        if response.streaming:
            content = b"".join(async_to_sync(_joined)(response.streaming_content) if response.is_async
                               else response.streaming_content)
        else:
            content = response.content
        return httpx.Response(response.status_code, headers=dict(response.items()), content=content)

    return httpx.MockTransport(answer)


def generated_client(package: ModuleType, key: str):
    """The generated AuthenticatedClient for the API token ``key``, strict about statuses."""
    client = package.AuthenticatedClient(base_url="http://testserver", token=key, prefix="Token",
                                         raise_on_unexpected_status=True)
    client.set_httpx_client(httpx.Client(base_url="http://testserver",
                                         transport=django_transport(f"Token {key}")))
    return client
