"""As PyTorch's tools/optional_submodules.py: repos the build clones by itself, at a pinned tag,
from their real hosts (reach them through a mirror rule, as torchbuild's build environment does)."""

from pathlib import Path
from subprocess import check_call

repo_root = Path(__file__).absolute().parent.parent
third_party_path = repo_root / "third_party"


def _read_file(path):
    with path.open(encoding="utf-8") as f:
        return f.read().strip()


def _checkout_by_tag(repo, tag):
    check_call(["git", "clone", "--depth", "1", "--branch", tag, repo], cwd=str(third_party_path))


def read_nccl_pin():
    return _read_file(repo_root / ".ci" / "docker" / "ci_commit_pins" / "nccl.txt")


def checkout_nccl():
    release_tag = read_nccl_pin()
    print("-- Checkout nccl release tag: {}".format(release_tag), flush=True)
    if not (third_party_path / "nccl").exists():
        _checkout_by_tag("https://github.com/NVIDIA/nccl", release_tag)


def checkout_eigen():
    eigen_tag = _read_file(third_party_path / "eigen_pin.txt")
    print("-- Checkout Eigen release tag: {}".format(eigen_tag), flush=True)
    if not (third_party_path / "eigen").exists():
        _checkout_by_tag("https://gitlab.com/libeigen/eigen", eigen_tag)


if __name__ == "__main__":
    import sys

    if len(sys.argv) == 1:
        checkout_nccl()
        checkout_eigen()
    else:
        globals()[sys.argv[1]]()
