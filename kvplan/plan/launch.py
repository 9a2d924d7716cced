"""The launch command of a plan, in the engine's own flags for the version planned, and back.

``launch_command`` turns a planned deployment into ``python -m sglang.launch_server ...`` or ``vllm serve ...``
plus the environment variables the plan relies on, through the flag table of that version
(kvplan.models.engine_flags). ``parse_command`` is the inverse: an argparse parser built from the same table reads
a command line back into kvplan's knobs, so that a test can check the command re-plans to the same pool.
Knobs the engine only defaults are left to it: the command carries what the plan set, and the engine's defaults
are the ones kvplan computed.
"""

from __future__ import annotations

import argparse
import json
import shlex
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from kvplan.engines.common import PoolPlan
from kvplan.errors import InputError
from kvplan.models.deploy import AUTO_FIT, Deployment
from kvplan.models.engine_flags import FLAG_TABLES, SOURCES, Flag, flags_for
from kvplan.models.preset_repos import repo_for

ENGINE_NAMES = {"sglang": "SGLang", "vllm": "vLLM"}
PROGRAM = {"sglang": ("python", "-m", "sglang.launch_server"), "vllm": ("vllm", "serve")}

NOT_FLAGS = ("gpu", "gpus_per_node", "weights_per_gpu", "pre_load_free", "runtime_overhead", "non_kv_other",
             "mla_layout", "gpu_memory", "gpu_sm")  # fmt: skip
"""kvplan's own inputs: what the hardware is and what was measured; no engine takes them as a flag."""

_SKIP = ("model", "engine", "engine_version", *NOT_FLAGS)
_MEMORY_INPUTS = ("weights_per_gpu", "pre_load_free", "runtime_overhead", "non_kv_other")


@dataclass(frozen=True, kw_only=True)
class Launch:
    engine: str
    engine_version: str
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    notes: tuple[str, ...] = ()
    """What the command cannot carry, and warnings, one line each."""
    inputs: tuple[tuple[str, int], ...] = ()
    """(knob, bytes) of kvplan's own memory inputs the plan used: no engine flag carries them."""
    source: str = ""

    @property
    def shell(self) -> str:
        """One line a POSIX shell runs as is: ``VAR=1 python -m sglang.launch_server ...``."""
        return shlex.join([f"{k}={v}" for k, v in self.env] + list(self.argv))


def _set_knobs(dep: Deployment) -> dict[str, Any]:
    """The knobs whose value is not Deployment's own default (None, False, 1, 'auto'): what the plan relies on."""
    out: dict[str, Any] = {}
    for f in fields(Deployment):
        value = getattr(dep, f.name)
        if f.name in _SKIP or f.name in ("name", "source", "description", "explicit", "defaulted", "written_for",
                                         "from_file", "carry"):  # fmt: skip
            continue
        if value != f.default or f.name == "tp":  # tp: both engines default to 1; the plan's tp is always said
            out[f.name] = value
    return out


def _engine_value(row: Flag, value: Any, engine: str, version: str) -> str:
    text = _text(value)
    text = dict(row.values).get(text, text)
    if row.choices and text not in row.choices:
        raise InputError(
            f"{row.knob} {text}: {ENGINE_NAMES[engine]} {version}'s {row.spelling} takes "
            f"{', '.join(row.choices)} ({SOURCES[engine]}); set one of those"
        )
    return text


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, tuple):
        return ",".join(str(x) for x in value)
    return str(value)


def model_path(model_ref: str) -> str:
    """What the engine loads: a preset's Hugging Face repo, a snapshot folder (a config.json's folder)."""
    repo = repo_for(model_ref)
    if repo is not None:
        return repo
    path = Path(model_ref)
    if path.suffix in (".yaml", ".yml"):
        raise InputError(
            f"--emit-command: {model_ref} is a kvplan model file, which no engine loads: plan with --model set to "
            "a preset, a Hugging Face repository or a snapshot folder"
        )
    return str(path.parent) if path.name == "config.json" else model_ref


