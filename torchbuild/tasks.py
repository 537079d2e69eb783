"""torchbuild's tasks, one Invoke namespace for both entry points: `inv` in torchbuild's own repo
(tasks.py, the project is the repo) and the installed `torchbuild` command (program.py, the project
is found from the current folder: config.locate). Each task parses its flags and calls torchbuild
through cli.main; no logic here."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from invoke.collection import Collection
from invoke.tasks import task

from . import buildflags, cli


def _root(c: Any) -> Path | None:
    """The project folder the namespace was made for; None: find it from the current folder."""
    root = c.config.get("torchbuild", {}).get("root")
    return Path(root) if root else None

@task(help={
    "url": "repository to clone (default: source.url)",
    "ref": "branch, tag or commit to check out (default: source.ref; else the commit the project pins for its "
           "pytorch/ submodule, or the remote's default branch)",
    "path": "checkout folder (default: source.path; with --url, the url's last part, as git clone names it)",
    "jobs": "submodules fetched at once (default: 4 x cores, at most 16)",
    "depth": "shallow clone with this much history (turns the mirror cache off)",
    "shallow-submodules": "clone submodules with depth 1",
    "no-cache": "do not use or fill the mirror cache",
    "force-skip": "exit 0 even when submodules holding work were left alone",
    "dry-run": "print the commands, run nothing",
    "verbose": "show every git command",
})
def clone(c, url=None, ref=None, path=None, jobs=None, depth=None, shallow_submodules=False,
          no_cache=False, force_skip=False, dry_run=False, verbose=False):
    """Clone the source with every nested submodule: parallel, resumable, through mirrors."""
    cli.main(_root(c), "clone.clone", verbose=verbose, dry_run=dry_run, force_skip=force_skip, flags={
        "source.url": url, "source.ref": ref, "source.path": path, "git.jobs": jobs, "git.depth": depth,
        "git.shallow_submodules": shallow_submodules or None, "git.cache": False if no_cache else None,
    })


@task(help={
    "path": "checkout folder (default: source.path)",
    "jobs": "submodules fetched at once",
    "no-cache": "do not use or fill the mirror cache",
    "force-skip": "exit 0 even when submodules holding work were left alone",
    "dry-run": "print the commands, run nothing",
    "verbose": "show every git command",
})
def sync(c, path=None, jobs=None, no_cache=False, force_skip=False, dry_run=False, verbose=False):
    """Sync submodule urls and update them to the recorded commits, never clobbering work."""
    cli.main(_root(c), "clone.sync", verbose=verbose, dry_run=dry_run, force_skip=force_skip, flags={
        "source.path": path, "git.jobs": jobs, "git.cache": False if no_cache else None,
    })


@task(name="config")
def show_config(c):
    """Print the effective configuration and where each value came from."""
    cli.main(_root(c), "config.show")


@task(help={"path": "where to put the demo (default: <cache dir>/demo)", "verbose": "show every command",
            "legacy": "shape it like PyTorch 1.10 and build it on Python 3.6",
            "era": "main (default: scikit-build-core, as PyTorch 2.14 and main) or 2.13 (setup.py)",
            "units": "translation units in its core library (default 24; e.g. 2000 to measure relinks at scale)",
            "size": "demo (default) or pytorch: PyTorch's counts (5,000 units, 9,000 installed headers, 2,000 "
                    "modules, a 300 MB libtorch, a codegen input 1,000 units include)",
            "pad-mb": "megabytes of libtorch's bytes on top of its code (pytorch: 300; 1000 for a CUDA build's "
                      "libtorch_cuda, 4000 for a debug libtorch_cpu)"})
def demo(c, path=None, legacy=False, verbose=False, units=None, era="main", size="demo", pad_mb=None):
    """Run the whole job on the embedded demo project (a small PyTorch-shaped upstream)."""
    cli.main(_root(c), "demo.demo", verbose=verbose, path=path, legacy=legacy, units=int(units) if units else None,
             era=era, size=size, pad_mb=int(pad_mb) if pad_mb is not None else None)


PATCH_HELP = {"path": "the checkout (default: source.path)", "patches": "folder holding `series` (default: patches/)"}
DRY_RUN = buildflags.DRY_RUN


@task(name="apply", default=True, help={**PATCH_HELP, **DRY_RUN})
def patch_apply(c, path=None, patches=None, dry_run=False):
    """Apply the series not yet applied, as commits on branch torchbuild/patches; all or nothing."""
    cli.main(_root(c), "patch.apply", path=path, patches_dir=patches, dry_run=dry_run)


@task(name="status", help=PATCH_HELP)
def patch_status(c, path=None, patches=None):
    """Show each series entry: applied, not applied, or does not apply."""
    cli.main(_root(c), "patch.status", path=path, patches_dir=patches)


@task(name="revert", help={**PATCH_HELP, **DRY_RUN})
def patch_revert(c, path=None, patches=None, dry_run=False):
    """Take the applied series back off, leaving no trace; unrelated work is kept."""
    cli.main(_root(c), "patch.revert", path=path, patches_dir=patches, dry_run=dry_run)


@task(name="export", help={**PATCH_HELP, "since": "the commit the local changes start from (default: the base)"})
def patch_export(c, path=None, patches=None, since=None):
    """Write the local commits on top of the base as numbered patches; rewrite the series."""
    cli.main(_root(c), "patch.export", path=path, patches_dir=patches, since=since)


@task(name="list", default=True)
def cuda_list(c):
    """List every CUDA toolkit on the machine (version, root, nvcc, cuDNN, default)."""
    cli.main(_root(c), "toolchain.cuda_list")


@task(name="env", help={"version": "13.0, 13 (newest 13.x), auto or none"})
def cuda_env(c, version):
    """Print export lines selecting a toolkit: eval "$(inv cuda.env 13.0)"."""
    cli.main(_root(c), "toolchain.cuda_env", version=version)


@task(name="install", help={"version": "13.0, or 13 for the newest 13.x", **DRY_RUN})
def cuda_install(c, version, dry_run=False):
    """Assemble a CUDA 13.x toolkit from NVIDIA's PyPI wheels into the cache dir (no sudo)."""
    cli.main(_root(c), "toolchain.cuda_install", version=version, dry_run=dry_run)


