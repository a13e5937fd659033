"""Where the ``shardline`` command finds its server and token: flags, then the environment, then the config file."""

from __future__ import annotations

import configparser
import os
from dataclasses import dataclass, field
from pathlib import Path

from ..client import Client
from ..transport import Transport


def config_path() -> Path:
    """``$SHARDLINE_CONFIG``, else ``$XDG_CONFIG_HOME/shardline/config.ini`` (``~/.config/...``)."""
    if os.environ.get("SHARDLINE_CONFIG"):
        return Path(os.environ["SHARDLINE_CONFIG"])
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "shardline" / "config.ini"


def _profile(name: str) -> dict:
    parser = configparser.ConfigParser()
    parser.read(config_path())
    return dict(parser[name]) if parser.has_section(name) else {}


def save_profile(name: str, url: str, token: str) -> Path:
    path = config_path()
    parser = configparser.ConfigParser()
    parser.read(path)
    parser[name] = {"url": url, "token": token}
    path.parent.mkdir(parents=True, exist_ok=True)
    # Created readable by its owner alone: it holds a token.
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as out:
        parser.write(out)
    return path


@dataclass
class Settings:
    url: str | None
    token: str | None
    profile: str
    as_json: bool
    _client: Client | None = field(default=None, repr=False)

    @property
    def client(self) -> Client:
        if self._client is None:
            saved = _profile(self.profile)
            url = self.url or os.environ.get("SHARDLINE_URL") or saved.get("url")
            token = self.token or os.environ.get("SHARDLINE_TOKEN") or saved.get("token")
            if not url:
                raise ValueError(
                    f"no server: pass --url, set SHARDLINE_URL, or save one with `shardline config` ({config_path()})"
                )
            # A person or a scheduler is waiting: give up on an unreachable server after 30 s, not 2 minutes.
            retry = float(os.environ.get("SHARDLINE_RETRY_SECONDS", "30"))
            self._client = Client(Transport(url, token or "", retry_seconds=retry))
        return self._client
