"""The split build's second half: the Python part links against the core installed in its env.

PyTorch's setup.py sets LIBTORCH_LIB_PATH to `<checkout>/torch/lib` for BUILD_PYTHON_ONLY=1, and CMake
finds the core's libraries there only (`find_library(... NO_DEFAULT_PATH)`): a build slot, or a checkout
that built another configuration since, lacks them. They come from the core's wheel, installed in the
env (`<package>_no_python`, LIBTORCH_PACKAGE_NAME), which is also what the Python part's wheel requires.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from ..errors import TorchbuildError
from ..wheels import record_paths
from .plan import Plan


def installed_core(plan: Plan) -> tuple[Path, list[str]]:
    """The split build's core as installed in the env (`<package>_no_python`, setup.py's
    LIBTORCH_PACKAGE_NAME): its site-packages and the files its RECORD lists."""
    for site in sorted(plan.env.prefix.glob("lib/python*/site-packages")):
        for info in site.glob("*_no_python-*.dist-info"):
            if (info / "RECORD").is_file():
                return site, record_paths(info / "RECORD")
    raise TorchbuildError(f"the Python part (BUILD_PYTHON_ONLY=1) builds against the core installed in its env, "
                          f"and {plan.env.prefix} has no {plan.package}_no_python",
                          "build the core first: inv build --part core --wheel, and install its wheel into that env "
                          "(inv matrix does both)")


def place_core(plan: Plan) -> int:
    """Put the installed core's libraries where setup.py's LIBTORCH_LIB_PATH points (<checkout>/<package>/lib),
    as a build slot or a checkout that built another configuration lacks them; how many there are."""
    site, files = installed_core(plan)
    libs = [f for f in files if f.startswith(f"{plan.package}/lib/")]
    for rel in libs:
        src, dest = site / rel, plan.checkout / rel
        if not dest.exists() or dest.stat().st_size != src.stat().st_size \
                or dest.stat().st_mtime_ns != src.stat().st_mtime_ns:
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest)
    return len(libs)
