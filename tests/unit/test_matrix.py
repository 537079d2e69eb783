"""The nox matrix (sessions from the config, shared compiler cache, summary) and the remote cache."""

from __future__ import annotations

import json

from torchbuild.matrix import session_name
from torchbuild.summary import SessionRecord, write_summary


def test_the_summary_lists_sessions_in_matrix_order_not_finishing_order(tmp_path):
    summary = tmp_path / "dist" / "matrix-summary.json"
    for python, cuda in [("3.12", "none"), ("3.10", "13.0"), ("3.9", "none"), ("3.10", "none"), ("3.10", "12.8")]:
        write_summary(summary, SessionRecord(session_name(python, cuda), python, cuda))
    listed = [(s["python"], s["cuda"]) for s in json.loads(summary.read_text())["sessions"]]
    assert listed == [("3.9", "none"), ("3.10", "none"), ("3.10", "12.8"), ("3.10", "13.0"), ("3.12", "none")]
