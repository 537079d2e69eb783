"""The one runner: literal arguments, echo of changed env only, dry-run, errors, Ctrl-C stops the tree."""

from __future__ import annotations

import io

import pytest

from torchbuild import console
from torchbuild.errors import CommandError, ToolNotFound
from torchbuild.run import describe_env, merged_env, run

from ..helpers import REPO


@pytest.fixture
def captured(monkeypatch):
    stream = io.StringIO()
    monkeypatch.setattr(console, "console", console.Console(stream=stream, color=False))
    return stream


def test_shell_metacharacters_are_passed_literally(tmp_path, captured):
    marker = tmp_path / "pwned"
    value = f"$(touch {marker}); `touch {marker}` && touch {marker}"
    out = run(["printf", "%s", value], capture=True, env={"X": f"$(touch {marker})"}).stdout
    assert out == value
    assert not marker.exists()
    assert "X='$(touch" in captured.getvalue()


def test_echo_shows_only_changed_variables(captured):
    base = {"PATH": "/usr/bin", "HOME": "/h", "KEEP": "1"}
    run(["true"], base_env=base, env={"PATH": "/opt/cuda/bin:/usr/bin", "KEEP": "1", "NEW": "a b", "HOME": None})
    line = captured.getvalue().strip()
    assert line == "tb> $ -u HOME NEW='a b' PATH=/opt/cuda/bin:$PATH true"


def test_merged_env_removes_none():
    assert merged_env({"A": "1", "B": "2"}, {"B": None, "C": "3"}) == {"A": "1", "C": "3"}
    assert describe_env({"A": "1"}, {"A": "1"}) == []


def test_dry_run_runs_nothing(tmp_path, captured):
    marker = tmp_path / "made"
    result = run(["touch", str(marker)], dry_run=True)
    assert result.returncode == 0 and not marker.exists()
    assert f"touch {marker}" in captured.getvalue()


def test_missing_program_is_a_clear_error():
    with pytest.raises(ToolNotFound, match="'no-such-tool-xyz' was not found on PATH"):
        run(["no-such-tool-xyz", "--help"])


def test_failure_carries_exit_code_and_output_tail():
    with pytest.raises(CommandError) as info:
        run(["sh", "-c", "echo first; echo 'the real error' >&2; exit 3"], echo=False)
    assert info.value.returncode == 3
    assert "the real error" in info.value.output
    assert "exit 3" in info.value.message


def test_streaming_splits_progress_carriage_returns():
    lines: list[str] = []
    run(["printf", "a 10%%\\ra 50%%\\ra 100%%\\nnext\\n"], on_line=lines.append, echo=False)
    assert lines == ["a 10%", "a 50%", "a 100%", "next"]


def test_console_colour_follows_tty_and_no_color():
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert console.Console(stream=Tty(), env={}).color is True
    assert console.Console(stream=Tty(), env={"NO_COLOR": "1"}).color is False
    assert console.Console(stream=io.StringIO(), env={}).color is False
    plain = io.StringIO()
    console.Console(stream=plain, env={}).warn("careful")
    assert plain.getvalue() == "tb> warning: careful\n"
    coloured = Tty()
    console.Console(stream=coloured, env={}).warn("careful")
    assert "\x1b[" in coloured.getvalue()


def test_no_module_outside_run_starts_processes():
    """Every subprocess goes through run.py (one runner)."""
    src = REPO / "torchbuild"
    offenders = [p.name for p in src.rglob("*.py") if p.name != "run.py" and "demo_project" not in p.parts
                 and ("subprocess." in p.read_text() or "os.system(" in p.read_text())]
    assert offenders == []
