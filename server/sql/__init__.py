"""Named SQL statements of the lease hot path, read once from this folder."""

from functools import cache
from pathlib import Path

_HERE = Path(__file__).resolve().parent


@cache
def statement(name: str) -> str:
    return (_HERE / f"{name}.sql").read_text()
