"""As PyTorch main's setup.py (PR #180248): a shim. The build is scikit-build-core's (pyproject.toml);
`develop` and `install` are forwarded to pip, everything else (bdist_wheel, clean, build --cmake-only) is
refused with the command to use instead."""

import subprocess
import sys

FORWARD = {
    "develop": [sys.executable, "-m", "pip", "install", "-e", ".", "-v", "--no-build-isolation"],
    "install": [sys.executable, "-m", "pip", "install", ".", "-v", "--no-build-isolation"],
}

if __name__ == "__main__":
    command = next((arg for arg in sys.argv[1:] if not arg.startswith("-")), None)
    if command in FORWARD:
        print("WARNING: forwarding 'python setup.py {}' to '{}'".format(command, " ".join(FORWARD[command][1:])),
              file=sys.stderr)
        sys.exit(subprocess.call(FORWARD[command]))
    sys.exit("setup.py {} is no longer supported: minitorch builds with scikit-build-core. Use "
             "'pip install -e . -v --no-build-isolation' to develop, 'python -m build --wheel --no-isolation' "
             "for a wheel, and delete build/ for a fresh configure.".format(command or ""))
