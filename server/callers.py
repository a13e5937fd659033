"""Who is asking: the caller of a service, and which jobs a token's scope lets it see.

A token may be limited to jobs by name patterns (``create_token trainer
--role worker --jobs 'ctr-*'``): ``*`` stands for any run of characters,
``?`` for one, everything else for itself. A pattern is turned into one
anchored regular expression here, and that expression is the rule
everywhere: Python matches it for the API's job lookups, Postgres for the
lease statements (``shardline_job_in_scope``, server/sql/schema.sql), so the two
can never disagree about a name. Only literal characters, ``.*`` and ``.``
appear in it, escaped the same way for both engines (a backslash before an
ASCII character that is not a letter or digit means that character in both).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

# Longest pattern and most patterns a token may carry: scopes are short lists
# of name families, and every lease statement of a scoped token matches them.
MAX_PATTERN = 200
MAX_PATTERNS = 20


def pattern_regex(pattern: str) -> str:
    """The anchored regular expression of a job name pattern (``*`` and ``?`` as wildcards).

    Anchored with \\A and \\Z, which mean the string's ends in both engines
    (Python's ``$`` would also match before a final newline).
    """
    out = ["\\A"]
    for char in pattern:
        if char == "*":
            out.append(".*")
        elif char == "?":
            out.append(".")
        elif char.isalnum() or not char.isascii():
            out.append(char)  # never special in either engine
        else:
            out.append("\\" + char)
    out.append("\\Z")
    return "".join(out)


def check_patterns(patterns: list[str]) -> list[str]:
    """The patterns, stripped; ValueError with a message a person can act on when one is unusable."""
    cleaned = [p.strip() for p in patterns if p.strip()]
    if len(cleaned) > MAX_PATTERNS:
        raise ValueError(f"at most {MAX_PATTERNS} job patterns per token")
    for pattern in cleaned:
        if len(pattern) > MAX_PATTERN:
            raise ValueError(f"a job pattern is at most {MAX_PATTERN} characters")
        if any(not ch.isprintable() for ch in pattern):
            raise ValueError(f"job pattern {pattern!r} contains characters that no job name has")
    return cleaned


@lru_cache(maxsize=1024)
def _compiled(regexes: tuple[str, ...]) -> re.Pattern:
    return re.compile("|".join(f"(?:{r})" for r in regexes), re.DOTALL)


@dataclass(frozen=True)
class Caller:
    """The holder a service acts for: the user whose leases it may touch, and the jobs it may see.

    ``user_id`` None is the server itself (a management command, a test
    calling services): it holds leases as nobody, so no API caller can touch
    them. ``scope`` None sees every job; otherwise the regular expressions of
    the token's patterns (``pattern_regex``), any of which a job name must match.
    """

    user_id: int | None = None
    scope: tuple[str, ...] | None = None

    @classmethod
    def of(cls, user_id: int | None, patterns: list[str] | None) -> "Caller":
        scope = tuple(pattern_regex(p) for p in patterns) if patterns else None
        return cls(user_id, scope)

    def sees(self, job_name: str) -> bool:
        return self.scope is None or _compiled(self.scope).match(job_name) is not None

    @property
    def sql(self) -> dict:
        """The parameters every lease statement takes for its caller: ``holder`` and ``scope``."""
        return {"holder": self.user_id, "scope": list(self.scope) if self.scope is not None else None}


SERVER = Caller()
