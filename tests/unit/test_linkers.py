"""build.linker: mold or lld where the compiler takes them, announced, part of the configure key, and the
libraries really linked by it (the linker's own note in their .comment section)."""

from __future__ import annotations

from pathlib import Path

import pytest

from torchbuild.errors import TorchbuildError
from torchbuild.toolchain import linkers
from torchbuild.toolchain.linkers import Linker


def test_cmake_linker_type_from_329_else_fuse_ld_flags():
    mold = Linker("mold", Path("/usr/bin/mold"), "2.3", True)
    new = linkers.build_changes(mold, "3.29.0", {})
    assert new == {"LDFLAGS": "-fuse-ld=mold", "CMAKE_LINKER_TYPE": "MOLD"}
    old = linkers.build_changes(mold, "3.25.1", {"CMAKE_SHARED_LINKER_FLAGS": "-Wl,--as-needed"})
    assert old["CMAKE_SHARED_LINKER_FLAGS"] == "-Wl,--as-needed -fuse-ld=mold" and "CMAKE_LINKER_TYPE" not in old
    assert linkers.choose("auto", [Linker("gold", Path("g"), "2", True)]) is None  # the toolchain's default


def test_a_named_linker_missing_or_refused_is_one_error():
    refused = linkers.try_link("c++", "nosuchld", {"PATH": "/usr/bin:/bin"})  # a real refusal by the compiler
    assert refused["accepted"] is False and "nosuchld" in str(refused["problem"])
    bfd = Linker("bfd", Path("/usr/bin/ld.bfd"), "2.40", True)
    with pytest.raises(TorchbuildError, match="ld.lld is not installed"):
        linkers.choose("lld", [bfd])
    with pytest.raises(TorchbuildError, match="refuses -fuse-ld=mold"):
        linkers.choose("mold", [Linker("mold", Path("/usr/bin/mold"), "1.10", False, str(refused["problem"])), bfd])
