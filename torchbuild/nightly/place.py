"""A nightly wheel's compiled outputs into the checkout, and the env made to import the checkout.

What goes in: the wheel's files under the package's folder (torch/) that the checkout does not
track and ignores (tools/nightly.py's list, generalised: `torch/*.so`, `torch/lib`, `torch/include`, `torch/bin`,
the generated `.pyi` files, `torch/version.py`: what PyTorch's .gitignore names as the build's). Never a file
the checkout tracks; never one git does not ignore (the wheel's copy of a module the checkout has since removed
or moved, a data file of a source folder: `git status` would list it); never over a file of the user's own.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import zipfile
from dataclasses import dataclass
from pathlib import Path

from ..builder.ownership.moves import within
from ..errors import TorchbuildError
from ..run import run
from ..wheels import env_paths
from .index import compiled_members, refuse_unsafe


def package_folders(checkout: Path, wheel: Path, package: str) -> list[str]:
    """The folders of the wheel that its files may go into: the package's own (torch/), as tools/nightly.py
    places only what lies under it. Another top-level folder of the wheel (.git/, c10/, tools/) is never
    written into, whatever the checkout has there."""
    name = package.replace("-", "_")
    with zipfile.ZipFile(wheel) as whl:
        ships = any(n.startswith(f"{name}/") for n in whl.namelist())
    folder = checkout / name
    return [name] if ships and folder.is_dir() and not folder.is_symlink() else []


def _listed(checkout: Path, argv: list[str], names: list[str] | None = None) -> set[str]:
    result = run(argv, cwd=checkout, capture=True, echo=False, check=False,
                 input="\0".join(names) if names is not None else None)
    return {n for n in result.stdout.split("\0") if n}


@dataclass(frozen=True)
class Placed:
    """What `place` did: the files placed (by size and mtime), and files of the user's own that stood in
    their way, moved aside (never overwritten) into `aside`."""

    files: dict[str, list[int]]
    aside: Path | None = None
    moved: tuple[str, ...] = ()


def place(checkout: Path, wheel: Path, aside: Path, package: str) -> Placed:
    """Put the wheel's compiled outputs into the checkout. A file already where one goes (git ignores it,
    no build of torchbuild's recorded it: a header with notes, a library from a build by hand) is moved
    into `aside` first. All or nothing: a failure takes back what it placed and puts those files back."""
    folders = package_folders(checkout, wheel, package)
    if not folders:
        raise TorchbuildError(f"{wheel.name} has no {package}/ folder the checkout has", "check nightly.package")
    members = compiled_members(wheel, folders)
    refuse_unsafe(wheel, members)
    tracked = _listed(checkout, ["git", "ls-files", "-z", "--", *folders])
    untracked = [m.filename for m in members if m.filename not in tracked]
    linked = next((name for name in untracked if not within(checkout / name, checkout)), None)  # git cannot
    # say whether it ignores a path behind a link: refused before it is asked
    if linked:
        link = next(p for p in (checkout / linked).parents if p.is_symlink())
        raise TorchbuildError(f"{link.relative_to(checkout)} is a link to {os.path.realpath(link)}: the nightly's "
                              f"files ({linked}) would be written outside the checkout", "replace the link by a folder "
                              "(or remove it), then run `inv nightly` again; nothing was placed")
    ignored = _listed(checkout, ["git", "check-ignore", "-z", "--stdin"], untracked) if untracked else set()
    wanted = [info for info in members if info.filename in ignored and not (checkout / info.filename).is_dir()]
    placed: dict[str, list[int]] = {}
    moved: list[str] = []
    try:
        for info in wanted:  # the user's own files first, out of the way: nothing of theirs is overwritten
            dest = checkout / info.filename
            if dest.exists() or dest.is_symlink():
                (aside / info.filename).parent.mkdir(parents=True, exist_ok=True)
                os.replace(dest, aside / info.filename)
                moved.append(info.filename)
        with zipfile.ZipFile(wheel) as whl:
            for info in wanted:
                dest = checkout / info.filename
                dest.parent.mkdir(parents=True, exist_ok=True)
                part = dest.with_name(dest.name + ".torchbuild-part")
                with whl.open(info) as src, open(part, "wb") as out:
                    shutil.copyfileobj(src, out)
                mode = (info.external_attr >> 16) & 0o777
                os.chmod(part, mode or 0o644)
                os.replace(part, dest)
                st = dest.stat()
                placed[info.filename] = [st.st_size, st.st_mtime_ns]
    except BaseException:
        for name in placed:
            with contextlib.suppress(OSError):
                (checkout / name).unlink()
        for name in moved:
            with contextlib.suppress(OSError):
                os.replace(aside / name, checkout / name)
        raise
    return Placed(placed, aside if moved else None, tuple(moved))


def pth_file(python: Path, package: str) -> Path:
    """The .pth file that puts the checkout on the env's sys.path (as tools/nightly.py's pytorch-nightly.pth)."""
    return Path(env_paths(python)["purelib"]) / f"torchbuild-nightly-{package}.pth"


def write_pth(path: Path, package: str, checkout: Path) -> None:
    path.write_text(f"# written by torchbuild nightly: {package} imports from this checkout\n{checkout}\n")


def import_check(python: Path, package: str, checkout: Path) -> str:
    """Import the package in the env (outside the checkout); it must come from the checkout."""
    module = package.replace("-", "_")
    code = f"import os, {module}; print(os.path.realpath({module}.__file__))"
    result = run([str(python), "-c", code], cwd=python.parent, capture=True, echo=False, check=False)
    where = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
    if result.returncode or not where.startswith(str(checkout.resolve()) + os.sep):
        reason = (result.stderr.strip().splitlines() or ["no output"])[-1] if result.returncode else \
            f"it imports from {where}"
        raise TorchbuildError(f"{module} does not import from the checkout in the env of {python}: {reason}",
                              "run `inv nightly` again; if another copy shadows it, remove that from the env")
    return where
