"""A deployment's words and numbers on bad input (kvplan/models/deployment.py), each message read for its figures
(issue 26 item 5), at the bounds the mutation check moves."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from kvplan.errors import ConfigError, InputError
from kvplan.models.arch import ParamGroup
from kvplan.models.deployment import check_model_for_deployment, load_deployment, parse_set
from kvplan.models.from_hf import load_model


def _file(tmp_path: Path, text: str) -> str:
    path = tmp_path / "d.yaml"
    path.write_text(text)
    return str(path)


def test_a_knob_given_twice_names_both_lines(tmp_path: Path) -> None:
    # tensor_parallel_size is vLLM's spelling of tp
    path = _file(tmp_path, "model: llama-3.1-8b\nengine: vllm\ntp: 2\ntensor_parallel_size: 2\n")
    with pytest.raises(ConfigError, match=r":4: tp: given twice: as 'tp' \(line 3\) and as 'tensor_parallel_size'"):
        load_deployment(path, [])


def test_tp_defaults_to_every_gpu_over_pp(tmp_path: Path) -> None:
    # 2 nodes × 8 GPUs / pp 2 = tp 8
    dep = load_deployment(
        _file(tmp_path, "model: llama-3.1-70b\nengine: vllm\ngpus_per_node: 8\nnodes: 2\npp: 2\n"), []
    )
    assert dep.tp == 8
    why = dict((k, w) for k, _, w in dep.defaulted)["tp"]
    assert why.startswith("all 16 GPUs / pp 2 (vLLM's own default is 1")


def test_nodes_times_gpus_past_the_limit(tmp_path: Path) -> None:
    # 1,048,576 GPUs at most: 1,025 × 1,024 = 1,049,600 is past it
    path = _file(tmp_path, "model: llama-3.1-8b\nengine: vllm\ngpus_per_node: 1024\nnodes: 1025\n")
    with pytest.raises(ConfigError, match=r"1,025 nodes × 1,024 GPUs is past kvplan's limit of 1,048,576 GPUs"):
        load_deployment(path, [])


def test_the_gpu_count_names_the_nodes_that_would_hold_it() -> None:
    base = ["model=deepseek-v3", "engine=sglang", "gpu=h200", "gpus_per_node=8", "tp=8"]
    # ep 12 is wider than tp 8: 12 × pp 1 = 12 GPUs on 1 × 8; ceil(12 / 8) = 2 nodes
    with pytest.raises(ConfigError, match=r"ep 12 × pp 1 needs 12 GPUs, and 1 node\(s\) × 8 GPUs hold 8: add nodes=2 "
                                          r"\(--set nodes=2\) for 2 × 8 GPUs, or give gpus_per_node"):  # fmt: skip
        load_deployment(None, [*base, "nodes=1", "ep=12"])
    # tp 8 × pp 3 = 24 on 2 × 8 = 16: 3 nodes
    with pytest.raises(ConfigError, match=r"tp 8 × pp 3 needs 24 GPUs, and 2 node\(s\) × 8 GPUs hold 16: add nodes=3"):
        load_deployment(None, [*base, "nodes=2", "pp=3"])
    assert load_deployment(None, [*base, "nodes=3", "pp=3"]).pp == 3  # 24 on 24: held


def test_divisors_of_tp_and_one_partition_entry_a_stage() -> None:
    base = ["model=deepseek-v3", "engine=sglang", "gpu=h200"]
    with pytest.raises(ConfigError, match=r"dcp 3 must divide tp 8"):
        load_deployment(None, [*base, "tp=8", "dcp=3"])
    with pytest.raises(ConfigError, match=r"dp_attention 3 must divide tp 8"):
        load_deployment(None, [*base, "tp=8", "dp_attention=3"])
    with pytest.raises(ConfigError, match=r"3 stages given for pp 2 \(one entry per stage\)"):
        load_deployment(None, [*base, "tp=4", "pp=2", "pp_layer_partition=20,20,21"])


def test_a_memory_knob_past_the_whole_gpu() -> None:
    # H100 SXM: NVML total 85,520,809,984 B = 81,559 MiB (rounded down); the total itself is accepted
    base = ["model=llama-3.1-8b", "engine=vllm", "gpu=h100", "tp=1", "gpus_per_node=1"]
    with pytest.raises(ConfigError, match=r"weights_per_gpu: 85,520,809,985 B is more than the whole GPU \(NVIDIA H100 "
                                          r"80GB HBM3: 85,520,809,984 B = 81,559 MiB NVML total\)"):  # fmt: skip
        load_deployment(None, [*base, "weights_per_gpu=85520809985B"])
    assert load_deployment(None, [*base, "weights_per_gpu=85520809984B"]).weights_per_gpu == 85_520_809_984


def test_weights_under_1_percent_of_the_estimate_are_a_unit_slip() -> None:
    # Llama-3.1-8B at tp 1: 8,030,261,248 parameters × 2 B = 16,060,522,496 B (its index's total_size); 1 % of it
    # is 160,605,224.96 B, so 160,605,225 B is kept and 160,605,224 B refused
    arch = load_model("llama-3.1-8b")
    base = ["model=llama-3.1-8b", "engine=vllm", "gpu=h100", "tp=1", "gpus_per_node=1"]
    check_model_for_deployment(arch, load_deployment(None, [*base, "weights_per_gpu=160605225B"]))
    with pytest.raises(InputError, match=r"weights_per_gpu 160,605,224 B is under 1 % of the 16,060,522,496 B"):
        check_model_for_deployment(arch, load_deployment(None, [*base, "weights_per_gpu=160605224B"]))


def test_what_a_file_leaves_out_is_defaulted_and_said(tmp_path: Path) -> None:
    # one 8-GPU node; tp all 8 GPUs / pp 1 -> 8; engine and version kvplan's defaults: none of them 'set'
    dep = load_deployment(_file(tmp_path, "model: llama-3.1-70b\n"), [])
    why = {k: (shown, w) for k, shown, w in dep.defaulted}
    assert (dep.gpus_per_node, dep.nodes, dep.tp) == (8, 1, 8)
    assert why["gpus_per_node"] == ("8", "one 8-GPU node") and why["nodes"] == ("1", "one node")
    assert why["tp"][1].startswith("all 8 GPUs / pp 1 (")
    assert not {"gpus_per_node", "nodes", "tp", "engine", "engine_version", "model", "gpu"} & dep.explicit
    dep = load_deployment(_file(tmp_path, "model: llama-3.1-70b\ntp: 4\n"), ["pp=2"])
    assert {"tp", "pp"} <= dep.explicit and dep.from_file == {"tp"}  # --set's pp is not the file's


def test_exactly_the_gpu_limit_is_held(tmp_path: Path) -> None:
    # 1,024 × 1,024 = 1,048,576 GPUs: the limit itself is allowed
    path = _file(tmp_path, "model: llama-3.1-8b\nengine: vllm\ngpus_per_node: 1024\nnodes: 1024\ntp: 8\n")
    assert load_deployment(path, []).nodes == 1_024


def test_a_relative_model_path_is_read_from_the_files_folder(tmp_path: Path) -> None:
    from kvplan.models.deployment import deployment_model_ref

    (tmp_path / "m").mkdir()
    dep = load_deployment(_file(tmp_path, "model: m/config.json\nengine: vllm\n"), [])
    assert deployment_model_ref(dep) == str(tmp_path / "m" / "config.json")


def test_a_config_without_weights_asks_for_them(tmp_path: Path) -> None:
    # no hidden_size: the parameters cannot be counted, so 0 B of weights would be planned
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text('{"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 2, '
                                        '"num_attention_heads": 4, "head_dim": 64, "vocab_size": 100, '
                                        '"max_position_embeddings": 4096}')  # fmt: skip
    arch = load_model(str(folder / "config.json"))
    base = [f"model={folder / 'config.json'}", "engine=vllm", "gpu=h100", "tp=1", "gpus_per_node=1"]
    with pytest.raises(InputError, match=r"no weights to plan with .* give --set weights_per_gpu=\.\.\.GiB"):
        check_model_for_deployment(arch, load_deployment(None, base))
    check_model_for_deployment(arch, load_deployment(None, [*base, "weights_per_gpu=1MiB"]))  # any figure is taken


def test_a_version_yaml_read_as_a_number_is_shown_as_read(tmp_path: Path) -> None:
    # YAML 1.1 reads 0.10 as the float 0.1: the version the user meant is lost, so kvplan shows what YAML read
    path = _file(tmp_path, "model: llama-3.1-8b\nengine: vllm\nengine_version: 0.10\n")
    with pytest.raises(ConfigError, match=r':3: engine_version: write the version as a string, e\.g\. engine_version: '
                                          r'"0\.1" \(YAML read 0\.1\)'):  # fmt: skip
        load_deployment(path, [])


def test_a_custom_gpus_sm_is_at_most_1000() -> None:
    # compute capability major × 10 + minor (Hopper 90, Blackwell 100, GB10 121); 1,000 is kvplan's bound
    base = ["model=llama-3.1-8b", "engine=vllm", "gpu=custom", "gpu_memory=80GiB", "tp=1", "gpus_per_node=1"]
    assert load_deployment(None, [*base, "gpu_sm=1000"]).gpu.sm == 1000
    with pytest.raises(InputError, match=r"gpu_sm: 1001 is above the largest value kvplan accepts here \(1,000\)"):
        load_deployment(None, [*base, "gpu_sm=1001"])


def test_an_engine_spelling_keeps_its_line(tmp_path: Path) -> None:
    # max_model_len (vLLM) and block_size are kvplan's context_length and page_size: a bad value names the line
    path = _file(tmp_path, "model: llama-3.1-8b\nengine: vllm\nmax_model_len: lots\n")
    with pytest.raises(ConfigError, match=r":3: context_length"):
        load_deployment(path, [])
    path = _file(tmp_path, "model: llama-3.1-8b\nengine: vllm\n\nblock_size: -16\n")
    with pytest.raises(ConfigError, match=r":4: page_size"):
        load_deployment(path, [])
    # vLLM's VLLM_PP_LAYER_PARTITION as a block list: the knob's own line, not its entries' lines 4 and 5
    path = _file(tmp_path, "model: llama-3.1-8b\nengine: vllm\nvllm_pp_layer_partition:\n  - 20\n  - abc\npp: 2\n")
    with pytest.raises(ConfigError, match=r":3: pp_layer_partition: each stage's layer count must be a whole number"):
        load_deployment(path, [])


def test_tp_defaults_to_at_least_one_gpu(tmp_path: Path) -> None:
    # 1 GPU over pp 2: tp max(1 // 2, 1) = 1, and tp 1 × pp 2 then needs 2 GPUs (never a tp 0 plan)
    path = _file(tmp_path, "model: llama-3.1-8b\nengine: vllm\ngpu: h100\ngpus_per_node: 1\npp: 2\n")
    with pytest.raises(ConfigError, match=r"tp 1 × pp 2 needs 2 GPUs, and 1 node\(s\) × 1 GPUs hold 1: add nodes=2"):
        load_deployment(path, [])


def test_the_gpu_count_names_tp_when_ep_is_as_wide() -> None:
    # ep 16 = tp 16: the layout is tp's (ep is named only when wider than tp)
    base = ["model=deepseek-v3", "engine=sglang", "gpu=h200", "gpus_per_node=8", "nodes=1"]
    with pytest.raises(ConfigError, match=r"tp 16 × pp 1 needs 16 GPUs, and 1 node\(s\) × 8 GPUs hold 8: add nodes=2"):
        load_deployment(None, [*base, "tp=16", "ep=16"])


def test_switching_engines_takes_the_new_engines_newest_version(tmp_path: Path) -> None:
    # a vLLM file planned with --set engine=sglang: SGLang's first version (deploy.ENGINES: 0.5.23), not the file's
    path = _file(tmp_path, "model: llama-3.1-8b\nengine: vllm\nengine_version: '0.33.0'\n")
    dep = load_deployment(path, ["engine=sglang"])
    assert (dep.engine, dep.engine_version) == ("sglang", "0.5.23")
    assert "engine_version" not in dep.from_file
    dep = load_deployment(_file(tmp_path, "model: llama-3.1-8b\nengine: sglang\n"), ["engine=vllm"])
    assert dep.engine_version == "0.33.0"


def test_a_custom_gpu_sm_of_0_is_kept() -> None:
    # the catalog's AMD GPUs have no CUDA compute capability: sm 0 (AMD Instinct MI300X), so 0 is a value, not a slip
    base = ["model=llama-3.1-8b", "engine=vllm", "gpu=custom", "gpu_memory=80GiB", "tp=1", "gpus_per_node=1"]
    assert load_deployment(None, [*base, "gpu_sm=0"]).gpu.sm == 0


def test_a_deployment_changed_by_set_says_so_in_its_name(tmp_path: Path) -> None:
    # the file's stem names it; --set on top adds " (+ --set)" so the output never passes the changed plan off as
    # the file's
    path = _file(tmp_path, "model: llama-3.1-8b\nengine: vllm\ntp: 1\n")
    assert load_deployment(path, []).name == "d"
    assert load_deployment(path, ["tp=2"]).name == "d (+ --set)"


def test_weights_of_exactly_1_percent_are_kept() -> None:
    # a checkpoint of 50 × 2^30 bf16 parameters: 100 GiB at tp 1, whose 1 % is exactly 1 GiB; the refusal is for
    # weights *under* 1 % (limits.MIN_WEIGHTS_PPM), so 1 GiB is kept and one byte less refused
    arch = replace(load_model("llama-3.1-8b"), measured_weights=(),
                   param_groups=(ParamGroup(name="dense", params=50 << 30, bytes_per_param_num=2),))  # fmt: skip
    base = ["model=llama-3.1-8b", "engine=vllm", "gpu=h200", "tp=1", "gpus_per_node=1"]
    check_model_for_deployment(arch, load_deployment(None, [*base, f"weights_per_gpu={1 << 30}B"]))
    with pytest.raises(InputError, match=r"weights_per_gpu 1,073,741,823 B is under 1 % of the 107,374,182,400 B"):
        check_model_for_deployment(arch, load_deployment(None, [*base, f"weights_per_gpu={(1 << 30) - 1}B"]))


def test_a_respelled_knobs_nested_keys_keep_their_lines(tmp_path: Path) -> None:
    # "GPU:" is kvplan's gpu (knob names are case-blind); an error inside its mapping names the nested key's own
    # line (5), not the knob's (3)
    path = _file(tmp_path, "model: llama-3.1-8b\nengine: vllm\nGPU:\n  name: my gpu\n  memory: lots\n")
    with pytest.raises(ConfigError, match=r":5: gpu\.memory: unknown key"):
        load_deployment(path, [])


def test_non_kv_other_may_be_0() -> None:
    # non_kv_other 0 B is an override (no memory besides weights and KV), not a slip: minimum 0
    base = ["model=llama-3.1-8b", "engine=vllm", "gpu=h100", "tp=1", "gpus_per_node=1"]
    assert load_deployment(None, [*base, "non_kv_other=0GiB"]).non_kv_other == 0


def test_a_gpu_given_as_a_boolean_is_refused_as_not_a_name(tmp_path: Path) -> None:
    # YAML `gpu: true` is a boolean, not the catalog name "True": one line saying what was read
    path = _file(tmp_path, "model: llama-3.1-8b\nengine: vllm\ngpu: true\n")
    with pytest.raises(ConfigError, match=r":3: gpu: expected a non-empty string, got a boolean"):
        load_deployment(path, [])


def test_a_set_value_may_hold_an_equals_sign() -> None:
    # KEY=VALUE splits at the first "=" only: a model path "runs/a=b/config.json" stays whole
    assert parse_set(["model=runs/a=b/config.json"]).data == {"model": "runs/a=b/config.json"}


def test_any_weights_estimate_above_0_is_planned() -> None:
    # the "no weights to plan with" refusal is for an estimate of 0 B; a model of one 1-byte parameter has 1 B
    arch = replace(load_model("llama-3.1-8b"), measured_weights=(),
                   param_groups=(ParamGroup(name="dense", params=1, bytes_per_param_num=1),))  # fmt: skip
    base = ["model=llama-3.1-8b", "engine=vllm", "gpu=h100", "tp=1", "gpus_per_node=1"]
    check_model_for_deployment(arch, load_deployment(None, base))
