"""Request traces, read as streams: one request at a time, never the whole trace in Python objects.

Formats (``--trace-format``, detected when not given):

- ``mooncake``: Mooncake FAST'25 JSON Lines, ``{"timestamp": ms, "input_length": n, "output_length": n,
  "hash_ids": [..]}``. ``hash_ids`` are prefix-chained ids of 512-token blocks (a line may carry its own
  ``block_size``, as kvcache-simulator's minimal format does); the last block is partial when the input is not a
  multiple of the block (ceil listing). ``timestamp`` is optional in order mode.
- ``kvtester``: kv-cache-tester JSON, one conversation per file (a file or a directory of ``*.json``). Ids are
  64-token blocks local to each file, so every file gets its own id namespace; only full blocks are listed (floor
  listing). Sub-agent entries nest their own ``requests`` whose ``t`` counts from the sub-agent's ``t``; they are
  flattened into the parent conversation (same namespace) and ordered by absolute ``t``. Files are replayed one
  after another in name order; in occupancy mode each conversation starts when the previous one's last request
  arrived.
- ``azure``: Azure LLM inference trace CSV (``TIMESTAMP,ContextTokens,GeneratedTokens``): arrivals and lengths
  only, no block ids, so no request can reuse another's KV.
- ``kvplan``: kvplan's own JSON Lines for users' traces. The first line is a header, then one request a line::

      {"kvplan_trace": 1, "block_size": 64, "chained": true}
      {"arrival_s": 0.0, "input_tokens": 4096, "output_tokens": 256, "blocks": [17, 18, 19, 20]}

  ``blocks`` are ids (integers or strings) of the request's ``block_size``-token blocks in order: the
  full blocks (floor listing) or also the partial last one (ceil listing). With ``"chained": true`` an id names
  the block *and everything before it* (Mooncake's convention); with ``"chained": false`` ids name block
  contents only and kvplan chains them itself (a block is reused only after the same prefix).
  ``arrival_s`` (seconds, optional, default: the previous request's) and ``output_tokens`` (default 0) are
  optional. Blank lines are skipped.

A malformed line stops the read with ``FILE:LINE: what is wrong`` (exit 2); with ``skip_bad`` it is skipped and
counted instead, in every format: a line that is not UTF-8, longer than ``limits.MAX_LINE_CHARS`` bytes, not JSON,
nested deeper than ``limits.MAX_DEPTH``, an integer of more than ``limits.MAX_INT_DIGITS`` digits, a time that is
not finite or past ``limits.MAX_TRACE_SECONDS``, a length past ``limits.MAX_REQUEST_TOKENS``; a kv-cache-tester
file that cannot be read or decoded counts as one bad record. What no flag skips (exit 2): a path that is not a
regular file (a FIFO, a device), a damaged or truncated ``.gz`` (named with the line it reached), a trace past
``limits.TRACE`` bytes (decompressed). Lines are read with a bounded ``readline``, never whole.
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