def launch_command(plan: PoolPlan, model_ref: str) -> Launch:
    """The command line and environment that start ``plan``'s deployment on its engine version."""
    dep, engine, version = plan.deployment, plan.engine, plan.engine_version
    rows = flags_for(engine, version)
    family = "dsa" if plan.arch.is_dsa else "other"
    argv: list[str] = list(PROGRAM[engine])
    env: list[tuple[str, str]] = []
    path = model_path(model_ref)
    argv += [path] if engine == "vllm" else ["--model-path", path]
    for knob, value in _set_knobs(dep).items():
        mine = [r for r in rows if r.knob == knob and r.family in ("", family)]
        if not mine:
            missing = [r for r in FLAG_TABLES[engine] if r.knob == knob]
            when = f" ({_ranges(missing)})" if missing else ""
            raise InputError(f"{ENGINE_NAMES[engine]} {version} has no launch flag for {knob}{when}: unset it to emit")
        argv_part, env_part = _emit(knob, value, mine, plan)
        argv += argv_part
        env += env_part
    notes = _notes(dep)
    if plan.startup_error:  # the flags parse, but the plan says the engine stops at start-up: said first
        notes = (f"WARNING: {ENGINE_NAMES[engine]} would not start this: {' '.join(plan.startup_error.split())}",
                 *notes)  # fmt: skip
    if engine == "vllm" and dep.dp_attention > 1:  # vLLM's DP ranks are whole engines: non-MoE layers replicated
        notes += (f"kvplan splits the embeddings, dense and shared-expert weights over all {dep.tp} GPUs; each of "
                  f"vLLM's {dep.dp_attention} data-parallel ranks holds them at tensor-parallel "
                  f"{dep.tp // dep.dp_attention}: the planned pool is an upper bound",)  # fmt: skip
    if dep.nodes > 1 and engine == "sglang":  # every node runs it, its own --node-rank, node 0's address
        argv += ["--dist-init-addr", "NODE0_IP:20000", "--node-rank", "0"]
        notes += (f"run on each of the {dep.nodes} nodes with --node-rank 0..{dep.nodes - 1}; NODE0_IP is node 0's "
                  "address",)  # fmt: skip
    elif dep.nodes > 1:
        notes += (f"start one Ray cluster over the {dep.nodes} nodes, then run this on its head node",)
    inputs = tuple((k, int(getattr(dep, k))) for k in _MEMORY_INPUTS if getattr(dep, k) is not None)
    return Launch(engine=engine, engine_version=version, argv=tuple(argv), env=tuple(env), notes=notes,
                  inputs=inputs, source=SOURCES[engine])  # fmt: skip


def _ranges(rows: list[Flag]) -> str:
    def one(r: Flag) -> str:
        name = r.spelling or "MODEL"
        if r.since and r.until:
            return f"{name} from {r.since} to before {r.until}"
        return f"{name} from {r.since}" if r.since else f"{name} before {r.until}"

    return "; ".join(one(r) for r in rows)