@task
def pythons(c):
    """List every Python interpreter found (PATH, pyenv, conda, uv, /usr/bin)."""
    cli.main(_root(c), "toolchain.pythons")


@task(help={"json": "print JSON instead of the table"})
def doctor(c, json=False):
    """Check what the machine has for a build: tools, compilers, CUDA, GPUs, Pythons, disk, memory."""
    cli.main(_root(c), "toolchain.doctor", as_json=json)


@task(iterable=["set"], help=buildflags.HELP)
def build(c, cuda=None, python=None, env=None, debug=False, rel_with_deb_info=False, jobs=None, arch=None,
          wheel=False, clean=False, set=None, force=False, path=None, dist=None, rerun=False, dry_run=False,
          verbose=False, record=False, part="all", profile=False, explain=False, yes=False, torch=None,
          debug_files=None, sanitize=None):
    """Build the checkout incrementally (develop mode) for one Python x CUDA, with ccache and logs."""
    buildflags.run_build(_root(c), cuda=cuda, python=python, env=env, debug=debug, rel_with_deb_info=rel_with_deb_info,
                         jobs=jobs, arch=arch, wheel=wheel, clean=clean, set=set, force=force, path=path, dist=dist,
                         rerun=rerun, dry_run=dry_run, verbose=verbose, record=record, part=part, profile=profile,
                         explain=explain, yes=yes, torch=torch, debug_files=debug_files, sanitize=sanitize)


@task(name="warm", help={"status": "list this user's warm processes (the default)",
                          "stop": "tell each warm process to exit"})
def warm_process(c, status=False, stop=False):
    """The warm process behind `torchbuild build`: list it, or stop it (TORCHBUILD_WARM=0 turns it off)."""
    from . import warm

    sys.exit(warm.report(stop=stop))


