"""The per-request event record: one layout shared by the BPF ring buffer
(struct mio_event in probes/mysqlio.h, generated as abi.Event), the recorder
and the trace writer; its fields are described in the header."""

from __future__ import annotations

import numpy as np

from .abi import Api, By, Event, Op

EVENT_DTYPE = np.dtype(Event)  # 56 bytes, 8-aligned

# the names traces store for the op and api codes (the dictionaries of their columns)
OP_NAMES = tuple(op.name.lower() for op in Op)
API_NAMES = tuple(api.name.lower() for api in Api)
BY_NAMES = tuple(by.name.lower() for by in By)
