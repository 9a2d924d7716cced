"""Request traces, read as streams: one request at a time, never the whole trace in Python objects.

``records``: the request, what a read skipped and the checks every reader shares; ``formats``: the four formats'
readers (what each format is, and what a malformed line does); ``source``: ``open_trace``, ``detect_format``,
``Trace`` and ``CompactTrace``.
"""

from kvplan.sim.trace.formats import KVTESTER_BLOCK_TOKENS, MOONCAKE_BLOCK_TOKENS
from kvplan.sim.trace.records import ReadStats, Request
from kvplan.sim.trace.source import FORMATS, CompactTrace, Trace, detect_format, open_trace

__all__ = [
    "FORMATS",
    "KVTESTER_BLOCK_TOKENS",
    "MOONCAKE_BLOCK_TOKENS",
    "CompactTrace",
    "ReadStats",
    "Request",
    "Trace",
    "detect_format",
    "open_trace",
]
