"""The code blocks of README.md and docs/*.md, and what each is: a command, a script, or data.

A fence names its language; the words after it say how a test treats it:

- ``sh`` / ``bash`` (commands) and ``python`` (scripts) run, in the order of
  their page, from a copy of what a newcomer has after ``make run``
  (tests/docs/test_every_code_block_runs.py);
- ``fragment``: a piece of a larger script (a model of yours, a process group
  of a launcher): compiled (``python``) or parsed by ``bash -n``, not run. The
  exception: most blocks run;
- ``dry-run``: commands that cannot run inside the suite (``make test``,
  ``pytest``): each line is checked without running it (``make -n``,
  ``pytest --collect-only``);
- ``run-by:tests/...py``: a test of its own runs these commands (it reads
  them from the page with :func:`blocks_run_by`), with what they need that
  the page runner has not (a launcher, the image's environment);
- ``text``, ``yaml``, ``json``, ``ini``: output, formats and configuration,
  not run.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COMMANDS = {"sh", "bash"}
SCRIPTS = {"python"}
DATA = {"text", "yaml", "json", "ini", "toml"}
FLAGS = {"fragment", "dry-run"}


@dataclass(frozen=True)
class Block:
    path: str  # relative to the repository
    line: int  # of the opening fence, 1-based
    language: str
    flags: tuple[str, ...]
    text: str

    @property
    def id(self) -> str:
        return f"{self.path}:{self.line}"

    @property
    def runs(self) -> bool:
        return self.language in COMMANDS | SCRIPTS

    @property
    def run_by(self) -> str | None:
        return next((flag.split(":", 1)[1] for flag in self.flags if flag.startswith("run-by:")), None)

    @property
    def how(self) -> str:
        """run, fragment, dry-run, run-by or data."""
        if not self.runs:
            return "data"
        if self.run_by:
            return "run-by"
        return next((flag for flag in self.flags if flag in FLAGS), "run")

    def commands(self) -> list[list[str]]:
        """Each command line as words (comments dropped; a trailing backslash joins lines)."""
        lines, current = [], ""
        for raw in self.text.splitlines():
            if raw.rstrip().endswith("\\"):
                current += raw.rstrip()[:-1] + " "
                continue
            words = shlex.split(current + raw, comments=True)
            current = ""
            if words:
                lines.append(words)
        return lines


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def blocks_of(path: Path) -> list[Block]:
    from markdown_it import MarkdownIt

    parser = MarkdownIt("commonmark")
    found = []
    for token in parser.parse(path.read_text()):
        if token.type != "fence":
            continue
        language, *flags = token.info.split() or [""]
        if language.startswith("{"):
            continue  # a MyST directive ({toctree}, {include}...), not code
        found.append(Block(path.relative_to(ROOT).as_posix(), token.map[0] + 1, language, tuple(flags), token.content))
    return found


def all_blocks() -> list[Block]:
    return [block for path in pages() for block in blocks_of(path)]


def blocks_run_by(test_file: str) -> list[Block]:
    """The blocks whose fence says ``run-by:`` this test file."""
    relative = Path(test_file).resolve().relative_to(ROOT).as_posix()
    return [block for block in all_blocks() if block.run_by == relative]
