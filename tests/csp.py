"""Check a response's HTML against its Content-Security-Policy the way a browser would, without a browser."""

from __future__ import annotations

import re
from html.parser import HTMLParser

__all__ = ["csp_policy", "csp_problems"]

# Script types a browser does not execute, so CSP does not govern them.
_DATA_SCRIPT_TYPES = {"application/json", "application/ld+json", "text/template"}


def csp_policy(response) -> dict[str, list[str]]:
    """The enforced (else report-only) policy of ``response``: directive -> its source list."""
    header = response.headers.get("Content-Security-Policy") or response.headers.get(
        "Content-Security-Policy-Report-Only"
    )
    assert header, f"no Content-Security-Policy header on {response.request['PATH_INFO']}"
    policy = {}
    for directive in header.split(";"):
        name, *sources = directive.split()
        policy[name] = sources
    return policy


def _nonce(policy: dict[str, list[str]], directive: str) -> str | None:
    for source in policy.get(directive, policy.get("default-src", [])):
        if match := re.fullmatch(r"'nonce-([^']+)'", source):
            return match.group(1)
    return None


def _is_same_origin(url: str) -> bool:
    return url.startswith("/") and not url.startswith("//")


class _PolicyReader(HTMLParser):
    def __init__(self, policy: dict[str, list[str]]) -> None:
        super().__init__()
        self.script_nonce = _nonce(policy, "script-src")
        self.style_nonce = _nonce(policy, "style-src")
        self.problems: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {name: value or "" for name, value in attrs}
        if "style" in values:
            self.problems.append(f"<{tag} style=...> (an inline style attribute)")
        for name in values:
            if name.startswith("on"):
                self.problems.append(f"<{tag} {name}=...> (an inline event handler)")
        for name in ("href", "src", "action"):
            if values.get(name, "").strip().lower().startswith("javascript:"):
                self.problems.append(f"<{tag} {name}=javascript:...>")
        if tag == "script" and values.get("type", "").lower() not in _DATA_SCRIPT_TYPES:
            if "src" in values:
                if not _is_same_origin(values["src"]):
                    self.problems.append(f"<script src={values['src']!r}> (another origin)")
            elif self.script_nonce is None or values.get("nonce") != self.script_nonce:
                self.problems.append("<script> inline without the response's nonce")
        elif tag == "style" and (self.style_nonce is None or values.get("nonce") != self.style_nonce):
            self.problems.append("<style> inline without the response's nonce")
        elif tag == "link" and "stylesheet" in values.get("rel", "").split():
            if not _is_same_origin(values.get("href", "")):
                self.problems.append(f"<link rel=stylesheet href={values.get('href')!r}> (another origin)")


def csp_problems(response) -> list[str]:
    """What in ``response``'s HTML its CSP would block: inline code without the nonce, other origins' assets."""
    reader = _PolicyReader(csp_policy(response))
    reader.feed(response.content.decode())
    return reader.problems
