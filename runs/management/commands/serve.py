"""`manage.py serve`: set up the database and static files, then serve the ASGI app with daphne."""

from __future__ import annotations

import sys

from daphne.access import AccessLogGenerator
from daphne.endpoints import build_endpoint_description_strings
from daphne.server import Server
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.utils.module_loading import import_string
from twisted.internet import reactor  # the asyncio reactor daphne.server installed

from demo.users import DemoLogin, demo_users_ensure
from deuz_project.prompt_writes import prompt_writes_install
from runs.execution.worker import EmbeddedWorkers

#: The git-ignored file (at the repository root) that keeps the demo users' generated passwords.
DEMO_LOGINS_FILE = ".demo-logins"


class Command(BaseCommand):
    help = (
        "Apply migrations, collect static files and serve Deuz (HTTP and WebSockets) "
        "with daphne. With DEBUG on, also ensures one demo user per role and prints their logins."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--host", default="127.0.0.1", help="Interface to listen on (default 127.0.0.1)."
        )
        parser.add_argument(
            "--port", type=int, default=8000, help="TCP port (default 8000; 0 picks a free one)."
        )
        parser.add_argument(
            "--workers",
            type=int,
            default=1,
            help=(
                "Run workers embedded in this process (default 1; 0 for none, when separate "
                "`manage.py worker` processes execute the runs)."
            ),
        )

    def handle(self, *args, host: str, port: int, workers: int, **options) -> None:
        if not 0 <= port <= 65535:
            raise CommandError(f"--port must be between 0 and 65535; got {port}.")
        if workers < 0:
            raise CommandError(f"--workers must be 0 or more; got {workers}.")
        self.embedded_workers = workers
        verbosity = options["verbosity"]
        # One line at a time even into a pipe or a log file, so the banner and access log show up live.
        if hasattr(sys.stdout, "reconfigure"):
            sys.stdout.reconfigure(line_buffering=True)
        try:
            call_command("migrate", interactive=False, verbosity=0)
            call_command("collectstatic", interactive=False, verbosity=0)
            logins: list[DemoLogin] = []
            if settings.DEBUG:
                logins = demo_users_ensure(password_file=settings.BASE_DIR / DEMO_LOGINS_FILE)
            server = Server(
                application=import_string(settings.ASGI_APPLICATION),
                endpoints=build_endpoint_description_strings(host=host, port=port),
                # Twisted's handlers stop the reactor on SIGINT/SIGTERM, closing connections first.
                signal_handlers=True,
                action_logger=AccessLogGenerator(sys.stdout) if verbosity >= 1 else None,
                root_path=getattr(settings, "FORCE_SCRIPT_NAME", "") or "",
                verbosity=verbosity,
                # Announce once the reactor runs: its signal handlers are in place by then,
                # so whoever reads the banner can already stop the server with a signal.
                ready_callable=lambda: reactor.callWhenRunning(self._announce, server, host, logins),
            )
            prompt_writes_install()  # a frame leaves when it is made, not after every follower woken with it
            embedded = EmbeddedWorkers(workers)
            embedded.start()
            try:
                server.run()
            finally:
                embedded.stop()
        except KeyboardInterrupt:
            # Ctrl-C before the reactor took over the signal (e.g. during migrate).
            pass
        else:
            if not server.listening_addresses:
                raise CommandError(f"Could not listen on {host}:{port} (see the error above).")
        self.stdout.write("Deuz stopped.")

    def _announce(self, server: Server, host: str, logins: list[DemoLogin]) -> None:
        """Print where Deuz answers (the real port, when 0 was asked for) and the demo logins."""
        bound_port = server.listening_addresses[0][1] if server.listening_addresses else "?"
        shown_host = f"[{host.strip('[]')}]" if ":" in host else host
        url = f"http://{shown_host}:{bound_port}/"
        self.stdout.write(f"Deuz is serving at {url}")
        if logins:
            self.stdout.write(
                f"Demo logins, one per role (passwords kept in {DEMO_LOGINS_FILE}); sign in at {url}accounts/login/"
            )
            width = max(len(f"{login.user.get_username()} / {login.password}") for login in logins)
            for login in logins:
                credentials = f"{login.user.get_username()} / {login.password}"
                self.stdout.write(
                    f"  {credentials:<{width}}  {login.role.role}: {login.role.does}; "
                    f"goes to {url}{login.role.goes_to.lstrip('/')}"
                )
            self.stdout.write(
                f"  An API token for a demo user: {url}account/tokens/ signed in, or "
                ".venv/bin/python manage.py token create api-user --name NAME"
            )
        workers = self.embedded_workers
        self.stdout.write(
            f"Embedded workers: {workers}" if workers else "No embedded workers: run `manage.py worker` to execute runs."
        )
        self.stdout.write("Quit with CONTROL-C.")
        self.stdout.flush()
