"""``shardline tokens ...``: an admin's API tokens: list them, create one (its key printed once), revoke one."""

from __future__ import annotations

import click

from .jobs import json_option
from .output import emit, table
from .settings import Settings

STATES = ["live", "revoked", "expired", "inactive"]
ROLES = ["viewer", "worker", "admin"]
COLUMNS = ["id", "prefix", "user", "role", "jobs", "name", "state", "created", "last_used", "expires"]


def _when(value: str | None) -> str:
    """An API timestamp to the minute, as people read it in a table."""
    return value[:16].replace("T", " ") if value else "-"


def _describe(token: dict) -> dict:
    return {
        **token,
        "prefix": token["prefix"] + "…",
        "jobs": ",".join(token["jobs"]) or "all",
        # The token this command runs with: revoking it needs --current.
        "state": token["state"] + (" (this one)" if token.get("current") else ""),
        "created": _when(token["created_at"]),
        "last_used": _when(token["last_used_at"]),
        "expires": _when(token["expires_at"]) if token["expires_at"] else "never",
    }


@click.group()
def tokens():
    """List, create and revoke API tokens (admin; a token limited to jobs may not)."""


@tokens.command("list")
@click.option("--state", type=click.Choice(STATES), help="Only tokens in this state.")
@click.option("--user", help="Only this user's tokens.")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 500), help="Newest first.")
@json_option
@click.pass_obj
def list_tokens(settings: Settings, state, user, limit):
    """API tokens, newest first: never their keys (a prefix to recognise each)."""
    rows = settings.client.tokens(state=state, user=user, page_size=limit)["results"]
    emit(settings, rows, lambda: table([_describe(row) for row in rows], COLUMNS))


@tokens.command("create")
@click.argument("user")
@click.option("--role", required=True, type=click.Choice(ROLES), help="At most the user's own role.")
@click.option("--name", default="", help="A label to recognise the token by.")
@click.option(
    "--jobs",
    multiple=True,
    metavar="PATTERN",
    help="Limit the token to jobs whose name matches PATTERN (* any characters, ? one); repeat for more. "
    "Without it the token reaches every job.",
)
@click.option("--expires-in-days", type=click.IntRange(1, 3650), help="Default: it does not expire.")
@json_option
@click.pass_obj
def create(settings: Settings, user, role, name, jobs, expires_in_days):
    """Creates a token for USER (a new user is created with ROLE); prints its key, which is shown this once.

    The key alone goes to standard output (KEY=$(shardline tokens create ...)),
    what was made to standard error. With --json, the server's answer, key included.
    """
    body = {"user": user, "role": role, "name": name, "jobs": list(jobs), "expires_in_days": expires_in_days}
    made = settings.client.create_token(body)

    def text():
        described = _describe(made)
        if made["user_created"]:
            click.echo(f"created user {made['user']!r} with role {made['role']}", err=True)
        click.echo(
            f"token {made['id']} ({described['prefix']}) for {made['user']}: role {made['role']}, jobs "
            f"{described['jobs']}, expires {described['expires']}. Store the key now: it is not shown again.",
            err=True,
        )
        return made["key"]

    emit(settings, made, text)


@tokens.command("revoke")
@click.argument("token_id", type=click.IntRange(0), metavar="ID")
@click.option("--current", is_flag=True, help="Revoke it even if it is the token this command runs with.")
@json_option
@click.pass_obj
def revoke(settings: Settings, token_id, current):
    """Revokes token ID (from `tokens list`): it stops working at once."""
    done = settings.client.revoke_token(token_id, current=current)
    emit(settings, done, lambda: f"revoked token {done['id']} ({done['prefix']}…) of {done['user']}")
