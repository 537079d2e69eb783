#!/usr/bin/env bash
# Run one torchbuild build session the same way on any CI (GitHub Actions, GitLab, Buildkite):
#   ci/run-session.sh "build-3.12(cuda='13.0')"
# Installs torchbuild with the `python3` on PATH (the one the job provisioned), gives the runner the
# session's CUDA toolkit when it has none (13.x from PyPI, no sudo), clones the source (through the
# configured mirrors and cache), runs the session, and leaves the wheel in dist/build-<python>-cuda-<cuda>/, the logs
# and build records in logs/, the summary in dist/ (and as Markdown in $GITHUB_STEP_SUMMARY, if set).
set -euo pipefail
session="${1:?usage: ci/run-session.sh SESSION (see: nox -l, or inv ci.matrix)}"
cd "$(dirname "$0")/.."
python3 -m venv .venv-ci
.venv-ci/bin/python -m pip install -q -e .
export PATH="$PWD/.venv-ci/bin:$PATH"
trap 'inv ci.summary || true' EXIT
inv ci.provision "$session"
inv clone
nox --noxfile noxfile.py -s "$session"
ls -l dist/*/*.whl
