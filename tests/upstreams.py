"""Upstreams for tests and benchmarks made from real projects nobody here wrote.

A real sdist from the package index is unpacked and turned into a git upstream the way its
authors keep it: the library it vendors (sentencepiece's C++ sources, rapidjson's headers) becomes
a git submodule of its own repo. The repos are served over git's http protocol on loopback,
behind an url (`https://github.example/...`) that only a mirror rule reaches.
"""

from __future__ import annotations

import base64
import functools
import http.server
import shutil
import subprocess
import sys
import tarfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

PUBLIC = "https://github.example/realworld"


@dataclass(frozen=True)
class Project:
    """A real sdist and how to use it once built."""

    name: str  # the sdist's name on the index
    version: str
    submodule: str  # the folder that becomes a submodule
    patch_file: str  # a file the test's patch changes
    call: str  # Python that imports and calls the built project, printing a result
    expect: str  # what `call` prints
    needs_remedy: bool = False  # its CMake asks for < 3.5: CMake 4 needs the remedy
    generated: tuple[str, ...] = ()  # in the sdist, but written by the build and not tracked in the project's repo
    heavy: bool = False  # a minute or more of build: `nox -s realworld` runs it, README's test command does not
    own_build_dir: str = ""  # its pyproject's build-dir, where the user's own `pip install -e .` puts its tree
    loop_source: str = ""  # a C source whose edit the loop builds (scikit-build-core's: installed and stripped)


PROJECTS = [
    Project("sentencepiece", "0.1.99", "sentencepiece", "README.md",
            "import sentencepiece as s, io; m = io.BytesIO(); "
            "s.SentencePieceTrainer.train(sentence_iterator=iter(['hello world', 'hello there'] * 50), "
            "model_writer=m, vocab_size=12, minloglevel=2); p = s.SentencePieceProcessor(model_proto=m.getvalue()); "
            "print(p.decode(p.encode('hello world')))", "hello world", needs_remedy=True,
            heavy=True),  # ~100 compiles, 105-123 s of README's test command: the demo's CMake 4 test stays there
    Project("python-rapidjson", "1.25", "rapidjson", "README.rst",
            "import rapidjson; print(rapidjson.loads(rapidjson.dumps({'a': [1, 2.5]}))['a'][1])", "2.5"),
    Project("mmh3", "5.3.1", "tests", "README.md", "import mmh3; print(mmh3.hash('foo'))", "-156908512"),
    # scikit-build-core, versioned by setuptools-scm, which the backend asks for (get_requires_for_build_*)
    Project("spglib", "2.8.0", "database", "README.md",
            "import spglib; print(spglib.get_spacegroup(([[4.0, 0, 0], [0, 4.0, 0], [0, 0, 4.0]], [[0, 0, 0]], [1])))",
            "Pm-3m (221)", generated=("python/spglib/_version.py",), heavy=True,  # setuptools-scm's write_to
            loop_source="src/spglib.c"),
    # scikit-build-core with its own build-dir (build/{wheel_tag}), C++ with LTO
    Project("iminuit", "2.33.0", "extern", "README.rst",
            "from iminuit import Minuit; m = Minuit(lambda x: (x - 2) ** 2, x=0); m.errordef = 1; m.migrad(); "
            "print(round(m.values['x'], 2))", "2.0", heavy=True, own_build_dir="build/{wheel_tag}"),
]


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "protocol.file.allow=always", *args], cwd=repo, check=True,
                          capture_output=True, text=True).stdout.strip()


def download(project: Project, dest: Path) -> Path:
    """The sdist from the package index (pip's cache makes the second time free)."""
    dest.mkdir(parents=True, exist_ok=True)
    found = list(dest.glob(f"{project.name.replace('-', '_')}-{project.version}.tar.gz")) + \
        list(dest.glob(f"{project.name}-{project.version}.tar.gz"))
    if not found:
        done = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary",
                               project.name, f"{project.name}=={project.version}", "-d", str(dest)],
                              capture_output=True, text=True)
        if done.returncode != 0:  # pip asks the sdist for its metadata: torch-scatter's setup.py imports torch
            return from_index(project, dest, done)
        found = [p for p in dest.glob("*.tar.gz") if p.name.lower().startswith(project.name.replace("-", "_"))
                 or p.name.lower().startswith(project.name)]
    return found[0]


