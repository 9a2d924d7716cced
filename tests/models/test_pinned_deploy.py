"""The deployment record (kvplan/models/deploy.py), pinned where the mutation check moves it: the engines' own
defaults for a layout knob nobody set, when MTP is on, how a gate's requirements merge, and how a GPU's total is
named.

SGLang ``server_args.py`` ``ServerArgs``: ``tp_size = 1``, ``dp_size = 1``, ``ep_size = 1``, ``pp_size = 1``,
``dcp_size = 1``, ``speculative_num_draft_tokens = None`` (no speculative decoding); vLLM ``config/parallel.py``
``ParallelConfig``: ``tensor_parallel_size = 1``, ``pipeline_parallel_size = 1``,
``decode_context_parallel_size = 1``; kvplan's own default is one 8-GPU node.
"""

from __future__ import annotations

from dataclasses import fields, replace

from kvplan.models.deploy import AUTO_FIT, Deployment, Requirements
from kvplan.models.deployment import load_deployment
from kvplan.models.gpus import find_gpu


def test_layout_defaults_are_the_engines() -> None:
    defaults = {f.name: f.default for f in fields(Deployment)}
    layout = ("gpus_per_node", "nodes", "tp", "dp_attention", "ep", "pp", "dcp", "speculative_num_draft_tokens")
    assert [defaults[k] for k in layout] == [8, 1, 1, 1, 1, 1, 1, 0]


def test_a_file_that_leaves_the_layout_out_gets_those_defaults() -> None:
    dep = load_deployment(None, ["model=llama-3.1-8b", "engine=vllm", "gpu=h100", "tp=2", "gpus_per_node=2"])
    assert (dep.dp_attention, dep.ep, dep.pp, dep.dcp, dep.speculative_num_draft_tokens) == (1, 1, 1, 1, 0)
    assert not dep.mtp


def test_mtp_is_one_draft_token_or_more() -> None:
    base = load_deployment(None, ["model=deepseek-v3", "engine=sglang", "gpu=h200", "tp=8"])
    assert [replace(base, speculative_num_draft_tokens=n).mtp for n in (0, 1, 2)] == [False, True, True]


def test_auto_fit_is_vllms_minus_one() -> None:
    # vLLM --max-model-len -1 / auto (human_readable_int_or_auto): fit max_model_len to the KV cache memory
    assert AUTO_FIT == -1
    dep = load_deployment("glm-5.3-8xh200-vllm", ["context_length=auto"])
    assert dep.context_length == AUTO_FIT


def test_requirements_the_command_line_wins_where_it_sets_them() -> None:
    file = Requirements(min_ctx_tokens=131_072, concurrency=((8, 32_768),), max_capacity_drop_ppm=50_000)
    assert file.merged(Requirements()) == file
    cli = Requirements(concurrency=((4, 65_536),))
    merged = file.merged(cli)
    assert merged.concurrency == ((4, 65_536),) and merged.min_ctx_tokens == 131_072
    assert Requirements().merged(cli).concurrency == ((4, 65_536),)


def test_a_gpus_total_is_named_by_its_vendors_tool() -> None:
    # NVIDIA: nvidia-smi / NVML; AMD: amd-smi (ROCm SMI)
    assert find_gpu("h100").total_label == "GPU total (NVML)"
    assert find_gpu("mi300x").total_label == "GPU total (amd-smi)"
