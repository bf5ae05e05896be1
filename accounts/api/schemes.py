"""The OpenAPI document's security schemes for accounts.authentication.ApiTokenAuthentication: the same key, as
``Authorization: Token KEY`` (tokenAuth) or ``Authorization: Bearer KEY`` (bearerAuth), either one.

drf-spectacular finds the extension by its class being imported; AccountsConfig.ready imports this module.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension

__all__ = ["ApiTokenScheme"]


class ApiTokenScheme(OpenApiAuthenticationExtension):
    target_class = "accounts.authentication.ApiTokenAuthentication"
    name = ["tokenAuth", "bearerAuth"]

    def get_security_definition(self, auto_schema: Any) -> list[dict[str, Any]]:
        return [
            {"type": "apiKey", "in": "header", "name": "Authorization",
             "description": "An API token as `Authorization: Token KEY` (make one at /account/tokens/, with "
                            "`POST /api/tokens/` or `manage.py token create USER --name NAME`)."},
            {"type": "http", "scheme": "bearer",
             "description": "The same API token as `Authorization: Bearer KEY`."},
        ]

    def get_security_requirement(self, auto_schema: Any) -> list[dict[str, list]]:
        return [{"tokenAuth": []}, {"bearerAuth": []}]  # either scheme, not both
