"""`inv patch.*`: a series applied on top of the checkout and its submodules, atomically and idempotently."""

from __future__ import annotations

import pytest

from torchbuild.errors import TorchbuildError
from torchbuild.patches import parse_series, to_mbox, touched_files


def test_series_parser():
    entries = parse_series("# c\n0001-a.patch\n\nthird_party/x: 0002-b.patch  # note\n")
    found = [(e.target, e.name, e.line) for e in entries]
    assert found == [("", "0001-a.patch", 2), ("third_party/x", "0002-b.patch", 4)]
    with pytest.raises(TorchbuildError, match="series:1: cannot read"):
        parse_series("a b c\n")
    with pytest.raises(TorchbuildError, match=r"series:2: the line holds an invisible character \(U\+FEFF\)"):
        parse_series("0001-a.patch\n\ufeff0002-b.patch\n")  # a byte-order mark the message shows
    assert touched_files("diff --git a/x/y.c b/x/y.c\n--- a/x/y.c\n+++ b/x/y.c\n") == ["x/y.c"]
    assert to_mbox("diff --git a/f b/f\n", "0002-fix-the-thing.patch").count("Subject: [PATCH] fix the thing") == 1
