"""The tokens API: a signed-in user lists, creates and revokes their own API tokens (no one else's).

``POST /api/tokens/`` answers the key once; nothing answers it again, since only its digest is kept.
``DELETE /api/tokens/{id}/`` of a token that is not the user's (another user's, unknown, revoked) is a 404, so
token ids cannot be probed.
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.api.serializers import ApiTokenSerializer, IssuedTokenSerializer, TokenCreateInputSerializer
from accounts.errors import TokenNotFound
from accounts.models import MAX_TOKEN_ID
from accounts.selectors import token_list
from accounts.services import token_create, token_revoke
from runs.api.generic import ApiView, PaginatedApiView, validated_input
from runs.api.schema import BAD_PAGE, CSRF_REFUSED, UNAUTHENTICATED, WWW_AUTHENTICATE, error_answer, json_body_answers

__all__ = ["TokenCollectionApi", "TokenDetailApi"]

TOKEN_ID_PATH = OpenApiParameter(
    "id", {"type": "integer", "minimum": 1, "maximum": MAX_TOKEN_ID}, OpenApiParameter.PATH,
    description="The token's id, from the list or the answer that created it.",
)
_NOT_FOUND = error_answer("You have no such token: another user's, an unknown one, one revoked already, or an id "
                          "that is not a whole number from 1.")
# deuz_project.middleware.RefuseNulMiddleware answers it, for every path, before any view.
_NUL_REFUSED = error_answer("A query parameter or the path holds a NUL character.")


def path_token_id(raw: str) -> int:
    """The token id of a URL, or TokenNotFound: routed as any string, so that every id answers this view's JSON
    404 (a route that did not match would meet the CSRF check of a signed-in session before any JSON answer)."""
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 19:
        raise TokenNotFound()
    return int(raw)


class TokenCollectionApi(PaginatedApiView):
    """``/api/tokens/``: GET lists the user's tokens, POST creates one."""

    @extend_schema(
        operation_id="tokens_list",
        summary="Your API tokens",
        description="Your tokens that are not revoked (expired ones too, until you revoke them), newest first, "
        "paginated. No answer has a key: a token is told apart by its name and prefix.",
        parameters=[WWW_AUTHENTICATE],
        responses={
            200: ApiTokenSerializer(many=True),
            400: _NUL_REFUSED,
            401: UNAUTHENTICATED,
            404: BAD_PAGE,
        },
    )
    def get(self, request: Request) -> Response:
        return self.paginated(request, token_list(user=request.user), ApiTokenSerializer)

    @extend_schema(
        operation_id="tokens_create",
        summary="Create an API token",
        description="A new named token of yours, optionally expiring. The answer holds its key, once: the server "
        "keeps only a digest of it, so copy it now. Send it as `Authorization: Token KEY` or "
        "`Authorization: Bearer KEY`.",
        request=TokenCreateInputSerializer,
        parameters=[WWW_AUTHENTICATE],
        responses=json_body_answers({
            201: IssuedTokenSerializer,
            400: error_answer("Field errors (a missing or too long name, a life out of range), malformed JSON."),
        }),
    )
    def post(self, request: Request) -> Response:
        issued = token_create(user=request.user, **validated_input(TokenCreateInputSerializer, request.data))
        return Response(IssuedTokenSerializer(issued).data, status=status.HTTP_201_CREATED)


class TokenDetailApi(ApiView):
    """``/api/tokens/{id}/``: DELETE revokes the token."""

    @extend_schema(
        operation_id="tokens_revoke",
        summary="Revoke an API token",
        description="The token stops working at once, for every request that sends it from now on (the one "
        "making this request included). It is gone from your list; it cannot be restored.",
        parameters=[TOKEN_ID_PATH, WWW_AUTHENTICATE],
        responses={
            204: None,
            400: _NUL_REFUSED,
            401: UNAUTHENTICATED,
            403: error_answer(f"Refused for {CSRF_REFUSED}."),
            404: _NOT_FOUND,
        },
    )
    def delete(self, request: Request, id: str) -> Response:  # noqa: A002 (the path's name, as the spec has it)
        try:
            token_revoke(user=request.user, token_id=path_token_id(id))
        except TokenNotFound as exc:
            raise NotFound(str(exc)) from None
        return Response(status=status.HTTP_204_NO_CONTENT)
