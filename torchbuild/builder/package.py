"""What `import X` tests a build with: the checkout's own top-level package."""

from __future__ import annotations

import re
from pathlib import Path

from ..compat import pyproject


def package_name(checkout: Path, env_prefix: Path | None = None) -> str:
    """What `import X` tests a build: torch for PyTorch; else the project's own top-level package, from
    the env's editable install of this checkout (after a build), its egg-info, its package folders, or
    its distribution name."""
    if (checkout / "torch" / "__init__.py").exists():
        return "torch"
    for direct_url in env_prefix.glob("lib/python*/site-packages/*.dist-info/direct_url.json") if env_prefix else []:
        top_level = direct_url.parent / "top_level.txt"
        if top_level.is_file() and f'"{checkout.as_uri()}"' in direct_url.read_text(errors="replace"):
            names = [n for n in top_level.read_text().split() if not n.startswith(("test", "_"))]
            if names:
                return names[0]
    egg_infos = [*checkout.glob("*.egg-info/top_level.txt"), *checkout.glob("src/*.egg-info/top_level.txt")]
    for top_level in sorted(egg_infos, key=lambda p: p.stat().st_mtime, reverse=True):  # the last build's first
        names = [n for n in top_level.read_text().split() if not n.startswith(("test", "_"))]
        if names:
            return names[0]
    skip = ("test", ".", "_", "doc", "bench", "example", "build", "third_party")
    for pattern in ("*/__init__.py", "src/*/__init__.py", "src/*/__init__.pyi"):
        pkgs = sorted(p.parent.name for p in checkout.glob(pattern) if not p.parent.name.startswith(skip))
        if pkgs:
            return pkgs[0]
    name = str(pyproject(checkout).get("project", {}).get("name") or "")
    if not name and (checkout / "setup.py").is_file():
        m = re.search(r"\bname\s*=\s*[\"']([^\"']+)", (checkout / "setup.py").read_text(errors="replace"))
        name = m.group(1) if m else ""
    if name:
        return re.sub(r"^python[-_]", "", name).replace("-", "_")
    return "torch"
