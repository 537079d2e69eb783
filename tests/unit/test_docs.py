"""The docs (issue 56): README stays one screen of getting started, the generated reference pages are current, and
every setting and task is in them (tests/integration/test_docs.py builds the site)."""

from __future__ import annotations

import subprocess
import sys

from docs import generate

from ..helpers import REPO


def test_readme_is_a_first_screen_and_links_only_pages_that_exist():
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= 250
    for link in generate.local_links(readme):
        assert (REPO / link).exists(), f"README links {link}, which is not there"


def test_the_generated_pages_are_current():
    done = subprocess.run([sys.executable, str(REPO / "docs" / "generate.py"), "--check"], capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stdout


def test_every_setting_and_every_task_is_in_the_reference():
    from torchbuild.config import SECTIONS
    from torchbuild.tasks import namespace

    config, tasks = generate.configuration(), generate.tasks()
    for section, cls in SECTIONS.items():
        for name in cls.__dataclass_fields__:
            assert f"`{section}.{name}`" in config and f"`TORCHBUILD_{section}_{name}`".upper() in config
    for task in namespace(REPO).task_names:
        assert f"\n## {task}\n" in tasks
