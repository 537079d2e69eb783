"""The docs site (issue 56) builds with Sphinx, every warning an error: a broken link or a missing page fails."""

from __future__ import annotations

import subprocess
import sys

from ..helpers import REPO


def test_the_site_builds_with_warnings_as_errors(tmp_path):
    done = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-n", "-q", "-b", "html",
                           str(REPO / "docs"), str(tmp_path / "site")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "site" / "reference" / "configuration.html").exists()
