"""Issue 29 item 1: the launch command of a plan parses under its engine version's flag table and re-plans to the
same pool; item 5: the engines' flag spellings under --set, preset aliases.

The round trip: plan -> ``launch_command`` -> an argparse parser built from the flag table of that version
(``parser_for``) -> kvplan knobs -> a deployment holding only those knobs and kvplan's own inputs (the GPU, GPUs
per node) -> ``plan_pool``. The pool must be the same, row for row. Expected spellings are the engines' own:
SGLang ``python/sglang/srt/server_args.py`` (0.5.23: ``ServerArgs.tp_size`` -> ``--tp-size``, ``dcp_size``
aliases ``--decode-context-parallel-size``, ``kv_cache_dtype`` choices auto / fp8_e5m2 / fp8_e4m3 / bf16 /
bfloat16 / ...; the DSA backends ``--dsa-*-backend`` with ``--nsa-*`` kept as deprecated aliases; 0.5.9:
``--nsa-prefill-backend`` / ``--nsa-decode-backend`` in ``add_cli_args``); vLLM ``vllm/engine/arg_utils.py``
``EngineArgs.add_cli_args`` (``--tensor-parallel-size``, ``--block-size``, ``--max-num-seqs``, ``--max-model-len``
through ``human_readable_int_or_auto``) and ``vllm serve MODEL`` (positional).
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.engines import plan_pool
from kvplan.engines.common import PoolPlan
from kvplan.errors import InputError
from kvplan.models.deploy import Requirements
from kvplan.models.deployment import canonical_key, load_deployment
from kvplan.models.from_hf import load_model
from kvplan.models.gpus import find_gpu
from kvplan.models.preset_repos import preset_for_repo
from kvplan.models.presets import preset_names
from kvplan.plan.fit import FitQuery, fit
from kvplan.plan.launch import Launch, launch_command, parse_command, parser_for

runner = CliRunner(env={"KVPLAN_FORMAT": None, "COLUMNS": "160"})
M = 1 << 20


def _plan(deploy: str, sets: tuple[str, ...] = (), model: str | None = None) -> PoolPlan:
    dep = load_deployment(deploy, sets)
    return plan_pool(load_model(model or dep.model), dep)


def _replan(launch: Launch, plan: PoolPlan, tmp: Path) -> PoolPlan:
    """The pool the emitted command gives: its flags (read by the version's parser) plus kvplan's own inputs."""
    knobs = parse_command(launch.engine, launch.engine_version, list(launch.argv), dict(launch.env))
    model = knobs.pop("model")
    dep = plan.deployment
    doc = tmp / "from-command.yaml"
    doc.write_text(
        f"model: {preset_for_repo(model) or model}\nengine: {launch.engine}\n"
        f'engine_version: "{launch.engine_version}"\ngpu: {dep.gpu.key}\ngpus_per_node: {dep.gpus_per_node}\n',
        encoding="utf-8",
    )
    again = load_deployment(str(doc), [f"{k}={v}" for k, v in knobs.items()])
    return plan_pool(load_model(again.model), again)


def _same_pool(a: PoolPlan, b: PoolPlan) -> None:
    assert (a.rows, a.logged_tokens, a.page_tokens, a.available_bytes, a.cell, a.context_len) == (
        b.rows,
        b.logged_tokens,
        b.page_tokens,
        b.available_bytes,
        b.cell,
        b.context_len,
    )
    assert a.max_running_requests == b.max_running_requests
    assert a.startup_error == b.startup_error


# Each variant turns on flags the presets leave off: dcp (SGLang --dcp-size from 0.5.10, vLLM
# --decode-context-parallel-size), dp attention (SGLang --dp-size + --enable-dp-attention, vLLM
# --data-parallel-size), MTP (SGLang EAGLE chain, vLLM --speculative-config), memory fractions, page sizes,
# eager mode, pipeline stages with their partition (environment), context past the model's.
VARIANTS: dict[str, tuple[tuple[str, ...], ...]] = {
    "glm-5.3-8xh200-sglang": (
        (),
        ("dcp=8",),
        ("dp_attention=8", "ep=8"),
        ("speculative_num_draft_tokens=4",),
        ("mem_fraction_static=0.85", "max_running_requests=64", "chunked_prefill_size=4096"),
        ("attention_backend=flashmla_sparse/flashmla_kv",),
        ("disable_cuda_graph=true", "cuda_graph_max_bs=32"),
        ("max_total_tokens=200000", "context_length=200000"),
        ("engine_version=0.5.9", "kv_cache_dtype=bf16"),
        ("engine_version=0.5.9", "attention_backend=flashmla_kv"),
        ("pp=2", "tp=4", "pp_layer_partition=40,38"),
        ("nodes=2", "tp=16", "dcp=16"),  # --nnodes 2 with node 0's --dist-init-addr and --node-rank
    ),
    "glm-5.3-8xh200-vllm": (
        (),
        ("dcp=8", "context_length=1M"),
        ("gpu_memory_utilization=0.95", "max_running_requests=32", "max_num_batched_tokens=8192"),
        ("speculative_num_draft_tokens=1",),
        ("context_length=auto",),
        ("disable_cuda_graph=true",),
        ("dp_attention=8", "ep=8"),  # vLLM: --tensor-parallel-size 1 --data-parallel-size 8, 8 GPUs
        ("context_length=2M", "allow_long_context=true"),
        ("kv_cache_memory=20GiB",),
    ),
}


@pytest.mark.parametrize(
    "deploy,sets", [(d, s) for d, variants in VARIANTS.items() for s in variants], ids=lambda x: str(x)
)
def test_every_preset_command_parses_and_replans_to_the_same_pool(deploy: str, sets: tuple[str, ...], tmp_path: Path):
    plan = _plan(deploy, sets)
    launch = launch_command(plan, plan.deployment.model)
    _same_pool(_replan(launch, plan, tmp_path), plan)


def test_every_preset_deployment_is_covered() -> None:
    assert set(VARIANTS) == set(preset_names("deployments"))


def test_every_fit_result_parses_and_replans(tmp_path: Path) -> None:
    """Every planned candidate of the corpus's fit queries (tests/plan/test_fit.py: GLM-5.3 on H200, 1M, both
    engines, and 600K, where fit raises the memory fraction; Llama-3.1-70B; gpt-oss-120b; the CLI's default GPUs
    H200 and B200) round-trips, not only the best."""
    h200, b200 = find_gpu("h200"), find_gpu("b200")
    queries = [
        ("glm-5.3", FitQuery(model_ref="glm-5.3", gpus=(h200, b200), engines=("sglang", "vllm"),
                             requirements=Requirements(min_ctx_tokens=M), max_gpus=8, mtp=(False, True))),
        ("glm-5.3", FitQuery(model_ref="glm-5.3", gpus=(h200,), engines=("sglang", "vllm"),
                             requirements=Requirements(min_ctx_tokens=600 * 1024), max_gpus=8, mtp=(False,))),
        ("llama-3.1-70b", FitQuery(model_ref="llama-3.1-70b", gpus=(h200,), engines=("sglang", "vllm"),
                                   requirements=Requirements(min_ctx_tokens=128 * 1024), max_gpus=8, mtp=(False,))),
        ("gpt-oss-120b", FitQuery(model_ref="gpt-oss-120b", gpus=(h200,), engines=("sglang", "vllm"),
                                  requirements=Requirements(min_ctx_tokens=128 * 1024), max_gpus=2)),
    ]  # fmt: skip
    seen, raised = 0, 0
    for model, q in queries:
        for o in fit(load_model(model), q).outcomes:
            if o.plan is None:
                continue
            _same_pool(_replan(launch_command(o.plan, q.model_ref), o.plan, tmp_path), o.plan)
            seen += 1
            raised += o.memory is not None  # fit's own memory knob goes into the command too
    assert seen >= 20 and raised >= 1


def test_spellings_follow_the_version() -> None:
    # SGLang 0.5.23: --dsa-*-backend (server_args.py DSA_CHOICES; --nsa-* a deprecated alias); 0.5.9: --nsa-*
    new = launch_command(_plan("glm-5.3-8xh200-sglang", ("attention_backend=flashmla_kv",)), "glm-5.3")
    old = launch_command(
        _plan("glm-5.3-8xh200-sglang", ("engine_version=0.5.9", "attention_backend=flashmla_kv")), "glm-5.3"
    )
    assert "--dsa-decode-backend" in new.argv and "--nsa-decode-backend" not in new.argv
    assert "--nsa-decode-backend" in old.argv and "--dsa-decode-backend" not in old.argv
    # SGLang's kv_cache_dtype choices have no bare 'fp8': the preset's fp8_e4m3 goes as is
    assert new.argv[new.argv.index("--kv-cache-dtype") + 1] == "fp8_e4m3"
    # vLLM: serve's positional model, --block-size for page_size, --max-model-len auto (human_readable_int_or_auto)
    v = launch_command(_plan("glm-5.3-8xh200-vllm", ("context_length=auto", "page_size=64")), "glm-5.3")
    assert v.argv[:3] == ("vllm", "serve", "zai-org/GLM-5.3-FP8")
    assert v.argv[v.argv.index("--max-model-len") + 1] == "auto"
    assert v.argv[v.argv.index("--block-size") + 1] == "64"
    assert parser_for("vllm", "0.33.0").parse_args(list(v.argv[2:])).context_length == "auto"


def test_environment_the_plan_relies_on() -> None:
    s = launch_command(_plan("glm-5.3-8xh200-sglang", ("pp=2", "tp=4", "pp_layer_partition=40,38")), "glm-5.3")
    assert dict(s.env) == {"SGLANG_PP_LAYER_PARTITION": "40,38"}
    v = launch_command(_plan("glm-5.3-8xh200-vllm", ("context_length=2M", "allow_long_context=true")), "glm-5.3")
    assert dict(v.env) == {"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"}
    assert v.shell.startswith("VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 vllm serve zai-org/GLM-5.3-FP8 ")
    assert shlex.split(v.shell)[1:] == list(v.argv)


def test_nothing_the_version_would_reject() -> None:
    # vLLM's --kv-cache-memory-bytes came in 0.11.0 (CacheConfig.kv_cache_memory_bytes): 0.10.2 has no such flag
    plan = _plan("glm-5.3-8xh200-vllm", ("engine_version=0.10.2", "kv_cache_memory=20GiB"))
    with pytest.raises(InputError, match="no launch flag for kv_cache_memory"):
        launch_command(plan, "glm-5.3")
    # vLLM's CacheDType has no fp16 spelling
    plan = _plan("glm-5.3-8xh200-vllm", ("model=llama-3.1-8b", "tp=1", "kv_cache_dtype=fp16", "context_length=8K"))
    with pytest.raises(InputError, match="--kv-cache-dtype takes auto, bfloat16, fp8"):
        launch_command(plan, "llama-3.1-8b")


def test_cli_emit_command_on_admit_fit_and_deployments_show() -> None:
    r = runner.invoke(app, ["deployments", "show", "glm-5.3-8xh200-sglang", "--emit-command", "auto"])
    assert r.exit_code == 0, r.output
    assert "python -m sglang.launch_server \\\n    --model-path zai-org/GLM-5.3-FP8 \\\n    --tp-size 8" in r.stdout
    r = runner.invoke(app, ["admit", "--ctx", "1M", "--emit-command", "vllm", "--format", "json"])
    assert r.exit_code == 1  # the verdict still decides the exit code: vLLM's GLM-5.3 pool holds < 1M
    doc = json.loads(r.stdout)
    assert doc["launch"]["argv"][:3] == ["vllm", "serve", "zai-org/GLM-5.3-FP8"]
    assert doc["launch"]["engine_version"] == "0.33.0"
    r = runner.invoke(app, ["fit", "--model", "glm-5.3", "--gpu", "h200", "--engine", "sglang", "--max-gpus", "8",
                            "--mtp", "off", "--require-ctx", "1M", "--emit-command", "auto"])  # fmt: skip
    assert r.exit_code == 0, r.output
    assert r.stdout.splitlines()[-1].strip().startswith("--")
    r = runner.invoke(app, ["admit", "--ctx", "1M", "--emit-command", "trtllm"])
    assert r.exit_code == 2 and "choose sglang, vllm or auto" in r.output


# ----------------------------------------------------------------------------- item 5: --set, aliases


@pytest.mark.parametrize(
    "typed,knob",
    [
        ("gpu-memory-utilization", "gpu_memory_utilization"),  # vLLM CacheConfig.gpu_memory_utilization
        ("tensor-parallel-size", "tp"),  # both engines
        ("tp-size", "tp"),  # SGLang ServerArgs.tp_size
        ("mem-fraction-static", "mem_fraction_static"),
        ("mem-frac", "mem_fraction_static"),  # argparse allow_abbrev: SGLang users type --mem-frac
        ("max-num-seqs", "max_running_requests"),
        ("block-size", "page_size"),
        ("enforce-eager", "disable_cuda_graph"),
        ("kv-cache-memory-bytes", "kv_cache_memory"),
        ("decode-context-parallel-size", "dcp"),
    ],
)
def test_engine_spellings_under_set(typed: str, knob: str) -> None:
    assert canonical_key(typed, abbrev=True) == knob


def test_a_file_key_is_never_an_abbreviation(tmp_path: Path) -> None:
    # argparse's prefix matching is a command line's: a deployment file's 'mem_frac' is an unknown key, exit 2
    doc = tmp_path / "d.yaml"
    doc.write_text("model: glm-5.3\nmem_frac: 0.8\n", encoding="utf-8")
    with pytest.raises(InputError, match="unknown key"):
        load_deployment(str(doc))


def test_set_engine_spelling_plans_like_the_knob() -> None:
    a = _plan("glm-5.3-8xh200-sglang", ("mem-frac=0.8",))
    b = _plan("glm-5.3-8xh200-sglang", ("mem_fraction_static=0.8",))
    assert a.rows == b.rows and a.knob("mem_fraction_static").origin == "set"


def test_unknown_set_key_names_the_nearest_knob() -> None:
    r = runner.invoke(app, ["admit", "--ctx", "1M", "--set", "gpu-memory-utilisation=0.9"])
    assert r.exit_code == 2
    assert "did you mean 'gpu_memory_utilization'" in r.output and len(r.output.strip().splitlines()) == 1
    r = runner.invoke(app, ["admit", "--ctx", "1M", "--set", "max-num-seqz=64"])  # nearest: vLLM's flag
    assert r.exit_code == 2 and "did you mean 'max_running_requests', vLLM's --max-num-seqs?" in r.output


def test_deepseek_r1_names_are_deepseek_v3() -> None:
    # README: "deepseek-v3 (R1 shares its config)"; deepseek-ai/DeepSeek-R1(-0528) config.json = DeepSeek-V3's
    v3 = load_model("deepseek-v3")
    for name in ("deepseek-r1", "DeepSeek-R1-0528"):
        assert load_model(name) == v3
    r = runner.invoke(app, ["models", "list", "--format", "json"])
    row = next(m for m in json.loads(r.stdout)["models"] if m["name"] == "deepseek-v3")
    assert row["aliases"] == ["deepseek-r1", "deepseek-r1-0528"]
    # the launch command loads the repository the user named
    plan = _plan("glm-5.3-8xh200-sglang", ("model=deepseek-r1-0528",))
    assert launch_command(plan, "deepseek-r1-0528").argv[3:5] == ("--model-path", "deepseek-ai/DeepSeek-R1-0528")


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
@pytest.mark.parametrize("model", preset_names("models"))
def test_every_model_preset_on_each_engine_round_trips(model: str, engine: str, tmp_path: Path) -> None:
    """Every model preset on the default 8×H200 deployment of each engine (hybrids, MHA, MLA, DSA)."""
    try:
        plan = _plan(f"glm-5.3-8xh200-{engine}", (f"model={model}",))
    except InputError as e:  # a model this engine version refuses to plan: nothing to launch
        pytest.skip(str(e))
    _same_pool(_replan(launch_command(plan, model), plan, tmp_path), plan)


def test_yarn_goes_as_the_engines_override_json(tmp_path: Path) -> None:
    # SGLang --json-model-override-args / vLLM --hf-overrides carry {"rope_scaling": {...}} (kvplan.models.rope)
    for engine, flag in (("sglang", "--json-model-override-args"), ("vllm", "--hf-overrides")):
        plan = _plan(f"glm-5.3-8xh200-{engine}", ("model=qwen3-32b", "rope_scaling=yarn", "context_length=128K"))
        launch = launch_command(plan, "qwen3-32b")
        assert json.loads(launch.argv[launch.argv.index(flag) + 1])["rope_scaling"]["rope_type"] == "yarn"
        _same_pool(_replan(launch, plan, tmp_path), plan)


def test_vllm_attention_backend_flag_or_variable_by_version(tmp_path: Path) -> None:
    # vllm-project/vllm#26315 (v0.12.0) made the backend --attention-backend; before, VLLM_ATTENTION_BACKEND
    sets = ("model=llama-3.1-8b", "tp=1", "context_length=8K", "attention_backend=FLASH_ATTN")
    old = launch_command(_plan("glm-5.3-8xh200-vllm", ("engine_version=0.11.0", *sets)), "llama-3.1-8b")
    new = launch_command(_plan("glm-5.3-8xh200-vllm", sets), "llama-3.1-8b")
    assert dict(old.env) == {"VLLM_ATTENTION_BACKEND": "FLASH_ATTN"} and "--attention-backend" not in old.argv
    assert new.env == () and new.argv[new.argv.index("--attention-backend") + 1] == "FLASH_ATTN"
    for launch in (old, new):
        plan = _plan("glm-5.3-8xh200-vllm", (f"engine_version={launch.engine_version}", *sets))
        _same_pool(_replan(launch, plan, tmp_path), plan)


def test_what_doctor_emit_deploy_writes_becomes_a_command(tmp_path: Path) -> None:
    # tests/runbook/test_doctor_evidence.py: the SGLang Llama log's rows fit llama-3.1-8b at tp 1
    log = Path(__file__).parents[1] / "data" / "logs" / "field" / "sglang-llama-3.1-8b-h100-sglang-pr-4760.log"
    out = tmp_path / "from-log.yaml"
    assert runner.invoke(app, ["doctor", "--log", str(log), "--emit-deploy", str(out)]).exit_code == 0
    r = runner.invoke(app, ["deployments", "show", str(out), "--emit-command", "auto", "--format", "json"])
    assert r.exit_code == 0, r.output
    argv = json.loads(r.stdout)["launch"]["argv"]
    assert argv == ["python", "-m", "sglang.launch_server", "--model-path", "meta-llama/Llama-3.1-8B-Instruct",
                    "--tp-size", "1"]  # fmt: skip
    plan = _plan(str(out))
    _same_pool(_replan(launch_command(plan, plan.deployment.model), plan, tmp_path), plan)


def test_a_kvplan_model_file_is_not_a_model_path(tmp_path: Path) -> None:
    # the engines load a Hugging Face repository or a snapshot folder, never kvplan's YAML
    plan = _plan("glm-5.3-8xh200-sglang")
    with pytest.raises(InputError, match="kvplan model file, which no engine loads"):
        launch_command(plan, str(tmp_path / "my-model.yaml"))
    snapshot = tmp_path / "GLM-5.3-FP8"
    assert launch_command(plan, str(snapshot / "config.json")).argv[3:5] == ("--model-path", str(snapshot))


def _llama_8b(engine: str, version: str, tmp: Path, *extra: str) -> PoolPlan:
    doc = tmp / f"llama-{engine}-{version}.yaml"
    doc.write_text(f'model: llama-3.1-8b\nengine: {engine}\nengine_version: "{version}"\ngpu: h100\n'
                   "gpus_per_node: 1\ntp: 1\ncontext_length: 8192\n", encoding="utf-8")  # fmt: skip
    return _plan(str(doc), extra)


@pytest.mark.parametrize(
    "engine,version",
    [("sglang", v) for v in ("0.4.0", "0.4.6", "0.4.7", "0.4.8", "0.5.3", "0.5.6", "0.5.9", "0.5.23")]
    + [("vllm", v) for v in ("0.6.0", "0.6.4", "0.7.3", "0.8.5", "0.9.0", "0.21.0", "0.33.0")],
)
def test_every_version_row_round_trips(engine: str, version: str, tmp_path: Path) -> None:
    """One command per row of kvplan.versions: Llama-3.1-8B on one H100 with the common knobs."""
    memory = "mem_fraction_static=0.85" if engine == "sglang" else "gpu_memory_utilization=0.85"
    plan = _llama_8b(engine, version, tmp_path, memory, "max_running_requests=32", "dtype=bfloat16")
    _same_pool(_replan(launch_command(plan, "llama-3.1-8b"), plan, tmp_path), plan)


def test_sglang_bf16_kv_spelling_by_version(tmp_path: Path) -> None:
    # choices (auto, fp8_e5m2, fp8_e4m3) in the 0.4 parsers; bf16 later: refused, not emitted, before 0.5.3
    new = launch_command(_llama_8b("sglang", "0.5.9", tmp_path, "kv_cache_dtype=bfloat16"), "llama-3.1-8b")
    assert new.argv[new.argv.index("--kv-cache-dtype") + 1] == "bf16"
    with pytest.raises(InputError, match="takes auto, fp8_e5m2, fp8_e4m3"):
        launch_command(_llama_8b("sglang", "0.4.6", tmp_path, "kv_cache_dtype=bfloat16"), "llama-3.1-8b")


def test_a_plan_the_engine_would_not_start_says_so_first() -> None:
    # GLM-5.3 on 8×H200 vLLM at the model's 1M: the KV cache cannot hold max_model_len (recipes PR #893)
    plan = _plan("glm-5.3-8xh200-vllm", ("context_length=1M",))
    assert plan.startup_error is not None
    launch = launch_command(plan, "glm-5.3")
    assert launch.notes[0].startswith("WARNING: vLLM would not start this: ")


def test_unknown_model_preset_lists_the_aliases() -> None:
    with pytest.raises(InputError, match="deepseek-r1, deepseek-r1-0528, deepseek-v3"):
        load_model("deepseek-r2")


def test_vllm_data_parallel_says_its_weights_are_replicated() -> None:
    # vLLM's DP ranks are whole engines: the non-MoE layers sit on every rank at tp / dp (here 1), while kvplan
    # splits 'tp' groups (embeddings 3.8 GB, shared experts 2.8 GB for GLM-5.3) over all 8 GPUs
    launch = launch_command(_plan("glm-5.3-8xh200-vllm", ("dp_attention=8", "ep=8")), "glm-5.3")
    assert launch.argv[launch.argv.index("--tensor-parallel-size") + 1] == "1"
    assert any("the planned pool is an upper bound" in n for n in launch.notes)


def test_every_option_used_or_refused_with_emit_command(tmp_path: Path) -> None:
    # issue 25's rule: --pool-tokens has no effect on a launch command, so the pair is refused in one line
    r = runner.invoke(app, ["admit", "--ctx", "1M", "--pool-tokens", "900K", "--emit-command", "auto"])
    assert r.exit_code == 2 and r.stderr.count("\n") == 1 and "--pool-tokens" in r.stderr
    # fit: --emit-deploy still writes the file the command is printed for
    out = tmp_path / "best.yaml"
    fit_args = ["fit", "--model", "glm-5.3", "--gpu", "h200", "--engine", "sglang", "--max-gpus", "8", "--mtp", "off"]
    r = runner.invoke(app, [*fit_args, "--require-ctx", "1M", "--emit-deploy", str(out), "--emit-command", "auto"])
    assert r.exit_code == 0 and out.exists() and "python -m sglang.launch_server" in r.stdout
    best = _plan(str(out))
    command = "\n".join(line for line in r.stdout.splitlines() if not line.startswith("#"))
    assert launch_command(best, "glm-5.3").argv == tuple(shlex.split(command.replace("\\\n", " ")))


def test_kvplans_own_inputs_are_said_in_gib_and_kept_out_of_the_command() -> None:
    plan = _plan("glm-5.3-8xh200-sglang", ("weights_per_gpu=95GiB",))
    launch = launch_command(plan, "glm-5.3")
    assert launch.inputs == (("weights_per_gpu", 95 * 2**30),) and "95" not in " ".join(launch.argv)
    r = runner.invoke(app, ["deployments", "show", "glm-5.3-8xh200-sglang", "--set", "weights_per_gpu=95GiB",
                            "--emit-command", "auto"])  # fmt: skip
    assert "# weights_per_gpu 95.00 GiB (102.01 GB) is kvplan's input, not an engine flag" in r.stdout
    assert r.stdout.isascii()  # a shell script: no × or — in it
