"""Errors a user can act on: the CLI prints them as one line and exits non-zero."""

from __future__ import annotations


class UserError(Exception):
    """Bad input or an unusable environment; `exit_code` is what the CLI returns."""

    exit_code = 2


class BpfError(UserError):
    """Loading or attaching the probes failed; `log` holds libbpf's messages."""

    exit_code = 3

    def __init__(self, message: str, log: str = "") -> None:
        super().__init__(message)
        self.log = log


class StapError(UserError):
    """stap / staprun could not start, or stopped; `log` holds the end of what they said."""

    exit_code = 3

    def __init__(self, message: str, log: str = "") -> None:
        super().__init__(message)
        self.log = log


class TargetGone(UserError):
    """The traced process exited."""

    exit_code = 4
