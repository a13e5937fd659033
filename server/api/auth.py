"""``Authorization: Token <key>`` authentication."""

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions

from ..services import accounts


class TokenAuthentication(authentication.BaseAuthentication):
    keyword = "Token"

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].lower() != self.keyword.lower().encode():
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed("malformed Authorization header; expected 'Token <key>'")
        try:
            key = header[1].decode("ascii")
        except UnicodeDecodeError:
            raise exceptions.AuthenticationFailed("the token contains characters that no token has") from None
        token = accounts.authenticate_key(key)
        if token is None:
            raise exceptions.AuthenticationFailed("invalid, expired or revoked token")
        return token.user, token

    def authenticate_header(self, request):
        # Makes DRF answer 401 (not 403) when no credentials were sent.
        return self.keyword


class TokenAuthenticationScheme(OpenApiAuthenticationExtension):
    """Documents the token header in /api/schema/ (clients and fuzzers see how to authenticate)."""

    target_class = "server.api.auth.TokenAuthentication"
    name = "tokenAuth"

    def get_security_definition(self, auto_schema):
        return {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": "`Token <key>`; keys are created by an admin (`shardline tokens create`, "
            "`POST /api/v1/tokens/` or `manage.py create_token`)",
        }