@task(iterable=["good", "set"], help={
    "good": "a commit that works (repeatable)",
    "bad": "a commit that is broken (default: HEAD)",
    "cuda": buildflags.HELP["cuda"], "python": buildflags.HELP["python"], "debug": buildflags.HELP["debug"],
    "rel-with-deb-info": buildflags.HELP["rel-with-deb-info"], "jobs": buildflags.HELP["jobs"],
    "arch": buildflags.HELP["arch"], "set": buildflags.HELP["set"], "path": "the checkout (default: source.path)",
    "resume": "go on with the bisection where it stopped (Ctrl-C, kill -9, a reboot)",
    "reset": "end the bisection: remove its worktree, env, build tree and logs",
    "nightly": "also take nightly wheels (nightly.index_url) built from a commit, or from one differing in Python only",
    "verbose": "show every command",
})
def bisect(c, good=None, bad=None, cuda=None, python=None, debug=False, rel_with_deb_info=False, jobs=None, arch=None,
           set=None, path=None, resume=False, reset=False, nightly=False, verbose=False):
    """Find the commit that broke it: inv bisect --good REF --bad REF -- COMMAND (exit 0 good, 125 skip, else bad).

    Runs in a worktree of its own; each step gets the commit's binaries the cheapest correct way (kept, the
    Python-only difference over kept binaries, an incremental build) and checks their version first."""
    argv = sys.argv[sys.argv.index("--") + 1:] if "--" in sys.argv else []  # invoke's remainder loses quoting
    cli.main(_root(c), "bisect.bisect", verbose=verbose, flags={
        "build.cuda": cuda, "build.python": python, "build.jobs": jobs, "build.arch": arch, "source.path": path,
    }, good=good or [], bad=bad, argv=argv, debug=debug, rel_with_deb_info=rel_with_deb_info, sets=set or [],
        resume=resume, reset=reset, nightly=nightly)


@task(help={
    "python": "3.X or a path (default: build.python, else torchbuild's own)",
    "cuda": "the nightly's flavour: 13.0 (cu130), none (cpu), auto (the newest toolkit here, else cpu)",
    "version": "this nightly version (default: the newest built from a commit in the checkout's history)",
    "checkout": "start this new branch at the commit of the newest nightly (needs a clean tree)",
    "path": "the checkout (default: source.path)", **DRY_RUN,
})
def nightly(c, python=None, cuda=None, version=None, checkout=None, path=None, dry_run=False):
    """Python-only development: the prebuilt nightly matching the checkout, nothing compiled.

    The nightly goes into a managed env and its compiled outputs into the checkout; `inv build` switches
    away and back."""
    cli.main(_root(c), "nightly.run_nightly", flags={"build.python": python, "build.cuda": cuda,
                                                     "source.path": path}, version=version, branch=checkout,
             dry_run=dry_run)


@task(name="clean", help={"all": "every kept configuration too, the matrix's idle slots, a finished bisection and "
                                  "the store's entries no env links to",
                          "path": "the checkout (default: source.path)",
                          "config": "one configuration, e.g. py3.12-cpu-release",
                          "older-than": "the kept configurations not used for this many days",
                          "keep": "keep the N most recently used configurations (the current one among them)",
                          **DRY_RUN})
def clean_trees(c, all=False, config=None, path=None, older_than=None, keep=None, dry_run=False):
    """Remove build trees (never sources); say what and how many bytes."""
    cli.main(_root(c), "build.clean", flags={"source.path": path}, all_trees=all, config=config, dry_run=dry_run,
             older_than=older_than, keep=keep)


@task(name="trees", help={"path": "the checkout (default: source.path)", "json": "as JSON, for scripts"})
def list_trees(c, path=None, json=False):
    """List what torchbuild keeps on disk, measured, and what removes each: trees, slots, store, caches.

    Each configuration's size, when it was last built and used, its env, the budget (trees.max_gb); then the
    matrix's slots, the bisection, the store and the compiler cache."""
    cli.main(_root(c), "build.trees", flags={"source.path": path}, json_out=json)


ENV_HELP = {"python": "3.X or a path (default: torchbuild's own Python)", "name": "env name (default: py3.X)",
            "backend": "venv, uv, conda, mamba or micromamba (default: matrix.backend)"}


