"""Engine startup logs -> frozen dataclasses (a package: each module imports only those listed before it).

``patterns`` the bounded pattern of each engine line; ``values`` the facts and one ``Run`` per server start;
``records`` raw text to records (ANSI, container prefixes, ranks, wrapped lines); ``facts`` what each line builds;
``lines`` the table of every line read (pattern, fact, real example) that drives ``events``, a record's facts;
``builder`` events to runs (``parse_log``)."""

from kvplan.runbook.parse.builder import parse_log
from kvplan.runbook.parse.events import CONFIG, LOAD, POOL
from kvplan.runbook.parse.lines import SGLANG_LINES, VLLM_LINES, LineForm
from kvplan.runbook.parse.records import clean_line, kv_pairs, log_lines
from kvplan.runbook.parse.values import (
    LOOKED_FOR,
    Args,
    At,
    Concurrency,
    Gib,
    KvAlloc,
    KvCacheSize,
    LoadEnd,
    LogError,
    MambaAlloc,
    MaxLenError,
    Override,
    ParsedLog,
    Run,
    Summary,
    SwaPool,
    V0Blocks,
    V0MaxLenError,
    V0Memory,
    largest,
    smallest,
)

__all__ = [
    "CONFIG",
    "LOAD",
    "LOOKED_FOR",
    "POOL",
    "SGLANG_LINES",
    "VLLM_LINES",
    "Args",
    "At",
    "Concurrency",
    "Gib",
    "KvAlloc",
    "KvCacheSize",
    "LineForm",
    "LoadEnd",
    "LogError",
    "MambaAlloc",
    "MaxLenError",
    "Override",
    "ParsedLog",
    "Run",
    "Summary",
    "SwaPool",
    "V0Blocks",
    "V0MaxLenError",
    "V0Memory",
    "clean_line",
    "kv_pairs",
    "largest",
    "log_lines",
    "parse_log",
    "smallest",
]
