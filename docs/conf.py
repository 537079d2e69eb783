"""Sphinx's configuration for torchbuild's docs: Markdown pages (MyST) with the Furo theme.

    nox -s docs                                     (or: sphinx-build -W --keep-going -n docs site)
"""

project = "torchbuild"
author = "the torchbuild developers"
extensions = ["myst_parser"]
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build"]
html_theme = "furo"
html_title = "torchbuild"
myst_heading_anchors = 3  # `[x](build.md#one-verdict)` links reach the page's sections
myst_enable_extensions = ["deflist"]
suppress_warnings: list[str] = []