@task(name="create", default=True, help={**ENV_HELP, **DRY_RUN})
def env_create(c, python=None, name=None, backend=None, dry_run=False):
    """Create a managed build env with the checkout's build deps (idempotent)."""
    cli.main(_root(c), "env.create", flags={"matrix.backend": backend}, python=python, name=name, dry_run=dry_run)


@task(name="list")
def env_list(c):
    """List managed envs: name, Python, backend, path, deps up to date."""
    cli.main(_root(c), "env.list_envs")


NAME_HELP = {"name": "the managed env, e.g. py3.12 (inv env.list names them)"}


@task(name="remove", help={**NAME_HELP, "yes": "do not ask", **DRY_RUN})
def env_remove(c, name, yes=False, dry_run=False):
    """Remove a managed env."""
    cli.main(_root(c), "env.remove", name=name, yes=yes, dry_run=dry_run)


@task(name="activate", aliases=["shell"], help={**NAME_HELP, "shell": "bash, zsh, fish or csh (default: $SHELL)"})
def env_activate(c, name, shell=None):
    """Print the line that activates a managed env: eval "$(inv env.activate py3.12)"."""
    cli.main(_root(c), "env.activate", name=name, shell=shell)


@task(name="run", help=NAME_HELP)
def env_run(c, name):
    """Run a command inside a managed env: inv env.run py3.12 -- python -c 'import torch'."""
    argv = sys.argv[sys.argv.index("--") + 1:] if "--" in sys.argv else []  # invoke's remainder loses quoting
    cli.main(_root(c), "env.run_in", name=name, argv=argv)


@task(name="matrix", help={
    "failed": "run again only the sessions that failed last time (dist/matrix-summary.json)",
    "session": "a nox session or prefix, e.g. build-3.12 (repeatable; default: every build session)",
    "force": "build combinations the compatibility table rejects",
    "rerun": "run sessions that are up to date too",
    "parallel": "sessions side by side (default: matrix.parallel, else the job budget, at least 4; 1: one by one)",
    **DRY_RUN,
}, iterable=["session"])
def run_matrix(c, failed=False, session=None, force=False, rerun=False, parallel=None, dry_run=False):
    """Run the nox build matrix side by side under one job budget: one wheel per Python x CUDA.

    Prints the summary; sessions whose inputs are unchanged are not run again."""
    cli.main(_root(c), "matrix.matrix", failed=failed, sessions=session or [], force=force, rerun=rerun,
             parallel=int(parallel) if parallel else None, dry_run=dry_run)


@task(name="matrix")
def ci_matrix(c):
    """The CI build matrix as JSON: to $GITHUB_OUTPUT on GitHub Actions, else stdout.

    On GitHub Actions as matrix= and count=; sessions no hosted runner can provision go to ci.runner, or
    are left out with the reason."""
    cli.main(_root(c), "ci.matrix")


@task(name="gitlab")
def ci_gitlab(c):
    """Print a GitLab CI job over every build session (`parallel: matrix`, ci/run-session.sh)."""
    cli.main(_root(c), "ci.gitlab")


@task(name="provision", help={"session": "the nox session, e.g. \"build-3.12(cuda='13.0')\""})
def ci_provision(c, session):
    """Give this runner what the session needs and it lacks: its CUDA toolkit (13.x from PyPI, no sudo)."""
    cli.main(_root(c), "ci.provision", session=session)


@task(name="summary")
def ci_summary(c):
    """The matrix summary as Markdown: to $GITHUB_STEP_SUMMARY when set, else stdout."""
    cli.main(_root(c), "ci.summary")


def namespace(root: Path | None) -> Collection:
    """Every task, for the project at `root` (None: the one around the current folder)."""
    ns = Collection(clone, sync, show_config, demo, pythons, doctor, build, bisect, nightly, clean_trees,
                    list_trees, run_matrix, warm_process)
    ns.add_collection(Collection("env", env_create, env_list, env_remove, env_activate, env_run))
    ns.add_collection(Collection("cuda", cuda_list, cuda_env, cuda_install))
    ns.add_collection(Collection("patch", patch_apply, patch_status, patch_revert, patch_export))
    ns.add_collection(Collection("ci", ci_matrix, ci_gitlab, ci_provision, ci_summary))
    ns.configure({"torchbuild": {"root": str(root) if root else None}})
    return ns
