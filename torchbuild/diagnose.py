"""Known build failures (failures.yaml): find them in a build's output, explain them, name the fix,
and say which remedy torchbuild may apply by itself. Pure: data in, data out."""

from __future__ import annotations

import difflib
import functools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from .errors import TorchbuildError
from .run import run


@dataclass(frozen=True)
class Failure:
    id: str
    pattern: re.Pattern[str]
    explain: str
    fix: str
    remedy_set: Mapping[str, str] = field(default_factory=dict)
    remedy_fresh: bool = False


@dataclass(frozen=True)
class Diagnosis:
    failure: Failure
    explain: str
    fix: str

    @property
    def id(self) -> str:
        return self.failure.id

    @property
    def has_remedy(self) -> bool:
        return bool(self.failure.remedy_set) or self.failure.remedy_fresh


@functools.lru_cache(maxsize=None)
def table() -> tuple[Failure, ...]:
    import yaml

    data: dict[str, Any] = yaml.safe_load((Path(__file__).parent / "failures.yaml").read_text())
    out = []
    for item in data["failures"]:
        remedy = item.get("remedy") or {}
        out.append(Failure(item["id"], re.compile(item["pattern"]), item["explain"], item["fix"],
                           {k: str(v) for k, v in (remedy.get("set") or {}).items()}, bool(remedy.get("fresh"))))
    return tuple(out)


def diagnose(output: str, jobs: int = 1) -> list[Diagnosis]:
    """The known failures found in `output`, in table order, with their texts filled in."""
    found = []
    for failure in table():
        m = failure.pattern.search(output)
        if m:
            values = {k: v or "" for k, v in m.groupdict().items()}
            values.update(jobs=str(jobs), half_jobs=str(max(1, jobs // 2)))
            found.append(Diagnosis(failure, failure.explain.format(**values), failure.fix.format(**values)))
    return found


class UnusedVariables:
    """The variables CMake says it did not use ("Manually-specified variables were not used by the project:"),
    read as the build's lines go by: a misspelt option (`--set USE_CUDAA=1`) is otherwise only in the log."""

    HEADER = "Manually-specified variables were not used by the project"

    def __init__(self) -> None:
        self.names: list[str] = []
        self._reading = False

    def feed(self, line: str) -> None:
        text = line.strip()
        if self.HEADER in text:
            self._reading = True
        elif self._reading and text:
            if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", text):
                self.names.append(text)
            else:
                self._reading = False

    def given(self, variables: Iterable[str]) -> list[str]:
        """The unused ones the user gave (--set, build.env, the shell), not those a build script adds."""
        wanted = set(variables)
        return sorted({n for n in self.names if n in wanted})


FORWARDED = ("USE_", "BUILD_")  # what PyTorch's build passes to CMake by prefix (setup.py, EnvVarForwarding.cmake)


def unread_set(checkout: Path, names: Iterable[str]) -> None:
    """`--set` options that no file of the PyTorch checkout names are refused before the build configures (a
    typo costs a reconfigure for nothing, and another to take it back), with the closest names it does use."""
    unread = never_read(checkout, names)
    if not unread:
        return
    words = run(["git", "grep", "-h", "-o", "-w", "--recurse-submodules", "-E", "-e", "(USE|BUILD)_[A-Z0-9_]+",
                 "--", *READERS], cwd=checkout, capture=True, echo=False, check=False).stdout.split()
    close = difflib.get_close_matches(unread[0], sorted(set(words)), n=3, cutoff=0.8)
    raise TorchbuildError(f"--set {unread[0]}: no CMake, Python or TOML file of {checkout.name} names it, so the build "
                          "would configure again for an option nothing reads"
                          + (f" (did you mean {' or '.join(close)}?)" if close else "") + "; nothing was built",
                          "correct the name; one the build reads under a name its files do not spell out can come "
                          f"from the shell instead ({unread[0]}=... inv build), which is not checked")


READERS = ("*.cmake", "*CMakeLists.txt", "*.py", "*.toml", "*.cfg", "*.in")  # the files that would read an option
# (*.in: a `#cmakedefine` template, a *.cmake.in)


def never_read(checkout: Path, names: Iterable[str]) -> list[str]:
    """The options given by prefix (`--set USE_CUDAA=1`) that no CMake, Python or TOML file of the checkout
    (its submodules included) names: where the build forwards every USE_*/BUILD_* into CMake's cache
    (scikit-build-core era: cmake/EnvVarForwarding.cmake), CMake never calls one unused, so this asks the
    code that would read it."""
    return named_nowhere(checkout, [n for n in names if n.startswith(FORWARDED)])


def named_nowhere(checkout: Path, names: Iterable[str]) -> list[str]:
    """The names no file the build reads names: tracked (its submodules too) or not yet added, tools/ and
    templates included. CMake's "not used" alone is no typo: PyTorch's tools/build_pytorch_libs.py reads
    BUILD_CUSTOM_STEP, which setup.py also hands CMake."""
    unread = []
    for name in sorted({n for n in names if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", n)}):
        tracked = run(["git", "grep", "-q", "-F", "-w", "--recurse-submodules", "-e", name, "--", *READERS],
                      cwd=checkout, capture=True, echo=False, check=False)
        if tracked.returncode != 1:  # 0: named somewhere; 128: no git to ask
            continue
        untracked = run(["git", "grep", "-q", "-F", "-w", "--untracked", "-e", name, "--", *READERS],
                        cwd=checkout, capture=True, echo=False, check=False)
        if untracked.returncode == 1:
            unread.append(name)
    return unread
