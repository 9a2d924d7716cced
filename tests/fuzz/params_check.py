"""The one property every family's parameter count keeps under a mutated config (tests/fuzz/test_*_params_fuzz.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvplan.errors import ConfigError
from kvplan.models.arch import Split
from kvplan.models.weights import WeightsModel, param_groups_from_hf


def counts_or_fails_located(cfg: Mapping[str, Any]) -> WeightsModel | None:
    """The config's parameter groups, or None after a ConfigError that names its key in one line. The groups add
    up to the total, and more tensor-parallel ranks never put more bytes on one GPU (1 ≥ 2 ≥ 8 ways)."""
    try:
        w = param_groups_from_hf(cfg, "config.json")
    except ConfigError as e:
        assert e.key and "\n" not in str(e)
        return None
    assert w.total_params == sum(g.params for g in w.groups)
    for g in w.groups:
        whole, tp2, tp8 = (g.bytes_per_gpu(Split.of(tp=n)) for n in (1, 2, 8))
        assert 0 <= tp8 <= tp2 <= whole
    return w
