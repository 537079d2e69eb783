"""The build driver is read from a checkout's files, never guessed (docs/build.md, "Build drivers"): PyTorch's
setup.py up to 2.13, scikit-build-core on 2.14 and main, any other PEP 517 backend. On the demo's own files of
both eras and on small projects, without building."""

from __future__ import annotations

from pathlib import Path

import pytest

from torchbuild.builder.drivers import detect
from torchbuild.demo import project_files


def write(root: Path, files: dict[str, str | bytes]) -> Path:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content) if isinstance(content, bytes) else path.write_text(content)
    return root


@pytest.mark.parametrize(("era", "driver"), [("2.13", "SetuptoolsEra"), ("main", "ScikitBuildCore")])
def test_each_era_of_the_demo_gets_its_driver(tmp_path, era, driver):
    checkout = write(tmp_path, project_files("pytorch", units=1, era=era))
    found = detect(checkout)
    assert type(found).__name__ == driver and found.pytorch()


@pytest.mark.parametrize(("files", "driver", "backend"), [
    ({"pyproject.toml": "[build-system]\nbuild-backend = 'hatchling.build'\n"}, "Pep517", "hatchling.build"),
    ({"setup.py": "from setuptools import setup\nsetup()\n"}, "Pep517", "setuptools.build_meta:__legacy__"),
    ({"pyproject.toml": "[build-system]\nbuild-backend = 'scikit_build_core.build'\n"}, "ScikitBuildCore",
     "scikit_build_core.build"),
    # a setup.py that mentions the split build is PyTorch's, whatever lies beside it
    ({"setup.py": "import os\nos.environ.get('BUILD_LIBTORCH_WHL')\n"}, "SetuptoolsEra", None),
])
def test_other_projects_get_the_driver_their_files_name(tmp_path, files, driver, backend):
    found = detect(write(tmp_path, files))
    assert type(found).__name__ == driver
    if backend:
        assert found.backend == backend
    assert found.pytorch() == (driver == "SetuptoolsEra")


@pytest.mark.parametrize(("era", "reason", "not_reason"), [
    ("main", "BUILD_PYTHON_ONLY=1 makes the Python part require minitorch_no_python==<its version>", "py3-none-any"),
    ("2.13", "tagged py3-none-any, and its editable install fails", "_no_python=="),
])
def test_the_split_builds_refusal_gives_the_reason_of_the_checkouts_era(tmp_path, era, reason, not_reason):
    """Issue 58, item 3: on 2.14 and main the core's wheel installs (cp3X, editable works); what stops the split
    there is the fixed [project] name and the Python part's requirement on <name>_no_python."""
    from torchbuild.builder.request import split_refusal

    checkout = write(tmp_path, project_files("pytorch", units=1, era=era))
    pyproject = checkout / "pyproject.toml"
    if "[project]" not in pyproject.read_text():
        pyproject.write_text(pyproject.read_text() + '\n[project]\nname = "minitorch"\nversion = "1.0"\n')
    why = split_refusal(checkout)
    assert why is not None and reason in why and not_reason not in why
