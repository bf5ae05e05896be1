"""Read typed settings from the environment; a bad value names its variable.

An empty variable counts as unset, so ``FOO=`` in a shell or a compose file
falls back to the default instead of failing on an empty string.
"""

from __future__ import annotations

import json
import os
import re
from urllib.parse import unquote, urlsplit

import dj_email_url
from django.core.exceptions import ImproperlyConfigured

__all__ = [
    "env_agents",
    "env_bool",
    "env_choice",
    "env_demo_model",
    "env_email",
    "env_fernet_keys",
    "env_float",
    "env_headers",
    "env_int",
    "env_list",
    "env_optional_int",
    "env_origins",
    "env_secret",
    "env_str",
    "env_url",
]

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


def env_str(name: str, *, default: str | None = None) -> str | None:
    """The variable's value, or ``default`` when it is unset or empty."""
    value = os.environ.get(name, "")
    return value if value != "" else default


def env_bool(name: str, *, default: bool) -> bool:
    """A yes/no variable: 1/0, true/false, yes/no, on/off in any case."""
    value = env_str(name)
    if value is None:
        return default
    normalized = value.strip().lower()
    if normalized in _TRUE:
        return True
    if normalized in _FALSE:
        return False
    raise ImproperlyConfigured(
        f"{name} must be one of 1/0, true/false, yes/no, on/off; got {value!r}."
    )


def env_choice(name: str, *, choices: tuple[str, ...], default: str) -> str:
    """One of ``choices`` (compared in lower case)."""
    value = env_str(name)
    if value is None:
        return default
    if value.strip().lower() not in choices:
        raise ImproperlyConfigured(f"{name} must be one of {', '.join(choices)}; got {value!r}.")
    return value.strip().lower()


def env_int(name: str, *, default: int, minimum: int | None = None) -> int:
    """A whole-number variable, at least ``minimum`` when one is given."""
    value = env_str(name)
    if value is None:
        return default
    try:
        number = int(value.strip())
    except ValueError:
        raise ImproperlyConfigured(
            f"{name} must be an integer; got {value!r}."
        ) from None
    if minimum is not None and number < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}; got {number}.")
    return number


def env_list(name: str, *, default: list[str]) -> list[str]:
    """A comma-separated variable, blanks around and between items dropped."""
    value = env_str(name)
    if value is None:
        return list(default)
    return [item.strip() for item in value.split(",") if item.strip()]


# scheme://host[:port], the host possibly starting with "*." (a wildcard for subdomains), nothing after it.
_ORIGIN = re.compile(r"^https?://(\*\.)?[A-Za-z0-9.-]+(:[0-9]{1,5})?$|^https?://\[[0-9A-Fa-f:.]+\](:[0-9]{1,5})?$")


def env_origins(name: str) -> list[str]:
    """A comma-separated list of origins (``https://host[:port]``), each checked so a typo fails at start-up."""
    origins = env_list(name, default=[])
    for origin in origins:
        if not _ORIGIN.match(origin):
            raise ImproperlyConfigured(
                f"{name} must list origins like https://deuz.example or https://*.example.com:8443 "
                f"(a scheme, a host, an optional port, no path); got {origin!r}."
            )
    return origins


def env_secret(name: str, *, dev_default: str | None) -> str:
    """A secret that must be set unless a development default is allowed.

    Pass ``dev_default=None`` outside DEBUG so a forgotten secret stops start-up
    instead of silently signing with a publicly known key.
    """
    value = env_str(name)
    if value is not None:
        return value
    if dev_default is None:
        raise ImproperlyConfigured(f"{name} must be set when DEBUG is off.")
    return dev_default


def env_fernet_keys(name: str) -> list[str]:
    """A comma-separated list of Fernet keys (urlsafe base64 of 32 bytes); each is checked."""
    from cryptography.fernet import Fernet

    keys = env_list(name, default=[])
    for position, key in enumerate(keys, start=1):
        try:
            Fernet(key)
        except (ValueError, TypeError):
            raise ImproperlyConfigured(
                f"{name} key #{position} is not a Fernet key (32 url-safe base64-encoded bytes; "
                "make one with `python -c 'from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())'`)."
            ) from None
    return keys


_PROVIDER_KEYS = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}
_PROVIDER_BASE_URLS = {"anthropic": "ANTHROPIC_BASE_URL", "openai": "OPENAI_BASE_URL"}


def env_demo_model(name: str) -> str:
    """``scripted``, or ``provider:model-id`` for a provider whose API key variable is set."""
    value = env_str(name, default="scripted").strip()
    if value == "scripted":
        return value
    provider, _, model_id = value.partition(":")
    if provider not in _PROVIDER_KEYS or not model_id:
        raise ImproperlyConfigured(
            f"{name} must be 'scripted', 'anthropic:<model id>' or 'openai:<model id>'; got {value!r}."
        )
    # A local server (plain http://, or localhost) needs no key; runs.runtime.providers sends none to it.
    if not env_str(_PROVIDER_KEYS[provider]) and not _is_local_url(env_str(_PROVIDER_BASE_URLS[provider])):
        raise ImproperlyConfigured(
            f"{name}={value!r} needs {_PROVIDER_KEYS[provider]} to be set "
            f"(or {_PROVIDER_BASE_URLS[provider]} pointing at a local server)."
        )
    return value


def _is_local_url(url: str | None) -> bool:
    if not url:
        return False
    parts = urlsplit(url)
    return parts.scheme == "http" or (parts.hostname or "") in {"localhost", "127.0.0.1", "::1", "0.0.0.0"}


