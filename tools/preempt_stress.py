#!/usr/bin/env python3
"""What `top` loses, and shows as lost, when other processes' syscalls compete for the CPUs.

Where the syscall tracepoints' programs can be preempted (Debian sid's 7.2, PREEMPT_LAZY),
the kernel skips every run of one of our programs on a CPU while another task is stopped
inside that program there: the skipped runs are of any process, the traced server's among
them. This measures both, in a guest of the kernel:

    .venv/bin/python tools/preempt_stress.py [--alias sid] [--hook tracepoints|raw] [--noise dd|cpu]

A target thread pwrite()s 4 KiB for 15 s (counting its calls) while two noise processes run:
`dd bs=1` from /dev/zero to /dev/null (a syscall each byte) or a shell busy loop (no
syscalls). It prints the target's writes, top's count of them, top's lost events, and each
program's skipped runs (recursion_misses).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))

from guest import run_in_guest  # noqa: E402
from kernels import ensure_kernel  # noqa: E402

IN_GUEST = r"""
set -e
cd "$REPO"
d=$(mktemp -d /run/mysqlio-stress.XXXXXX)
python3 -c "
import os, sys, time
while not os.path.exists('$d/go'): time.sleep(0.05)
fd = os.open('$d/f', os.O_WRONLY | os.O_CREAT, 0o644); t = time.time(); n = 0
while time.time() - t < 15:
    os.pwrite(fd, b'x' * 4096, (n % 256) * 4096); n += 1
open('$d/target', 'w').write(str(n))
time.sleep(6)
" & T=$!
MYSQLIO_SYSCALL_HOOK=$HOOK .venv/bin/python -m mysqlio top -p $T --json > $d/top.json 2> $d/top.err & M=$!
for i in $(seq 1 240); do grep -q '"files"' $d/top.json 2>/dev/null && break; sleep 0.5; done
for i in 1 2; do
  if [ $NOISE = dd ]; then (timeout 15 dd if=/dev/zero of=/dev/null bs=1 count=1000000000 2>/dev/null &)
  else (timeout 15 sh -c 'while :; do :; done' &); fi
done
touch $d/go
sleep 17
misses=$(for fd in /proc/$M/fdinfo/*; do grep -h '^recursion_misses' $fd 2>/dev/null | cut -f2; done | paste -sd' ')
wait $T || true
kill -INT $M 2>/dev/null || true; wait $M || true
python3 -c "
import json
written = 0; lost = 0
for line in open('$d/top.json'):
    o = json.loads(line); lost += o.get('lost_events') or 0
    written += sum(f['write_ops'] for f in o['files'] if f['path'] == '$d/f')
print(f'STRESS kernel=$(uname -r) hook=$HOOK noise=$NOISE target_writes={open(\"$d/target\").read()} '
      f'top_writes={written} top_lost_events={lost} program_skips=[$misses]')
"
rm -rf $d
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--alias", default="sid")
    ap.add_argument("--hook", choices=("tracepoints", "raw"), default="tracepoints")
    ap.add_argument("--noise", choices=("dd", "cpu"), default="dd")
    args = ap.parse_args()
    env = {"REPO": str(REPO), "HOOK": args.hook, "NOISE": args.noise}
    res = run_in_guest(ensure_kernel(args.alias), ["bash", "-c", IN_GUEST], timeout_s=400, env=env, cwd=REPO)
    lines = [line for line in res.output.splitlines() if line.startswith("STRESS ")]
    if not lines:
        print(f"preempt_stress: no result (guest exit {res.returncode}):\n{res.output[-2000:]}", file=sys.stderr)
        return 1
    print(lines[-1].removeprefix("STRESS "))
    return 0


if __name__ == "__main__":
    sys.exit(main())
