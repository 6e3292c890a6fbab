"""What the user asked to see: files of some kinds (--kind), paths matching a
regular expression (--match) and, in a recorded trace, a time range (--from, --to).

One filter for every command: `top` and the exporter keep or drop a file's interval
(`keep`), a trace's decoder applies the same fields to whole batches at once
(`trace_events.Decoder`). Live commands have no trace time: they leave the range unset.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Protocol


class _File(Protocol):
    @property
    def kind(self) -> str: ...
    @property
    def path(self) -> str: ...


@dataclass(frozen=True)
class Filters:
    kinds: frozenset[str] = frozenset()
    match: re.Pattern[str] | None = None
    t_from: float | None = None  # seconds since the start of a trace
    t_to: float | None = None

    def keep(self, f: _File) -> bool:
        """Whether a file (a model.FileActivity) passes the kind and path filters."""
        if self.kinds and f.kind not in self.kinds:
            return False
        return not (self.match and not self.match.search(f.path))

    def active(self) -> bool:
        return bool(self.kinds or self.match or self.t_from is not None or self.t_to is not None)

    def to_json(self) -> dict[str, Any]:
        return {
            "kinds": sorted(self.kinds),
            "match": self.match.pattern if self.match else None,
            "from_s": self.t_from,
            "to_s": self.t_to,
        }
