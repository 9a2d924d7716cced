"""`kvplan validate` on the CPU build of torch: byte-exact pools, an injected allocation failure, two gloo ranks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kvplan.probes.tensors import pool_tensors, predicted_bytes
from kvplan.probes.validate import scaled, validate
from tests.conftest import make_plan

torch = pytest.importorskip("torch")
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("deploy", "sets"),
    [
        ("glm-5.3-8xh200-sglang", {}),
        ("glm-5.3-8xh200-sglang", {"dcp": 8, "attention_backend": "flashmla_kv"}),
        ("glm-5.3-8xh200-sglang", {"speculative_num_draft_tokens": 3}),
        ("glm-5.3-8xh200-sglang", {"engine_version": "0.5.9"}),
        ("glm-5.3-8xh200-vllm", {}),
        ("glm-5.3-8xh200-vllm", {"speculative_num_draft_tokens": 1, "kv_cache_dtype": "auto"}),
    ],
)
@pytest.mark.parametrize("tokens", [1024, 4096])
def test_nbytes_equal_the_prediction(deploy: str, sets: dict[str, Any], tokens: int) -> None:
    p = scaled(make_plan(deploy, **sets), tokens)
    m = validate(p, device="cpu")
    assert m.error is None
    assert m.nbytes == m.predicted_bytes == predicted_bytes(p)
    assert m.held


def test_sglang_small_pool_by_hand() -> None:
    # 1,024 rows, page 64: 78 MLA buffers of (1,024 + 64) × 656 B; 21 index buffers of (1,024 + 64 + 1) // 64 = 17
    # pages × 8,448 B; 57 empty placeholders; the context is capped to the pool (1,024), so
    # mrr = min(clamp(int(1,024 / 1,024 × 512), 2048, 4096), 1,024 // 2) = 512 and req_to_token = 513 × 1,028 × 4 B
    p = scaled(make_plan(), 1024)
    assert (p.rows, p.context_len, p.max_running_requests) == (1024, 1024, 512)
    specs = pool_tensors(p)
    assert sum(1 for s in specs if s.name.startswith("index_k") and s.shape[0] == 0) == 57
    expected = 78 * 1088 * 656 + 21 * 17 * 8448 + 513 * 1028 * 4
    assert sum(s.nbytes for s in specs) == expected == validate(p, device="cpu").nbytes


def test_injected_allocation_failure_frees_everything(monkeypatch: pytest.MonkeyPatch) -> None:
    import weakref

    p = scaled(make_plan(), 1024)
    live: list[weakref.ref[Any]] = []
    real = torch.zeros
    calls = {"n": 0}

    def flaky(*args: Any, **kw: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 40:
            raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
        t = real(*args, **kw)
        live.append(weakref.ref(t))
        return t

    monkeypatch.setattr(torch, "zeros", flaky)
    m = validate(p, device="cpu", torch=torch)
    assert m.error == "allocation failed at kv_buffer[39]"
    assert not m.held
    assert len(live) == 39 and all(r() is None for r in live)


def test_two_gloo_ranks() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
           "-m", "kvplan", "validate", "--device", "cpu", "--tokens", "1024", "--format", "json"]  # fmt: skip
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    start = r.stdout.index("{")
    d = json.loads(r.stdout[start:])
    assert [x["rank"] for x in d["ranks"]] == [0, 1]
    assert all(x["nbytes"] == x["predicted_bytes"] for x in d["ranks"])
    assert d["held"] is True
