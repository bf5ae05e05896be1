#!/usr/bin/env python
"""Django's command-line utility for administrative tasks."""

import os
import sys


def main() -> None:
    """Run administrative tasks."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "deuz_project.settings")
    try:
        from django.core.management import execute_from_command_line
    except ImportError as exc:
        raise ImportError(
            "Couldn't import Django. Run ./scripts/dev or ./scripts/test, which set up "
            ".venv, or activate it with `. .venv/bin/activate`."
        ) from exc
    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