def env_float(name: str, *, default: float | None, minimum: float | None = None, positive: bool = False) -> float | None:
    """A decimal-number variable, at least ``minimum`` (or above zero when ``positive``) when given."""
    value = env_str(name)
    if value is None:
        return default
    try:
        number = float(value.strip())
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a number; got {value!r}.") from None
    if number != number or number in (float("inf"), float("-inf")):
        raise ImproperlyConfigured(f"{name} must be a finite number; got {value!r}.")
    if positive and number <= 0:
        raise ImproperlyConfigured(f"{name} must be above 0; got {value!r}.")
    if minimum is not None and number < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}; got {value!r}.")
    return number


def env_optional_int(name: str, *, minimum: int | None = None) -> int | None:
    """A whole-number variable, or None when it is unset."""
    if env_str(name) is None:
        return None
    return env_int(name, default=0, minimum=minimum)


def env_headers(name: str) -> dict[str, str]:
    """HTTP headers as a JSON object of strings to strings, e.g. ``{"anthropic-beta": "..."}``."""
    value = env_str(name)
    if value is None:
        return {}
    try:
        headers = json.loads(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a JSON object of header names to values; it is not JSON.") from None
    if not isinstance(headers, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in headers.items()):
        raise ImproperlyConfigured(f"{name} must be a JSON object of header names to string values.")
    return headers


#: The EMAIL_URL schemes Deuz accepts (dj-email-url reads more; these are the ones it documents).
_EMAIL_SCHEMES = ("smtp", "submission", "submit", "console", "file", "memory", "dummy")


#: Django's SMTP back end's options, from the EMAIL_* names dj-email-url gives.
_SMTP_OPTIONS = {"EMAIL_HOST": "host", "EMAIL_PORT": "port", "EMAIL_HOST_USER": "username",
                 "EMAIL_HOST_PASSWORD": "password", "EMAIL_USE_TLS": "use_tls", "EMAIL_USE_SSL": "use_ssl",
                 "EMAIL_TIMEOUT": "timeout"}
#: How long a mail server has to answer, unless the URL says (``?timeout=``).
_SMTP_TIMEOUT_SECONDS = 10


def env_email(name: str) -> dict[str, object] | None:
    """Django's default mailer (a MAILERS entry) from an email URL as dj-email-url reads it
    (``smtp://user:password@host:587/?tls=True``, ``console:``, ``file:///dir``), or None when the variable is unset.
    ``file:///dir`` names the folder ``/dir`` (dj-email-url itself would drop the leading slash)."""
    value = env_str(name)
    if value is None:
        return None
    value = value.strip()
    scheme = urlsplit(value).scheme
    if scheme not in _EMAIL_SCHEMES:  # the value may hold a password: only its scheme is repeated
        raise ImproperlyConfigured(
            f"{name} must be an email URL (smtp://user:password@host:port, console:, file:///dir); got a "
            f"{scheme + ':' if scheme else 'value without a'} scheme."
        )
    try:
        config = dj_email_url.parse(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name} could not be read as an email URL.") from None
    options: dict[str, object] = {}
    if scheme == "file":
        path = unquote(urlsplit(value).path)
        if not path.startswith("/"):
            raise ImproperlyConfigured(f"{name} must name an absolute folder: file:///path/to/dir.")
        options["file_path"] = path
    elif config["EMAIL_BACKEND"].endswith("smtp.EmailBackend"):
        options = {option: config[key] for key, option in _SMTP_OPTIONS.items() if config.get(key) not in (None, "")}
        options.setdefault("timeout", _SMTP_TIMEOUT_SECONDS)
    return {"BACKEND": config["EMAIL_BACKEND"], "OPTIONS": options}


def env_url(name: str) -> str | None:
    """An http(s) URL with a host, or None when it is unset."""
    value = env_str(name)
    if value is None:
        return None
    parts = urlsplit(value.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ImproperlyConfigured(f"{name} must be an http:// or https:// URL; got {value!r}.")
    return value.strip()


#: An agent's name: what runs and the API call it (runs.Run.agent holds 100 characters).
_AGENT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
#: A factory's dotted path: package.module.factory.
_DOTTED_PATH = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+")


def env_agents(name: str) -> dict[str, str]:
    """Agents from the operator's own code: a JSON object of agent names to the dotted paths of their factories,
    ``{"helpdesk": "acme_agents.helpdesk.helpdesk_agent"}``. Only the shape is checked here (settings load before
    any app); whether each path imports is a system check (runs.checks), run before serve and worker start."""
    value = env_str(name)
    if value is None:
        return {}
    try:
        agents = json.loads(value)
    except ValueError:
        raise ImproperlyConfigured(
            f'{name} must be a JSON object of agent names to factory paths, e.g. {{"helpdesk": '
            '"acme_agents.helpdesk.helpdesk_agent"}; it is not JSON.'
        ) from None
    if not isinstance(agents, dict):
        raise ImproperlyConfigured(f"{name} must be a JSON object of agent names to factory paths.")
    for agent, path in agents.items():
        if not _AGENT_NAME.fullmatch(agent):
            raise ImproperlyConfigured(
                f"{name}: the agent name {agent!r} must be 1-100 letters, digits, '.', '_' or '-', starting with a "
                "letter or digit."
            )
        if not isinstance(path, str) or not _DOTTED_PATH.fullmatch(path):
            raise ImproperlyConfigured(
                f"{name}[{agent!r}] must be the dotted path of a factory (package.module.factory); got {path!r}."
            )
    return agents
