"""The real live screen in a pseudo-terminal (tmux): it starts, shows rows, quits on q and Ctrl-C."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mysqlio.devtools.loop_disk import loop_ext4

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


# 64 KiB in 4 KiB pwrites, then an fsync, twice a second, for a minute
FSYNC_WRITER = """
import os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)
for i in range(120):
    for page in range(16):
        os.pwrite(fd, bytes([i % 256]) * 4096, page * 4096)
    os.fsync(fd)
    time.sleep(0.5)
"""


def test_page_cache_on_a_loop_disk(bpf_ready: None, tmp_path: Path) -> None:
    """A file written smoothly and fsync'd every second on ext4 on a loop device, at 160
    columns: its dirtied and written-back bytes, the device's line; key p switches to the
    page-cache view, which names the cause (fsync)."""
    assert shutil.which("tmux"), "tmux is needed (make setup installs it)"
    with loop_ext4(256) as disk:
        gen = subprocess.Popen([sys.executable, "-c", FSYNC_WRITER, str(disk.mount / "fsynced.dat")])
        done = tmp_path / "exit-code"
        # rich takes COLUMNS / LINES over the terminal's size: a tmux server started by another
        # client may hand its own (80x24) to the pane
        cmd = f"env -u COLUMNS -u LINES {sys.executable} -m mysqlio top -p {gen.pid} -i 1; echo $? > {done}; sleep 30"
        subprocess.run(["tmux", "kill-session", "-t", SESSION], capture_output=True, check=False)
        _tmux("new-session", "-d", "-s", SESSION, "-x", "160", "-y", "20", cmd)
        try:

            def busy(screen: str) -> bool:
                row = next((line for line in screen.splitlines() if "fsynced.dat" in line), "")
                return "mysqlio top" in screen and row.split()[7:9].count("0B") == 0 if row else False

            screen = _wait_screen(busy)
            print(f"\n{screen}")
            head = next(line for line in screen.splitlines() if line.startswith("kind"))
            assert "dirty/s" in head and "wback/s" in head, screen
            assert any(line.startswith(f"{disk.name} ") and "(server" in line for line in screen.splitlines()), screen
            assert "page cache  dirtied" in screen
            _tmux("send-keys", "-t", SESSION, "p")
            screen = _wait_screen(lambda s: "written back by" in s and "fsync 100%" in s)
            print(f"\n{screen}")
            assert "page cache view" in screen
            _tmux("send-keys", "-t", SESSION, "q")
            deadline = time.monotonic() + 15
            while not done.exists() and time.monotonic() < deadline:
                time.sleep(0.2)
            assert done.read_text().strip() == "0"
            after = _tmux("capture-pane", "-p", "-t", SESSION)
            assert "wback" in after and "fsynced.dat" in after  # the session totals, page cache included
        finally:
            subprocess.run(["tmux", "kill-session", "-t", SESSION], capture_output=True, check=False)
            gen.kill()
            gen.wait()