def from_index(project: Project, dest: Path, failed: subprocess.CompletedProcess[str]) -> Path:
    """The sdist as the index's simple page links it, without asking it for metadata."""
    import re
    import urllib.request

    name = f"{project.name.replace('-', '_')}-{project.version}.tar.gz"
    try:
        page = urllib.request.urlopen(f"https://pypi.org/simple/{project.name}/", timeout=60).read().decode()
        link = re.search(rf'href="([^"#]*/{re.escape(name)})', page)
        if link is None:
            raise OSError(f"no {name} on the index's page")
        urllib.request.urlretrieve(link.group(1), dest / name)
    except OSError as exc:
        raise subprocess.CalledProcessError(failed.returncode, failed.args, failed.stdout,
                                            f"{failed.stderr[-300:]}; then {exc}") from None
    return dest / name


def make_upstream(project: Project, sdist: Path, root: Path) -> str:
    """Git repos for the project and its submodule under root/; returns the project's public url."""
    scratch = root / f".{project.name}-src"
    with tarfile.open(sdist) as tar:
        tar.extractall(scratch, filter="data")
    source = next(scratch.iterdir())
    for junk in [*source.glob("*.egg-info"), *source.glob("src/*.egg-info"), source / "PKG-INFO",
                 *(source / name for name in project.generated)]:
        shutil.rmtree(junk) if junk.is_dir() else junk.unlink()
    if project.generated:  # as the project's own .gitignore names them (its sdist leaves them out)
        with open(source / ".gitignore", "a") as ignore:
            ignore.write("".join(f"/{name}\n" for name in project.generated))
    sub_repo, main_repo = root / f"{project.name}-{project.submodule}", root / project.name
    shutil.move(str(source / project.submodule), sub_repo)
    shutil.move(str(source), main_repo)
    shutil.rmtree(scratch)
    for repo in (sub_repo, main_repo):
        git(repo, "init", "-q", "-b", "main")
        git(repo, "add", "-A", "-f")
        git(repo, "commit", "-qm", f"{repo.name} {project.version} (from its sdist)")
    git(main_repo, "submodule", "add", "-q", sub_repo.as_uri(), project.submodule)
    git(main_repo, "config", "-f", ".gitmodules", f"submodule.{project.submodule}.url",
        f"{PUBLIC}/{sub_repo.name}")
    git(main_repo, "add", ".gitmodules")
    git(main_repo, "commit", "-qm", f"{project.submodule} as a submodule")
    for repo in (sub_repo, main_repo):
        git(repo, "update-server-info")
    return f"{PUBLIC}/{project.name}"


class Repos(http.server.SimpleHTTPRequestHandler):
    """git's dumb http protocol for the repos under `directory` (`/name/...` -> `name/.git/...`);
    with `token` set, every request needs basic auth as user:token."""

    token: str | None = None

    def do_GET(self) -> None:  # noqa: N802
        if self.token:
            expected = "Basic " + base64.b64encode(f"user:{self.token}".encode()).decode()
            if self.headers.get("Authorization") != expected:
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="repos"')
                self.end_headers()
                return
        parts = self.path.lstrip("/").split("/")
        top = next((i for i in range(len(parts) - 1, 0, -1)
                    if (Path(self.directory).joinpath(*parts[:i]) / ".git").is_dir()), 1)  # gitlab/eigen too
        self.path = "/" + "/".join([*parts[:top], ".git", *parts[top:]])
        super().do_GET()

    def log_message(self, *args: object) -> None:
        pass


@functools.lru_cache(maxsize=None)
def _handler(token: str | None) -> type[Repos]:
    return type("TokenRepos", (Repos,), {"token": token})


def serve(root: Path, token: str | None = None) -> Iterator[str]:
    """Serve the repos under root over http on loopback while the generator is open; yields the base url."""
    handler = functools.partial(_handler(token), directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def make_patch(repo: Path, scratch: Path, rel: str, line: str) -> str:
    """A `git format-patch` mail appending `line` to `rel` in a clone of `repo`."""
    git(scratch.parent, "clone", "-q", str(repo), str(scratch))
    with open(scratch / rel, "a") as fh:
        fh.write(f"\n{line}\n")
    git(scratch, "commit", "-qam", "torchbuild real-world test patch")
    return git(scratch, "format-patch", "-1", "--stdout") + "\n"
