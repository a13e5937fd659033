"""The ``shardline`` command: jobs, their progress and their audit from a shell or a scheduler; API tokens.

It talks to the REST API through the SDK's client (the same retries and
error classes). The server and token come from ``--url``/``--token``, else
``SHARDLINE_URL``/``SHARDLINE_TOKEN``, else the config file
(``shardline config``). People get tables; ``--json`` gives JSON.
Shell completion: ``eval "$(_SHARDLINE_COMPLETE=bash_source shardline)"``
(``zsh_source``, ``fish_source`` for those shells).
"""

from __future__ import annotations

import click

from .. import __version__
from .. import errors as sdk_errors
from .jobs import jobs, snapshots
from .settings import Settings, config_path, save_profile
from .tokens import tokens


class Group(click.Group):
    """Turns the SDK's errors into one line on stderr and exit code 1, not a traceback."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except (sdk_errors.ShardlineError, ValueError) as exc:
            click.echo(f"error: {exc}", err=True)
            raise SystemExit(1) from None


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="shardline")
@click.option("--url", help="The server (default: SHARDLINE_URL, then the config file).")
@click.option("--token", help="An API token (default: SHARDLINE_TOKEN, then the config file).")
@click.option("--profile", default="default", show_default=True, help="The config file's section to use.")
@click.option("--json", "as_json", is_flag=True, help="JSON instead of tables.")
@click.pass_context
def main(ctx, url, token, profile, as_json):
    """Create, watch and audit Shardline jobs; manage API tokens (admin).

    Exit codes: 0 success; 1 an error (the server's message on stderr); 2 a
    usage error; `jobs watch` 3 when the job failed, 4 when it was cancelled.
    """
    ctx.obj = Settings(url, token, profile, as_json)


@main.command("config")
@click.option("--url", required=True, help="The server, e.g. http://shardline.internal:8000")
@click.option("--token", required=True, help="An API token (manage.py create_token NAME --role worker).")
@click.pass_obj
def config(settings: Settings, url, token):
    """Saves a server and token under --profile in the config file (readable by you alone)."""
    path = save_profile(settings.profile, url, token)
    click.echo(f"saved profile {settings.profile!r} to {path}")


main.add_command(jobs)
main.add_command(snapshots)
main.add_command(tokens)

__all__ = ["main", "config_path"]