def _emit(knob: str, value: Any, rows: list[Flag], plan: PoolPlan) -> tuple[list[str], list[tuple[str, str]]]:
    dep, engine, version = plan.deployment, plan.engine, plan.engine_version
    row = rows[0]
    if row.kind == "env":
        return [], [(row.spelling, _engine_value(row, value, engine, version))]
    if row.kind == "true":
        if knob == "ep" and engine == "vllm" and value != dep.tp:
            raise InputError(f"vLLM's --enable-expert-parallel spans all {dep.tp} GPUs (its tp × dp), not ep "
                             f"{value}: set ep={dep.tp} or leave it out")  # fmt: skip
        return ([row.spelling] if value else []), []
    if row.kind == "bool":
        return [row.spelling if value else "--no-" + row.spelling[2:]], []
    if row.part:  # SGLang DSA: 'name' for both sides or 'prefill/decode'
        parts = str(value).split("/")
        pick = {"prefill": parts[0], "decode": parts[-1]}
        return [x for r in rows for x in (r.spelling, pick[r.part])], []
    if knob == "dp_attention" and engine == "sglang":
        return [row.spelling, str(value), "--enable-dp-attention"], []
    if knob == "tp" and engine == "vllm":  # kvplan's tp counts every GPU; vLLM's DP ranks each hold tp / dp
        return [row.spelling, str(value // max(dep.dp_attention, 1))], []
    if knob == "speculative_num_draft_tokens":
        if engine == "vllm":  # DeepSeek/GLM MTP: SpeculativeConfig method "mtp", one chain of drafts
            return [row.spelling, json.dumps({"method": "mtp", "num_speculative_tokens": value})], []
        steps = max(int(value) - 1, 1)  # a chain (topk 1) of num_steps drafts verifies steps + 1 tokens
        topk = [] if dep.speculative_eagle_topk is not None else ["--speculative-eagle-topk", "1"]
        return ["--speculative-algorithm", "EAGLE", "--speculative-num-steps", str(steps), *topk,
                row.spelling, str(value)], []  # fmt: skip
    if knob == "rope_scaling":
        rs = plan.arch.documented_rope_scaling
        if rs is None:
            raise InputError(f"rope_scaling {value}: {plan.arch.name} documents no RoPE scaling to pass")
        return [row.spelling, rs.override_json()], []
    if knob == "context_length" and value == AUTO_FIT:
        return [row.spelling, "auto"], []
    return [row.spelling, _engine_value(row, value, engine, version)], []


def _notes(dep: Deployment) -> tuple[str, ...]:
    out = [f"planned on {dep.nodes * dep.gpus_per_node} x {dep.gpu.name} ({dep.gpus_per_node} per node)"]  # ASCII
    if dep.mla_layout:
        out.append(f"mla_layout {dep.mla_layout} has no flag: the engine picks the row from --kv-cache-dtype and "
                   "the attention backend")  # fmt: skip
    return tuple(out)


# --------------------------------------------------------------------------- back


def parser_for(engine: str, version: str) -> argparse.ArgumentParser:
    """An argparse parser with the flags the table gives this version (the engine's own parser, reduced)."""
    p = argparse.ArgumentParser(prog=" ".join(PROGRAM[engine]), add_help=False, allow_abbrev=engine == "sglang")
    for row in flags_for(engine, version):
        dest = f"{row.knob or row.spelling.lstrip('-').replace('-', '_')}{'.' + row.part if row.part else ''}"
        if row.kind == "env":
            continue
        if not row.spelling:
            p.add_argument(dest)  # vllm serve MODEL
        elif row.kind == "true":
            p.add_argument(row.spelling, *row.aliases, dest=dest, action="store_true", default=None)
        elif row.kind == "bool":
            p.add_argument(row.spelling, *row.aliases, dest=dest, action=argparse.BooleanOptionalAction)
        else:
            names = [s for s in (row.spelling, *row.aliases) if s not in p._option_string_actions]
            if names:
                p.add_argument(*names, dest=dest)
    return p


def parse_command(engine: str, version: str, argv: list[str], env: dict[str, str]) -> dict[str, str]:
    """kvplan knobs (``--set`` spellings, KNOB -> VALUE text) from a launch command of ``engine`` ``version``."""
    args = vars(parser_for(engine, version).parse_args(argv[len(PROGRAM[engine]) :]))
    out: dict[str, str] = {}
    for dest, value in args.items():
        if value is None:
            continue
        knob, _, part = dest.partition(".")
        if part:
            prefill, decode = args.get(f"{knob}.prefill"), args.get(f"{knob}.decode")
            out[knob] = str(prefill) if prefill == decode else f"{prefill}/{decode}"
        elif knob == "tp" and engine == "vllm":  # back to kvplan's tp: every GPU, tp × dp
            out["tp"] = str(int(value) * int(args.get("dp_attention") or 1))
        elif knob == "ep" and engine == "vllm":
            out["ep"] = str(int(args.get("tp") or 1) * int(args.get("dp_attention") or 1)) if value else "1"
        elif knob == "speculative_num_draft_tokens" and engine == "vllm":
            out[knob] = str(json.loads(value)["num_speculative_tokens"])
        elif knob == "kv_cache_memory":  # --kv-cache-memory-bytes: bytes, said as such to kvplan's reader
            out[knob] = f"{value}B"
        elif knob == "rope_scaling":
            out[knob] = json.loads(value)["rope_scaling"]["rope_type"]
        elif knob in ("enable_dp_attention", "speculative_algorithm", "speculative_num_steps", "trust_remote_code",
                      "node_rank", "dist_init_addr"):  # fmt: skip
            continue
        else:
            out[knob] = str(value).lower() if isinstance(value, bool) else str(value)
    for row in flags_for(engine, version):
        if row.kind == "env" and row.spelling in env:
            out[row.knob] = env[row.spelling]
    if engine == "sglang" and "dp_attention" in out and not args.get("enable_dp_attention"):
        del out["dp_attention"]  # --dp-size alone: data-parallel replicas, each planned alone
    return out
