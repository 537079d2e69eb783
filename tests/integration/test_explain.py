"""`inv build --explain`: what the next build would run, grouped by cause, and about how long, on a real ninja
graph (the demo); nothing is built."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time

from ..helpers import REPO, build, objects


def on_a_terminal(args: list[str], env: dict[str, str], answer: bytes) -> tuple[int, str]:
    """Run `inv ARGS` with a pseudo-terminal for stdin, stdout and stderr; answer the first y/N question."""
    main, child = os.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "invoke", "--search-root", str(REPO), *args], stdin=child,
                            stdout=child, stderr=child, env={**os.environ, **env}, close_fds=True)
    os.close(child)
    out, answered, deadline = b"", False, time.monotonic() + 300
    while time.monotonic() < deadline:
        ready, _, _ = select.select([main], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(main, 65536)
            except OSError:  # the terminal's other side closed: the command ended
                break
            out += chunk
            if not answered and b"[y/N]" in out:
                os.write(main, answer)
                answered = True
        elif proc.poll() is not None:
            break
    os.close(main)
    return proc.wait(timeout=60), out.decode(errors="replace")


def test_a_long_build_asks_first_on_a_terminal_and_never_elsewhere(small_demo):  # noqa: F811
    co = small_demo
    build(co, "--cuda", "none")
    (co / "c10/include/c10/core.h").write_text((co / "c10/include/c10/core.h").read_text() + "// every unit\n")
    before = objects(co)
    asks = {"TORCHBUILD_BUILD_CONFIRM_OVER": "0"}  # any estimate is over it
    code, said = on_a_terminal(["build", "--path", str(co), "--cuda", "none"], asks, b"n\n")
    assert code != 0 and "build? [y/N]" in said and "c10/include/c10/core.h:" in said, said
    assert "not confirmed" in said and objects(co) == before  # answered no: nothing built
    code, said = on_a_terminal(["build", "--path", str(co), "--cuda", "none", "--yes"], asks, b"n\n")
    assert code == 0 and "[y/N]" not in said and "built in" in said, said  # --yes: no question
    (co / "c10/include/c10/core.h").write_text((co / "c10/include/c10/core.h").read_text() + "// again\n")
    piped = build(co, "--cuda", "none", env=asks)  # no terminal: no question
    assert "[y/N]" not in piped.output and "built in" in piped.stderr
