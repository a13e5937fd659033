"""Sphinx configuration of Shardline's docs (make docs).

Markdown through MyST; the settings and API references are generated
(_ext/shardline_reference.py). Nothing is fetched from the network: no
intersphinx, no linkcheck; internal links, cross-references and anchors are
checked by the build, and `make docs` turns every warning into an error.
"""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))
sys.path.insert(0, str(HERE.parent))

from worker_sdk import __version__  # noqa: E402

project = "Shardline"
author = "Shardline's authors"
copyright = "Shardline's authors, Apache-2.0"
version = release = __version__

extensions = ["myst_parser", "shardline_reference"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "_ext", "settings.yaml"]

# Heading anchors for links like page.md#a-heading, checked by the build.
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence"]
# A link to a page or anchor that does not exist is a warning (an error under -W).
nitpicky = True
suppress_warnings = []

html_theme = "furo"
html_title = f"Shardline {release}"
html_static_path = []
html_show_sourcelink = False
