"""API tokens, for admins: list them, create one (its key shown in that answer alone), revoke one.

Views stay thin: ``services.accounts`` makes and revokes tokens (and records
who did), ``selectors.tokens`` reads them. No answer carries a key or its
hash, except the key in the answer that created it. The permission table
gives these routes to admins whose token is not limited to jobs
(``unscoped``): a scoped admin token could otherwise make itself an
unscoped one.
"""

from __future__ import annotations

import re

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from .. import selectors
from ..callers import MAX_PATTERNS
from ..models import ApiToken, Role
from ..services import accounts
from .serializers import StrictSerializer, WholeMatch, clean_text
from .views import ERROR, validated

# Django's user name characters, ASCII only: the schema's pattern then means
# the same to every client (JSON Schema's \w is ASCII, Python's is not).
USER_RE = re.compile(r"^[A-Za-z0-9_.@+-]{1,150}$")
USER_RULE = "use 1-150 characters of A-Z, a-z, 0-9 and _ . @ + -"
# A job pattern: the characters of job names, and the wildcards * and ?
# (any other character could never match a name).
PATTERN_RE = re.compile(r"^[A-Za-z0-9._*?-]{1,200}$")
MAX_NAME = 100  # ApiToken.name
MAX_EXPIRY_DAYS = 3650


class _Text(serializers.CharField):
    """A string, and only a string: a list's items are not type-checked by StrictSerializer (DRF takes 3 for "3")."""

    def to_internal_value(self, data):
        if not isinstance(data, str):
            raise serializers.ValidationError("expected a string")
        return super().to_internal_value(data)


class ApiTokenCreateSerializer(StrictSerializer):
    """A new token: for whom, with which role, limited to which jobs. Unknown fields are refused."""

    user = serializers.CharField(
        max_length=150,
        trim_whitespace=False,
        validators=[WholeMatch(USER_RE, USER_RULE)],
        help_text="The user the token acts for. A user that does not exist is created with `role` (as `manage.py "
        "create_token` does); an existing user keeps its role, and a token cannot have more.",
    )
    role = serializers.ChoiceField(choices=Role.values, help_text="viewer < worker < admin.")
    name = serializers.CharField(
        max_length=MAX_NAME,
        required=False,
        default="",
        allow_blank=True,
        trim_whitespace=False,
        help_text="A label to recognise the token by (the cluster, the pipeline).",
    )
    jobs = serializers.ListField(
        child=_Text(
            max_length=200,
            trim_whitespace=False,
            validators=[WholeMatch(PATTERN_RE, "use A-Z, a-z, 0-9, '.', '_', '-' and the wildcards * and ?")],
        ),
        max_length=MAX_PATTERNS,
        required=False,
        default=list,
        help_text="Job name patterns (`*` any characters, `?` one) the token is limited to; none: every job.",
    )
    expires_in_days = serializers.IntegerField(
        min_value=1, max_value=MAX_EXPIRY_DAYS, required=False, allow_null=True, default=None
    )

    def validate_name(self, value):
        return clean_text(value, "name", max_length=MAX_NAME)


class ApiTokenRevokeSerializer(StrictSerializer):
    """A revocation; the body may be empty. Unknown fields are refused."""

    current = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Revoke it even if it is the token this request is made with (otherwise that is a 409).",
    )


class ApiTokenSerializer(serializers.Serializer):
    """A token as admins see it: never its key, nor the key's hash."""

    id = serializers.IntegerField()
    prefix = serializers.CharField(help_text="The key's first characters, to recognise it; the key is never shown.")
    user = serializers.CharField(source="user.username")
    role = serializers.ChoiceField(choices=Role.values)
    jobs = serializers.ListField(
        child=serializers.CharField(), help_text="The job name patterns it is limited to; empty: every job."
    )
    name = serializers.CharField()
    state = serializers.ChoiceField(
        choices=selectors.TOKEN_STATES,
        help_text="live; revoked; expired; inactive (its user is deactivated). Only a live token authenticates.",
    )
    created_at = serializers.DateTimeField()
    last_used_at = serializers.DateTimeField(allow_null=True, help_text="To the minute.")
    expires_at = serializers.DateTimeField(allow_null=True)
    revoked_at = serializers.DateTimeField(allow_null=True)
    current = serializers.SerializerMethodField(help_text="Whether it is the token this request is made with.")

    def get_current(self, token) -> bool:
        using = self.context["request"].auth
        return isinstance(using, ApiToken) and using.pk == token.pk


class ApiTokenCreatedSerializer(ApiTokenSerializer):
    """A token just created, with its key: the only answer that ever holds it."""

    key = serializers.CharField(help_text="The key: shown in this answer only (the server keeps its hash).")
    user_created = serializers.BooleanField(help_text="Whether the user was created for this token.")


def _row(request, token_id: int) -> dict:
    return ApiTokenSerializer(selectors.tokens().get(pk=token_id), context={"request": request}).data


class TokenListCreateView(generics.ListAPIView):
    serializer_class = ApiTokenSerializer

    def get_queryset(self):
        state = self.request.query_params.get("state")
        user = self.request.query_params.get("user")
        if state is not None and state not in selectors.TOKEN_STATES:
            raise serializers.ValidationError({"state": [f"choose one of {', '.join(selectors.TOKEN_STATES)}"]})
        if user is not None and not USER_RE.fullmatch(user):
            raise serializers.ValidationError({"user": [USER_RULE]})
        return selectors.tokens(state, user)

    @extend_schema(
        parameters=[
            OpenApiParameter("state", str, enum=selectors.TOKEN_STATES),
            OpenApiParameter("user", {"type": "string", "pattern": USER_RE.pattern, "maxLength": 150}),
        ],
        summary="List API tokens, newest first (an admin's; never a key)",
    )
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)

    @extend_schema(
        request=ApiTokenCreateSerializer,
        responses={201: ApiTokenCreatedSerializer, 400: ERROR, 409: ERROR},
        summary="Create an API token; its key is in this answer only",
        description="409 when the user exists and cannot have this token now: its role is below the token's, "
        "or it is deactivated (`fields` names `role` or `user`).",
    )
    def post(self, request):
        data = validated(ApiTokenCreateSerializer, request.data).validated_data
        token, key, user_created = accounts.issue_token(
            request.user,
            data["user"],
            data["role"],
            name=data["name"],
            jobs=data["jobs"],
            expires_in_days=data["expires_in_days"],
        )
        body = {**_row(request, token.pk), "key": key, "user_created": user_created}
        # The one answer that holds a key: no cache along the way keeps it.
        return Response(body, status=status.HTTP_201_CREATED, headers={"Cache-Control": "no-store"})


class TokenRevokeView(APIView):
    @extend_schema(
        request=ApiTokenRevokeSerializer,
        responses={200: ApiTokenSerializer, 404: ERROR, 409: ERROR},
        summary="Revoke an API token: it stops working at once, in every server process",
        description="409 when it was already revoked, or when it is the token this request is made with and the "
        "body does not say `current: true`.",
    )
    def post(self, request, token_id: int):
        data = validated(ApiTokenRevokeSerializer, request.data).validated_data
        using = request.auth if isinstance(request.auth, ApiToken) else None
        accounts.revoke_by_id(token_id, request.user, using=using, confirmed=data["current"])
        return Response(_row(request, token_id))
