"""What a configuration owns, and when it is up to date: the one place to read it.

A configuration (Python × CUDA × build type, its key) is its whole state:

- its build tree: build/ while it holds the checkout, `.torchbuild/trees/<key>` while it waits (trees.py);
- the CMake trees its builds configured, in build/ and outside it (onnx's `.setuptools-cmake-build/`), as
  CMake's log says; a tree of the project that none of them configured (the user's own `pip install -e .`
  into `build/{wheel_tag}`) is never removed (cmaketrees.py, trees.py);
- its files in the checkout and in the env, and nothing else. A file is the configuration's only when its
  build made it through a channel that says so (channels.py): a CMake install manifest or a ninja output of
  one of its trees, setuptools' "copying X -> Y" into the source tree, a CMake tree its log says it
  configured; in the env, the editable install's RECORD of this checkout. Never a file git tracks, never
  one merely written while the build ran (the user's notes, venv, own CMake tree);
- its record (records.py): the marker in its tree, paths relative to the checkout or to the env named
  beside them, validated on every read; a record that cannot be trusted makes its tree not torchbuild's:
  moved aside untouched, never removed.

A switch moves the leaving configuration's files into its tree and the coming one's back (moves.py), each
move journaled, so it is all or nothing; nothing moves through a link, over a file that stands in the way,
or out of an env whose install is another checkout's (a copied checkout).

A configuration is up to date (uptodate.py) when its record's inputs stamp matches, its files are in place
as its build left them, the env imports this checkout's install, ninja has no work in any of its trees,
and nothing changed in the working tree since its last complete build began that ninja does not build
from (changes.py reads it without git's filters: submodules marked `ignore = dirty` included). A source
saved while the build ran has its objects removed, so the next build compiles it again.
"""
