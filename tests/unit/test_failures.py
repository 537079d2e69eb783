"""Known failures (torchbuild/failures.yaml): every entry has its fix, and a test in
tests/integration/test_failures.py that makes it happen for real."""

from __future__ import annotations

from pathlib import Path

from torchbuild.diagnose import table


def test_every_entry_has_a_pattern_a_fix_and_a_test():
    here = (Path(__file__).parents[1] / "integration" / "test_failures.py").read_text()
    for failure in table():
        assert failure.fix and failure.explain
        assert f'"{failure.id}"' in here, f"no test makes {failure.id} happen"
