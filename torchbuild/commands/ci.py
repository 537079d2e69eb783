"""`inv ci.*`: the CI matrix for GitHub Actions and GitLab, the session's provisioning, the summary."""

from __future__ import annotations

import os
from pathlib import Path

from .. import ci
from .. import console as _console
from ..config import Config
from ..errors import TorchbuildError
from ..summary import read_summary


def append(variable: str, text: str) -> bool:
    """Append to the file a CI names in `variable` ($GITHUB_OUTPUT, $GITHUB_STEP_SUMMARY); False if unset."""
    target = os.environ.get(variable)
    if not target:
        return False
    with open(target, "a") as fh:
        fh.write(text)
    return True


def matrix(cfg: Config) -> int:
    """The build job's matrix (`matrix=` and `count=` to $GITHUB_OUTPUT, else stdout); the sessions left
    out, and why, to the job summary."""
    con = _console.get()
    jobs = ci.plan(cfg)
    data = ci.github_matrix(jobs)
    count = sum(1 for j in jobs if j.runs_on)
    if not append("GITHUB_OUTPUT", f"matrix={data}\ncount={count}\n"):
        con.result(data)
    missing = ci.left_out(jobs)
    if missing and not append("GITHUB_STEP_SUMMARY", "\n".join(missing) + "\n"):
        for line in missing:
            con.info(line)
    con.info(f"{count} of {len(jobs)} sessions in the matrix")
    return 0


def gitlab(cfg: Config) -> int:
    """Print a GitLab CI job (`parallel: matrix`) over every session."""
    _console.get().result(ci.gitlab_snippet(ci.plan(cfg)).rstrip())
    return 0


def provision(cfg: Config, session: str) -> int:
    """Give this runner the session's CUDA toolkit when none is installed (13.x from PyPI, no sudo)."""
    from ..toolchain import cuda as cudas

    job = next((j for j in ci.plan(cfg) if j.session == session), None)
    if job is None:
        raise TorchbuildError(f"no build session '{session}' in the matrix", "list them with `nox -l`")
    if job.cuda in ("none", "cpu"):
        return 0
    found = [t for t in cudas.for_config(cfg, os.environ) if t.usable and cudas.major_minor(t.version) == job.cuda]
    if found:
        _console.get().info(f"CUDA {job.cuda} is here: {found[0].root}")
        return 0
    from .toolchain import cuda_install

    return cuda_install(cfg, job.cuda)


def summary(cfg: Config) -> int:
    """The matrix summary as Markdown: to $GITHUB_STEP_SUMMARY when set, else stdout."""
    problems: list[str] = []
    records = read_summary(cfg.root, problems)
    for problem in problems:
        _console.get().warn(f"left out of the summary: {problem}")
    if not records:
        _console.get().info(f"no {Path('dist') / 'matrix-summary.json'} yet: nothing to summarise")
        return 0
    text = ci.summary_markdown(records)
    if not append("GITHUB_STEP_SUMMARY", "### torchbuild matrix\n\n" + text):
        _console.get().result(text.rstrip())
    return 0
