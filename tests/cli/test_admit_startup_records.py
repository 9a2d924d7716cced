"""What `kvplan admit --ctx 1M` builds at import on the default preset, past test_admit_startup.py: no record's
``__init__`` or frozen ``__setattr__`` / ``__delattr__`` (Python 3.11's dataclass compiles the three for every
frozen class, about 0.2 ms of a class's cost on the development machine), and no ``fractions`` (with decimal)."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.cli.modules_probe import ADMIT_RECORDS

_PROBE = (
    ADMIT_RECORDS
    + """
own = [f"{c.__module__}.{c.__qualname__}" for c in records if vars(c).get("__setattr__") is not kvplan._setattr]
lazy = [c for c in records if vars(c).get("__setattr__") is kvplan._setattr]
built = sum(vars(c).get("__init__") is not kvplan._init for c in lazy)
sys.stderr.write(json.dumps({"own": sorted(own), "lazy": len(records) - len(own), "built": built,
                             "fractions": "fractions" in sys.modules, "decimal": "decimal" in sys.modules}))
"""
)


def _probe() -> dict[str, object]:
    proc = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, check=False)
    found: dict[str, object] = json.loads(proc.stderr.strip().splitlines()[-1])
    return found


def test_admit_builds_no_record_init_or_frozen_setattr_at_import() -> None:
    # every record on admit's path shares kvplan._setattr / _delattr, and its __init__ is compiled on the class's
    # first instance: on the default preset 48 of the 77 are ever built (2026-12-07), the rest never compile one
    found = _probe()
    stdlib = {  # dataclass(frozen=True) itself, as test_admit_startup.py lists them
        "kvplan.models.arch.Split",
        "kvplan.engines.band.Fitted",
        "kvplan.engines.band.TermBand",
        "kvplan.engines.band.PoolBand",
        "kvplan.engines.log_summary.SglangSummary",
        "kvplan.engines.log_summary.VllmSummary",
        "kvplan.engines.log_summary.VllmV0Summary",
        "kvplan.models.from_hf._Indexer",
    }
    assert set(found["own"]) <= stdlib, sorted(set(found["own"]) - stdlib)  # type: ignore[arg-type]
    assert found["lazy"] >= 70 and 0 < found["built"] < found["lazy"], found  # type: ignore[operator]


def test_admit_on_a_preset_loads_no_fractions() -> None:
    # Fraction counts a quantized checkpoint's bytes (kvplan.models.quant.Scheme.bytes_for); a preset plans from its
    # measured weights point, so fractions and decimal (about 1.3 ms) load only when weights are laid out
    found = _probe()
    assert not found["fractions"] and not found["decimal"], found
