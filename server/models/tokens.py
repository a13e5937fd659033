"""Who may call the API: API tokens and their roles."""

from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models


class Role(models.TextChoices):
    VIEWER = "viewer", "viewer (read)"
    WORKER = "worker", "worker (read, create or attach jobs, lease items)"
    ADMIN = "admin", "admin (everything)"


ROLE_RANK = {Role.VIEWER: 0, Role.WORKER: 1, Role.ADMIN: 2}


class ApiToken(models.Model):
    """An API key. Only its SHA-256 is stored; the key is shown once, at creation."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    role = models.CharField(max_length=8, choices=Role.choices)
    name = models.CharField(max_length=100, blank=True, default="")
    prefix = models.CharField(max_length=12, help_text="The first characters of the key, to recognise it.")
    key_hash = models.CharField(max_length=64, unique=True)
    # Job name patterns (server/callers.py) the token is limited to; empty: every job.
    jobs = ArrayField(models.CharField(max_length=200), default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "shardline_api_token"
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.role}, {self.user})"
