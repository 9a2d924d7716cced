"""The doctor: is the pool an engine built the pool the config implies, and if not, why? (pure)

Each module imports only those before it: ``results`` (verdict words, dataclasses), ``plans`` (a deployment's plan
with knobs changed), ``pool`` (the logged pool and memory), ``causes`` (known causes, each tested), ``knobs`` (what
the log reveals), ``startup`` (the start-up check), ``findings`` (bytes agree, causes kept, headline),
``diagnosis`` (``diagnose``), ``log_alone`` (``examine``: the log without a config)."""

from kvplan.runbook.doctor.causes import KV_SIZE_WITH_INDEX
from kvplan.runbook.doctor.diagnosis import diagnose
from kvplan.runbook.doctor.knobs import LOGGED_ROW_SOURCE
from kvplan.runbook.doctor.log_alone import examine, gpu_candidates, proposed_deployment, rank_presets
from kvplan.runbook.doctor.results import (
    CANNOT_CHECK,
    CANNOT_TELL,
    CLASS_ALIASES,
    MATCH,
    MISMATCH,
    ByteFact,
    Cause,
    Comparison,
    DecodeRead,
    Diagnosis,
    Headline,
    Implied,
    KvSize,
    LoggedPool,
    MemoryTerm,
    ModelCheck,
    PerRank,
    Revealed,
    StartupCheck,
)
from kvplan.runbook.doctor.startup import mha_self_check

__all__ = [
    "CANNOT_CHECK",
    "CANNOT_TELL",
    "CLASS_ALIASES",
    "KV_SIZE_WITH_INDEX",
    "LOGGED_ROW_SOURCE",
    "MATCH",
    "MISMATCH",
    "ByteFact",
    "Cause",
    "Comparison",
    "DecodeRead",
    "Diagnosis",
    "Headline",
    "Implied",
    "KvSize",
    "LoggedPool",
    "MemoryTerm",
    "ModelCheck",
    "PerRank",
    "Revealed",
    "StartupCheck",
    "diagnose",
    "examine",
    "gpu_candidates",
    "mha_self_check",
    "proposed_deployment",
    "rank_presets",
]
