#!/usr/bin/env bash
# The GPU check of issue 5, for a machine with one CUDA GPU (the H200 device): kvplan probe, kvplan validate at
# full size for the default deployment in the SGLang and the vLLM layout, and a dcp 8 run; one JSON report.
# Needs python3 with torch (CUDA), nvidia-ml-py, typer, rich and pyyaml: the device image has them all.
# Usage:  OUT=/some/dir bash scripts/gpu-check.sh      (runs in well under 5 minutes on an H200)
set -u
cd "$(dirname "$0")/.."
out=${OUT:-gpu-check}
py=${PYTHON:-python3}
mkdir -p "$out"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1

step() {  # name, then kvplan arguments
  local name=$1; shift
  local t0=$(date +%s)
  timeout 150 "$py" -m kvplan "$@" --format json >"$out/$name.json" 2>"$out/$name.err"
  local rc=$?
  echo "$name: exit $rc in $(( $(date +%s) - t0 )) s"
  echo "$name $rc" >>"$out/exits.txt"
}

nvidia-smi --query-gpu=name,memory.total,memory.reserved,memory.used,driver_version --format=csv >"$out/nvidia-smi.csv" 2>&1
step probe probe --emit-deploy "$out/probed.yaml"
step validate-sglang validate --deploy glm-5.3-8xh200-sglang
# vLLM's 1M max_model_len does not start on 25.94 GiB of KV: validate the layout at a context that does
step validate-vllm validate --deploy glm-5.3-8xh200-vllm --set context_length=256K
step validate-sglang-dcp8 validate --deploy glm-5.3-8xh200-sglang --set dcp=8
step admit-probed admit --ctx 1M --deploy "$out/probed.yaml"

"$py" - "$out" <<'PY'
import json, pathlib, sys
out = pathlib.Path(sys.argv[1])
report = {"steps": {}}
for line in (out / "exits.txt").read_text().splitlines():
    name, rc = line.split()
    try:
        data = json.loads((out / f"{name}.json").read_text())
    except Exception as e:
        data = {"error": f"no JSON: {e}", "stderr": (out / f"{name}.err").read_text()[-2000:]}
    report["steps"][name] = {"exit": int(rc), "result": data}
rows = []
for name, step in report["steps"].items():
    for r in step["result"].get("ranks", []) if isinstance(step["result"], dict) else []:
        rows.append((name, r["predicted_bytes"], r["nbytes"], r["reserved_delta"], r["nvml_used_delta"], r["error"]))
report["table"] = [dict(zip(("step", "predicted", "nbytes", "reserved_delta", "nvml_used_delta", "error"), r)) for r in rows]
(out / "gpu-check.json").write_text(json.dumps(report, indent=2))
print(f"{'step':24} {'predicted B':>16} {'Σ nbytes B':>16} {'reserved Δ B':>16} {'NVML used Δ B':>16}")
for r in rows:
    print(f"{r[0]:24} {r[1]:>16,} {r[2]:>16,} {r[3] if r[3] is not None else 'n/a':>16} {r[4] if r[4] is not None else 'n/a':>16} {r[5] or ''}")
PY
