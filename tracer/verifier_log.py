"""The reason in a verifier log: the line that says why the kernel refused a program.

libbpf prints a refused program's whole verifier log between
"-- BEGIN PROG LOAD LOG --" and "-- END PROG LOAD LOG --". The log replays the
instructions and register states of the path that failed; the reason is the
last line that is neither (e.g. "combined stack size of 2 calls is 528. Too
large", "R2 unbounded memory access, make sure to bounds check any such
access"), followed only by statistics.
"""

from __future__ import annotations

import re

_PROG_LOG = re.compile(
    r"prog '(?P<prog>[^']+)': -- BEGIN PROG LOAD LOG --\n(?P<log>.*?)-- END PROG LOAD LOG --", re.DOTALL
)
# Lines that are not the reason: instructions ("12: (79) r1 = ..."), source
# lines ("; x = y @ file.c:12"), register and stack states, path markers and
# the statistics the verifier ends with.
_NOT_REASON = re.compile(
    r"^(\d+: |\d+:$|; |;$|from \d+ to \d+|(R\d+|fp-?\d+)(_[rwD]+)?=|frame\d|caller:|callee:|"
    r"func#\d+ @|Func#\d+|Validating |last_idx |regs=|parent |verification time |stack depth |"
    r"processed \d+ insns|mark_precise|Live regs|\.\.\. \[|\s*$)"
)
# The instruction the reason is about: the last instruction line before it.
_INSN = re.compile(r"^\d+: \(\w\w\) (?P<insn>.*)$")


def refusal(libbpf_log: str) -> str | None:
    """ "program P: reason (at insn: ...)" for the last program the kernel
    refused in this libbpf log, or None when the log holds no verifier log."""
    matches = list(_PROG_LOG.finditer(libbpf_log))
    if not matches:
        return None
    last = matches[-1]
    lines = last.group("log").splitlines()
    for i in range(len(lines) - 1, -1, -1):
        if not _NOT_REASON.match(lines[i]):
            reason = lines[i].strip()
            insn = next((m.group("insn") for line in reversed(lines[:i]) if (m := _INSN.match(line))), None)
            where = f" (at {insn.split(';')[0].strip()})" if insn else ""
            return f"program {last.group('prog')}: {reason}{where}"
    return f"program {last.group('prog')}: the verifier gave no reason"
