"""Public startup logs reproduced from the config alone (issue 12 "Done when").

Each case is one real public log whose deployment is stated (the log's own args line, its source's text, or the
file name of a sweep), the model's real config.json, and the pool the engine logged. kvplan plans the pool from
the config and the STATED knobs only: no figure the log measured (weights, free memory, available KV memory,
non-KV memory) may be given, so the case checks the whole memory chain kvplan models for that engine version.

Cases live in the sibling modules, one per engine generation (sglang.py, vllm_v1.py, vllm_v0.py), plus
vllm_records.py (vLLM start-up figures a public database kept from logs that are not themselves public) and
vllm_tables.py (the same figures quoted in a public documentation table), each as a ``CASES`` tuple;
``tests/runbook/test_config_alone.py`` checks them and ``python -m tests.runbook.config_alone`` prints the README
table. A case either lands within 2 % (``gap`` empty) or is a known gap whose reason is
written down and whose current error is pinned to its sign and band, so an improvement flips it.
"""

from __future__ import annotations

import functools
import importlib
import re
from dataclasses import dataclass
from pathlib import Path

from kvplan.engines import plan_pool
from kvplan.engines.common import PoolPlan
from kvplan.models.deployment import load_deployment
from kvplan.models.from_hf import load_model

ROOT = Path(__file__).resolve().parents[3]
"""The repository root."""
SHARED = ROOT.parent / "shared"
WITHIN = 0.02
"""The issue's bar: pool tokens within 2 % of the logged figure."""

MEASURED_KNOBS = frozenset(
    {"weights_per_gpu", "non_kv_other", "pre_load_free", "runtime_overhead", "kv_cache_memory", "max_total_tokens"}
)
"""Knobs that carry a figure the engine measured at startup: a config-alone case may not set them."""

MODULES = ("sglang", "vllm_v1", "vllm_v0", "vllm_records", "vllm_tables")


@dataclass(frozen=True, kw_only=True)
class Case:
    log: str
    """The excerpt, relative to the repository root (tests/data/logs/field/...) or 'shared/logs/...'."""
    line: str
    """A verbatim piece of the log line that prints the pool (checked to be in the file)."""
    logged: int
    """The pool the line prints, in kvplan's logged_tokens sense (SGLang max_total_num_tokens; vLLM 'GPU KV
    cache size' tokens; V0 '# GPU blocks' × block size)."""
    label: str
    """Engine, version, model, GPU × n, layout — as the README table shows it."""
    model: str
    """A config.json path relative to the root, or a preset name."""
    sets: tuple[str, ...]
    """The stated deployment as --set knobs (engine, engine_version, gpu, tp, utilization, context length, ...)."""
    stated: str
    """Where each knob in ``sets`` is stated (the args line, the source's text, the file name)."""
    gap: str = ""
    """Non-empty: a known gap — why kvplan misses by more than 2 % (the error is pinned by ``gap_band``)."""
    gap_band: tuple[float, float] = (0.0, 0.0)
    """For a gap: the (low, high) the relative error lies in today, e.g. (-0.05, -0.02)."""
    source: str = ""
    """The source (loso.source_of) where the file name alone would name another: two logs of one issue thread or
    repository filed under different names are one source, so leave-one-source-out leaves both out."""

    def path(self) -> Path:
        return SHARED / self.log.removeprefix("shared/") if self.log.startswith("shared/") else ROOT / self.log


def plan(case: Case) -> PoolPlan:
    """kvplan's plan from the config and the stated knobs only."""
    knobs = {s.split("=", 1)[0].strip() for s in case.sets}
    bad = knobs & MEASURED_KNOBS
    if bad:
        raise ValueError(f"{case.log}: a config-alone case sets measured figures {sorted(bad)}")
    dep = load_deployment(None, [f"model={case.model}", *case.sets])
    return plan_pool(load_model(dep.model), dep)


@functools.cache  # one plan a case: the case's test, the table's row and its count, and README's table share it
def error(case: Case) -> tuple[int, float]:
    """(predicted pool tokens, relative error against the logged pool)."""
    predicted = plan(case).logged_tokens
    return predicted, (predicted - case.logged) / case.logged


def evidence_line(case: Case) -> str:
    """The log line that holds ``case.line``; its digits must spell ``case.logged`` (with or without commas)."""
    text = case.path().read_text(encoding="utf-8", errors="replace")
    for raw in text.splitlines():
        if case.line in raw and not raw.startswith("#"):
            return raw
    raise AssertionError(f"{case.log}: no line holds {case.line!r}")


def logged_in_line(case: Case) -> bool:
    line = evidence_line(case)
    numbers = {int(n.replace(",", "")) for n in re.findall(r"\d[\d,]*", line)}
    block = plan(case).page_tokens  # V0 logs '# GPU blocks': logged = blocks × block size
    return case.logged in numbers or (case.logged % block == 0 and case.logged // block in numbers)


def all_cases() -> tuple[Case, ...]:
    out: list[Case] = []
    for name in MODULES:
        try:
            mod = importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"{__name__}.{name}":
                raise
            continue
        out.extend(mod.CASES)
    return tuple(out)


def gap_headline(case: Case) -> str:
    """The first clause of a gap's reason, for the table ('weights', 'on a 24 GB GPU ...'); the whole reason is in
    the case."""
    if not case.gap:
        return ""
    head = re.split(r"[:;,(]", case.gap, maxsplit=1)[0].strip()
    return head if len(head) <= 72 else head[:69].rstrip() + "..."


def table() -> str:
    """The README table: every case, predicted vs logged."""
    rows = [
        "| log | stated deployment | logged pool | kvplan (config alone) | error | known gap |",
        "|---|---|---|---|---|---|",
    ]
    for case in all_cases():
        predicted, err = error(case)
        mark = "" if abs(err) <= WITHIN else " (gap)"
        shown = f"{err * 100:+.2f} %".replace("-", "\u2212")
        rows.append(
            f"| `{Path(case.log).name}` | {case.label} | {case.logged:,} | {predicted:,} | {shown}{mark} | "
            f"{gap_headline(case)} |"
        )
    cases = all_cases()
    ok = sum(1 for c in cases if abs(error(c)[1]) <= WITHIN)
    rows += ["", f"{ok} of {len(cases)} within 2 %."]
    return "\n".join(rows)
