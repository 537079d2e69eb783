"""`build`'s flags in one place, and the lean path of the installed command: `torchbuild build --cuda none`
(long flags only, as Invoke would parse them) runs without importing Invoke or the task collection, a
tenth of a second that a no-op build would otherwise spend before its check. Anything else (a short flag,
--help, an unknown flag, a flag value that starts with a dash) goes to Invoke's parser, which says what is
wrong; tasks.py's `build` task takes the same flags (test_program checks the two never drift)."""

from __future__ import annotations

TYPE_CHECKING = False  # neither module on the lean path (they cost a no-op 5 ms)
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

DRY_RUN = {"dry-run": "print the commands, run nothing"}
HELP = {
    "cuda": "CUDA toolkit: 13.0, 13 (newest 13.x), auto, or none for a CPU build",
    "python": "3.X (a managed env for it) or a path to an interpreter",
    "env": "a managed env by name (inv env.list)",
    "debug": "DEBUG=1 build",
    "rel-with-deb-info": "REL_WITH_DEB_INFO=1 build",
    "debug-files": "compile these sources again with -O0 -g in this configuration, relink, no reconfigure: globs "
                   "separated by ';' (aten/src/ATen/native/Foo.cpp;c10/core/*.cpp; a path from the current folder "
                   "too), or @FILE with one a line; the next build without it puts them back optimized",
    "sanitize": "address, thread or leak: a configuration of its own built with PyTorch's USE_ASAN (ASAN and UBSan), "
                "USE_TSAN or USE_LSAN; `use it` and `inv env.run` preload the compiler's sanitizer runtime",
    "jobs": "MAX_JOBS (default: from cores and free memory)",
    "arch": "TORCH_CUDA_ARCH_LIST, e.g. \"8.0;9.0\" (default: local GPUs, else the toolkit's)",
    "wheel": "build a wheel into dist/ (local version +git<sha7>.cu130 / .cpu)",
    "clean": "start this configuration's tree from scratch",
    "set": "KEY=VALUE for the build environment (repeatable), e.g. --set USE_DISTRIBUTED=0",
    "force": "build a combination the compatibility table rejects",
    "path": "the checkout (default: source.path)",
    "dist": "folder for --wheel (default: dist/)",
    "rerun": "run the build command even when everything is up to date",
    "torch": "build this extension against the torch a PyTorch checkout torchbuild builds holds now (its "
             "configuration's Python, CUDA, build type and env), e.g. ../pytorch",
    "part": "core or python: one half of the split build (BUILD_LIBTORCH_WHL / BUILD_PYTHON_ONLY)",
    "record": "print the record of the last build (commit, patches, packages, tools, environment) and exit",
    "profile": "print where the last build's time went (phases, slowest units and links) and its timeline",
    "explain": "say what the build would run and why (grouped by cause), and about how long; build nothing",
    "yes": "do not ask before a build estimated over build.confirm_over minutes",
    **DRY_RUN,
    "verbose": "stream the build's raw output",
}
SWITCHES = {"debug", "rel_with_deb_info", "wheel", "clean", "force", "rerun", "dry_run", "verbose", "record",
            "profile", "explain", "yes"}  # on when named, no value
DEFAULTS: dict[str, Any] = {name.replace("-", "_"): False if name.replace("-", "_") in SWITCHES else None
                            for name in HELP}
DEFAULTS["part"] = "all"


def run_build(root: Path | None, **given: Any) -> None:
    """`build` with its flags (`set` repeatable, a list), whichever parser read them."""
    from . import cli

    kw = {**DEFAULTS, **given}
    cli.main(root, "build.build", verbose=kw["verbose"], flags={
        "build.cuda": kw["cuda"], "build.python": kw["python"], "build.jobs": kw["jobs"], "build.arch": kw["arch"],
        "source.path": kw["path"], "build.torch": kw["torch"],
    }, debug=kw["debug"], rel_with_deb_info=kw["rel_with_deb_info"], wheel=kw["wheel"], clean=kw["clean"],
        sets=kw["set"] or [], env_name=kw["env"], force=kw["force"], dry_run=kw["dry_run"], dist=kw["dist"],
        rerun=kw["rerun"], show="record" if kw["record"] else "profile" if kw["profile"] else "", part=kw["part"],
        explain=kw["explain"], yes=kw["yes"], debug_files=[kw["debug_files"]] if kw["debug_files"] else [],
        sanitize=kw["sanitize"] or "")


def parse(args: list[str]) -> dict[str, Any] | None:
    """`build`'s arguments (after the word) as Invoke reads long flags (--name value, --name=value, --set
    repeated); None where only Invoke's parser should answer."""
    given: dict[str, Any] = {}
    items = iter(args)
    for arg in items:
        name, eq, value = arg[2:].partition("=")
        key = name.replace("-", "_")
        if not arg.startswith("--") or name not in HELP:
            return None
        if key in SWITCHES:
            if eq:
                return None
            given[key] = True
            continue
        if not eq:
            value = next(items, "")
            if not value or value.startswith("-"):
                return None
        if key == "set":
            given.setdefault("set", []).append(value)
        else:
            given[key] = value
    return given
