"""The measurements of AIConfigurator's ``silicon_sample.csv`` that kvplan's perf model is fitted and checked on:
one record per measurement, its deployment read the way the row's own id names it, and the held-out split.

Standard library only: benchmarks/perf_calibrate.py (kvplan's environment) and benchmarks/aic_predictions.py
(AIConfigurator's) both select their rows here, so both price the same measurements with the same deployments.

Two defects of the CSV, found by reading it (2026-12-07), are undone here rather than fitted around:
- **The same measurement under several sources.** ``2026-04-06.csv``, ``db-dump/2026-04-27`` and the gap-analysis
  files repeat measurements of ``2026-03-25.csv`` (identical TTFT and TPOT to 0.01 ms) and of each other, some under
  another model name (DeepSeek-R1 as DeepSeek-V3). A repeat of a training measurement is not held out, and a
  measurement counts once: twins are measurements of the same GPU, engine, model preset, ISL / OSL and concurrency
  whose TTFT and TPOT agree within 0.01 ms.
- **Expert-parallel deployments written with multiplied columns.** ``2026-04-06.csv`` and ``db-dump/2026-04-27``
  write a ``tpN_epM`` deployment as tp_size N·M, moe_tp N, moe_ep M (SGLang) or tp_size N, attention_dp M, moe_ep
  N·M (vLLM): 64 GPUs for DeepSeek-R1's tp8 ep8 on one 8-GPU B200 node. Their twins in ``2026-03-25.csv`` and the
  gap-analysis files write the same measurement as tp_size N, attention_dp 1, moe_tp 1, moe_ep M, as the id says.
  A row whose id names ``tpN`` and ``epM`` is read as the id names it (world N, expert parallel M, no DP
  attention); a row whose id names no tp (the db-dump's ``cfgNNN``) takes its twin's reading, and with no twin
  and expert parallel columns it is left out (``suspect``), its deployment unknown.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

TRAIN_SOURCE = "source_file=2026-03-25.csv"
"""The rows kvplan's coefficients are fitted on (the first collection); every other measurement is held out."""
PREFER = (TRAIN_SOURCE, "gap-analysis", "source_file=2026-04-06.csv", "db-dump")
"""A measurement's record read first: the sources whose columns agree with their ids, then the others."""
TWIN_MS = 0.01
PRESET = {
    "deepseek-ai/DeepSeek-R1": "deepseek-v3", "deepseek-ai/DeepSeek-V3": "deepseek-v3", "zhipuai/GLM-5": "glm-5",
    "moonshotai/Kimi-K2.5": "kimi-k2", "Qwen/Qwen3-235B-A22B-FP8": "qwen3-235b-a22b",
    "meta-llama/Llama-3.1-70B": "llama-3.1-70b", "meta-llama/Llama-3.1-8B-Instruct": "llama-3.1-8b",
    "nvidia/Llama-3.1-8B-Instruct-FP8": "llama-3.1-8b", "openai/gpt-oss-120b": "gpt-oss-120b",
}  # fmt: skip
"""The CSV's models kvplan has a preset for (model_path → preset name)."""
GPU = {"h200_sxm": "h200", "b200_sxm": "b200"}
_ID = re.compile(r"_tp(\d+)(?:_0)?_ep(\d+|none)")


@dataclass
class Measurement:
    row: dict[str, str]
    """The record read (PREFER's first source among the twins), its parallelism columns as the id names them."""
    train: bool
    """Some twin is in TRAIN_SOURCE: the fit saw it."""
    sources: list[str] = field(default_factory=list)


def kept(row: dict[str, str]) -> bool:
    """Aggregated serving (no PD split), pp 1, SGLang or vLLM, H200 / B200, a model kvplan has a preset for."""
    return (
        row["mode"] == "agg"
        and row["backend"] in ("sglang", "vllm")
        and row["system"] in GPU
        and row["model_path"] in PRESET
        and row["pp_size"] in ("1", "")
    )


def source_of(row: dict[str, str]) -> str:
    return row["silicon_data_source"].split(";")[0]


def concurrency_of(row: dict[str, str]) -> int:
    return int(row["silicon_data_source"].split("silicon_concurrency=")[1].split(";")[0])


def _rank(row: dict[str, str]) -> int:
    src = source_of(row)
    return next((i for i, p in enumerate(PREFER) if p in src), len(PREFER))


def _from_id(row: dict[str, str]) -> dict[str, str] | None:
    """The row with its tp / DP / expert columns as its id names them, else None (no ``tpN_epM`` in the id)."""
    m = _ID.search(row["id"])
    if not m:
        return None
    tp, ep = m.group(1), "1" if m.group(2) == "none" else m.group(2)
    return {**row, "tp_size": tp, "attention_dp_size": "1", "moe_tp_size": str(int(tp) // int(ep)), "moe_ep_size": ep}


def _expert_parallel(row: dict[str, str]) -> bool:
    return int(row["moe_ep_size"] or 1) > 1 or int(row["attention_dp_size"] or 1) > 1


def _twins(a: dict[str, str], b: dict[str, str]) -> bool:
    return all(abs(float(a[k]) - float(b[k])) <= TWIN_MS for k in ("silicon_ttft_ms", "silicon_tpot_ms"))


def measurements(rows: list[dict[str, str]]) -> tuple[list[Measurement], int]:
    """(one Measurement per distinct measurement of the rows, how many rows were left out as suspect). ``rows``:
    the CSV's rows that are ``kept``."""
    groups: dict[tuple[str, ...], list[list[dict[str, str]]]] = {}
    for row in sorted(rows, key=_rank):
        key = (row["system"], row["backend"], PRESET[row["model_path"]], row["isl"], row["osl"],
               str(concurrency_of(row)))  # fmt: skip
        clusters = groups.setdefault(key, [])
        home = next((c for c in clusters if _twins(c[0], row)), None)
        if home is None:
            clusters.append([row])
        else:
            home.append(row)
    out, suspect = [], 0
    for clusters in groups.values():
        for c in clusters:
            read = next((r for r in map(_from_id, c) if r is not None), None)
            if read is None:
                if _expert_parallel(c[0]):
                    suspect += len(c)
                    continue
                read = c[0]
            version = next((r["backend_version"] for r in c if r["backend_version"]), "")
            read = {**read, "backend_version": read["backend_version"] or version}
            out.append(Measurement(row=read, train=any(source_of(r) == TRAIN_SOURCE for r in c),
                                   sources=sorted({source_of(r) for r in c})))  # fmt: skip
    return out, suspect
