#!/usr/bin/env bash
# Run one nox build session the same way on any CI (GitHub Actions, GitLab, Buildkite):
#   ci/run-session.sh "build-3.12(cuda='13.0')"
# Installs torchbuild, clones the source (through the configured mirrors and cache), runs the
# session, and leaves the wheel in dist/<session>/, the logs in logs/, the summary in dist/.
set -euo pipefail
session="${1:?usage: ci/run-session.sh SESSION (see: nox -l)}"
cd "$(dirname "$0")/.."
python3 -m venv .venv-ci
.venv-ci/bin/python -m pip install -q -e .
export PATH="$PWD/.venv-ci/bin:$PATH"
inv clone
nox --noxfile noxfile.py -s "$session"
ls -l dist/"$session"/ 2>/dev/null || true
