"""What `kvplan admit --ctx 1M` loads on the default preset: only what its plan and report use (start-up time,
benchmarks/cli_latency.py). Each module below builds record classes at import (Python 3.11 compiles every
dataclass's methods, about 0.5 ms a class on the development machine) that this plan never instantiates."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.cli.modules_probe import ADMIT_RECORDS, modules_after

_COMPILED = (
    ADMIT_RECORDS
    + """
out = sorted(f"{c.__module__}.{c.__qualname__}" for c in records if c.__dataclass_params__.eq)
sys.stderr.write(json.dumps(out))
"""
)


def test_admit_on_a_preset_loads_no_per_tensor_reader_and_no_gate() -> None:
    # The default preset (glm-5.3 on glm-5.3-8xh200-sglang) plans from its measured weights point: its per-tensor
    # groups stay unlaid (kvplan.models.preset_weights.DeferredGroups), so the checkpoint readers and the engine's
    # load-time additions are never called; the report draws no gate verdict.
    mods = modules_after("admit", "--ctx", "1M")
    assert "kvplan.plan.admit" in mods and "kvplan.models.snapshot" in mods
    unused = {
        "kvplan.models.additions",
        "kvplan.models.config_tensors",
        "kvplan.models.safetensors",
        "kvplan.models.sharding",
        "kvplan.plan.gate",
        "kvplan.plan.lock_check",
    }
    assert not mods & unused, sorted(mods & unused)


def test_admit_on_a_preset_loads_no_stdlib_module_it_does_not_use() -> None:
    # secrets (for a temporary file's name: hmac, hashlib, base64) and importlib.resources (for the presets' folder:
    # zipfile, tempfile) cost about 3 ms each at start-up; os.urandom and the package's own path do the same work
    mods = modules_after("admit", "--ctx", "1M")
    assert not mods & {"secrets", "hashlib", "importlib.resources", "zipfile", "tempfile"}, sorted(mods)


def test_admit_on_built_in_presets_loads_no_yaml() -> None:
    # the default deployment, its model and gpus.yaml read from configs/__pycache__/ once a first command wrote
    # them (kvplan.models.preset_cache): importing yaml cost about 9.6 ms and parsing the three documents 3.6 ms
    modules_after("admit", "--ctx", "1M")  # the first run may parse and write the entries
    mods = modules_after("admit", "--ctx", "1M")
    assert not {m for m in mods if m == "yaml" or m.startswith("yaml.")}, sorted(mods)


def test_admit_compiles_few_dataclass_methods_at_import() -> None:
    # Python 3.11's dataclass compiles __repr__, __eq__ and __hash__ for each class at import (about 0.2 ms of the
    # 0.5 ms a class costs); a kvplan.record compiles them on first use, and admit on the default preset
    # uses them on one record class (Gpu's ==). Built the stdlib way on admit's path, and why:
    left = {
        "kvplan.models.from_hf._Indexer",  # not a record yet (about 0.5 ms a dataclass: band's and log_summary's
        # six cost 3 ms of admit's CPU; arch.Split, ordered, compiled ten methods)
    }
    proc = subprocess.run([sys.executable, "-c", _COMPILED], capture_output=True, text=True, check=False)
    built = set(json.loads(proc.stderr.strip().splitlines()[-1]))
    assert built <= left, sorted(built - left)  # 85 classes before records
