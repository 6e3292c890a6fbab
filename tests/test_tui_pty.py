"""The real live screen in a pseudo-terminal (tmux): it starts, shows rows, quits on q and Ctrl-C."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.bpf
SESSION = "mysqlio-pty-test"


def _tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], capture_output=True, text=True, check=True).stdout


def _wait_screen(predicate: object, timeout_s: float = 20) -> str:
    deadline = time.monotonic() + timeout_s
    screen = ""
    while time.monotonic() < deadline:
        screen = _tmux("capture-pane", "-p", "-t", SESSION)
        if predicate(screen):  # type: ignore[operator]
            return screen
        time.sleep(0.2)
    raise AssertionError(f"screen never matched; last screen:\n{screen}")


@pytest.fixture
def writer(iogen: Path, tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(
        [str(iogen), "--dir", str(tmp_path), "--rate", "500", "--seconds", "60"], stdout=subprocess.DEVNULL
    )
    yield proc
    proc.kill()
    proc.wait()


@pytest.mark.parametrize("quit_key", ["q", "C-c"])
def test_live_screen_in_a_terminal(
    bpf_ready: None, writer: subprocess.Popen[bytes], tmp_path: Path, quit_key: str
) -> None:
    assert shutil.which("tmux"), "tmux is needed (make setup installs it)"
    done = tmp_path / "exit-code"
    cmd = f"{sys.executable} -m mysqlio top -p {writer.pid} -i 0.5; echo $? > {done}; sleep 30"
    subprocess.run(["tmux", "kill-session", "-t", SESSION], capture_output=True, check=False)
    _tmux("new-session", "-d", "-s", SESSION, "-x", "100", "-y", "24", cmd)
    try:
        screen = _wait_screen(lambda s: "rate.dat" in s and "mysqlio top" in s)
        assert "write/s" in screen and "lost 0" in screen
        _tmux("send-keys", "-t", SESSION, quit_key)
        deadline = time.monotonic() + 15
        while not done.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert done.exists(), "top did not exit"
        assert done.read_text().strip() == "0"
        after = _tmux("capture-pane", "-p", "-t", SESSION)
        assert "session totals" in after and "rate.dat" in after
    finally:
        subprocess.run(["tmux", "kill-session", "-t", SESSION], capture_output=True, check=False)
