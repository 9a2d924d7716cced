"""AIConfigurator's own predictions for the measured rows kvplan's perf model is checked on, so README can print
AIConfigurator's error beside kvplan's on the same rows (issue: "the same figures computed for AIConfigurator's own
predictions on those rows printed beside kvplan's").

Runs in its own environment, never kvplan's (AIConfigurator is Apache-2.0, NVIDIA; kvplan does not depend on it):

    python -m venv /tmp/aicenv
    /tmp/aicenv/bin/pip install aiconfigurator==0.12.0      # pulls aiconfigurator-core 0.12.0 with its databases
    /tmp/aicenv/bin/python benchmarks/aic_predictions.py SILICON_SAMPLE_CSV > /tmp/aic_pred.csv
    PYTHONPATH=. python benchmarks/perf_calibrate.py SILICON_SAMPLE_CSV --aic=/tmp/aic_pred.csv
    PYTHONPATH=. python benchmarks/perf_published.py --aic-rows > /tmp/pub_rows.csv    # the published points
    /tmp/aicenv/bin/python benchmarks/aic_predictions.py --given /tmp/pub_rows.csv > /tmp/aic_pub.csv
    PYTHONPATH=. python benchmarks/perf_published.py --aic=/tmp/aic_pub.csv

Each measurement kvplan is checked on (benchmarks/_silicon_rows.py: mode agg, pp 1, SGLang or vLLM, H200 / B200, a
model kvplan has a preset for; each measurement once, its deployment as its id names it; the first PER_GROUP of each
group by row id, the later sources' groups and the training groups perf_calibrate leaves out of a refit alike) is
estimated with ``aiconfigurator.cli.api.cli_estimate`` in agg mode with the row's own system and backend, ISL / OSL,
batch size (the row's concurrency), tp, attention-dp, MoE tp / ep and quantization, AIConfigurator's SILICON
database and its defaults for everything else. Output: CSV of the row id
and AIConfigurator's TTFT / TPOT in ms, or the one-line reason it gave no estimate.
"""

from __future__ import annotations

import contextlib
import csv
import io
import logging
import sys
from typing import Any

from _silicon_rows import PRESET, kept, measurements  # benchmarks/, beside this script

AIC_NAME = {  # the name AIConfigurator's model_configs/ files carry for the same checkpoint (it reads no Hub offline)
    "zhipuai/GLM-5": "zai-org/GLM-5-FP8",
    "meta-llama/Llama-3.1-70B": "meta-llama/Meta-Llama-3.1-70B",
    "meta-llama/Llama-3.1-8B-Instruct": "meta-llama/Meta-Llama-3.1-8B",
    "nvidia/Llama-3.1-8B-Instruct-FP8": "meta-llama/Meta-Llama-3.1-8B",
}
PER_GROUP = 8  # rows estimated per held-out (model, GPU, engine, version) group: about 5 s of CPU each


def _int(text: str, default: int | None = None) -> int | None:
    return int(float(text)) if text not in ("", None) else default


def estimate(row: dict[str, str]) -> tuple[float, float]:
    from aiconfigurator.cli.api import cli_estimate  # the peer's package, in its own environment only

    tp = _int(row["tp_size"], 1) or 1
    moe_tp, moe_ep = _int(row["moe_tp_size"]), _int(row["moe_ep_size"])
    result = cli_estimate(
        AIC_NAME.get(row["model_path"], row["model_path"]),
        row["system"],
        mode="agg",
        backend_name=row["backend"],
        backend_version=None,  # its database's version for the system: the measured one is rarely collected
        isl=int(row["isl"]),
        osl=int(row["osl"]),
        batch_size=_int(row["batch_size"], 1) or 1,
        tp_size=tp,
        attention_dp_size=_int(row["attention_dp_size"], 1) or 1,
        moe_tp_size=moe_tp,
        moe_ep_size=moe_ep,
        gemm_quant_mode=row["gemm_quant_mode"] or None,
        moe_quant_mode=row["moe_quant_mode"] or None,
    )
    return float(result.ttft), float(result.tpot)


def main(argv: list[str]) -> int:
    logging.disable(logging.WARNING)
    out = csv.writer(sys.stdout)
    out.writerow(["id", "aic_ttft_ms", "aic_tpot_ms", "error"])
    if argv[0] == "--given":  # rows as written (perf_published.py --aic-rows), each estimated as it stands
        with open(argv[1], newline="", encoding="utf-8") as f:
            _estimate_all(list(csv.DictReader(f)), out)
        return 0
    with open(argv[0], newline="", encoding="utf-8") as f:
        found, _ = measurements([r for r in csv.DictReader(f) if kept(r)])
    seen = {m.row["id"]: m.train for m in found}  # each measurement once, its deployment as its id names it
    per_group: dict[tuple[object, ...], int] = {}
    chosen = []
    for r in sorted((m.row for m in found), key=lambda r: r["id"]):  # the first PER_GROUP ids: no choice by result
        g = (PRESET[r["model_path"]], r["system"], r["backend"], r["backend_version"], seen[r["id"]])
        if per_group.get(g, 0) < PER_GROUP:
            per_group[g] = per_group.get(g, 0) + 1
            chosen.append(r)
    _estimate_all(chosen, out)
    return 0


def _estimate_all(rows: list[dict[str, str]], out: Any) -> None:
    for row in rows:
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                ttft, tpot = estimate(row)
            out.writerow([row["id"], f"{ttft:.3f}", f"{tpot:.3f}", ""])
        except Exception as exc:  # the peer's refusal is a row's answer, said in one line
            out.writerow([row["id"], "", "", f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"])
        sys.stdout.flush()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
