"""Survivors of the sampled mutation check (scripts/mutate.py, issue 26) on kvplan/plan/launch.py, seed 20539.

Expected spellings are the engines' own: SGLang python/sglang/srt/server_args.py (ServerArgs: --nnodes,
--node-rank, --dist-init-addr; an EAGLE chain of speculative_eagle_topk 1 needs speculative_num_draft_tokens ==
speculative_num_steps + 1, which _handle_speculative_decoding enforces), vLLM vllm/engine/arg_utils.py
(--enable-expert-parallel takes no number: the EP group is tp × dp, FusedMoEParallelConfig.make).
"""

from __future__ import annotations

import pytest

from kvplan.engines import plan_pool
from kvplan.engines.common import PoolPlan
from kvplan.errors import InputError
from kvplan.models.deployment import load_deployment
from kvplan.models.from_hf import load_model
from kvplan.plan.launch import launch_command, model_path, parse_command


def _plan(deploy: str, *sets: str) -> PoolPlan:
    dep = load_deployment(deploy, sets)
    return plan_pool(load_model(dep.model), dep)


def _after(argv: tuple[str, ...], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def test_an_sglang_mtp_chain_of_4_tokens_is_3_steps_of_topk_1() -> None:
    # server_args.py: topk 1 verifies num_steps + 1 tokens, so 4 draft tokens are 3 steps
    argv = launch_command(_plan("glm-5.3-8xh200-sglang", "speculative_num_draft_tokens=4"), "glm-5.3").argv
    assert _after(argv, "--speculative-algorithm") == "EAGLE"
    assert _after(argv, "--speculative-num-steps") == "3"
    assert _after(argv, "--speculative-eagle-topk") == "1"
    assert _after(argv, "--speculative-num-draft-tokens") == "4"


def test_two_sglang_nodes_are_16_gpus_each_run_with_its_rank() -> None:
    # 2 nodes × 8 H200: every node runs the command with --nnodes 2 and its own --node-rank 0..1
    launch = launch_command(_plan("glm-5.3-8xh200-sglang", "nodes=2", "tp=16", "dcp=16"), "glm-5.3")
    assert _after(launch.argv, "--nnodes") == "2" and _after(launch.argv, "--tp-size") == "16"
    assert _after(launch.argv, "--node-rank") == "0" and _after(launch.argv, "--dist-init-addr") == "NODE0_IP:20000"
    assert launch.notes[0].startswith("planned on 16 x ") and launch.notes[0].endswith("(8 per node)")
    assert "run on each of the 2 nodes with --node-rank 0..1; NODE0_IP is node 0's address" in launch.notes


def test_vllm_on_one_data_parallel_rank_says_nothing_of_replicas() -> None:
    # dp 1: the one engine holds every weight at tp 8, so no "upper bound" note and tp goes as is
    launch = launch_command(_plan("glm-5.3-8xh200-vllm"), "glm-5.3")
    assert _after(launch.argv, "--tensor-parallel-size") == "8"
    assert not any("data-parallel ranks" in n for n in launch.notes)
    assert launch.notes[0].startswith("planned on 8 x ") and launch.notes[0].endswith("(8 per node)")


def test_vllm_expert_parallel_reads_back_as_tp_times_dp() -> None:
    # --enable-expert-parallel: EP spans tp × dp GPUs (FusedMoEParallelConfig.make: ep_size = dp_size × tp_size)
    serve = ["vllm", "serve", "zai-org/GLM-5", "--tensor-parallel-size", "8", "--enable-expert-parallel"]
    assert parse_command("vllm", "0.33.0", serve, {})["ep"] == "8"
    dp = ["vllm", "serve", "zai-org/GLM-5", "--tensor-parallel-size", "2", "--data-parallel-size", "4",
          "--enable-expert-parallel"]  # fmt: skip
    knobs = parse_command("vllm", "0.33.0", dp, {})
    assert (knobs["ep"], knobs["tp"]) == ("8", "8")


def test_a_snapshot_folder_is_the_model_path_as_given() -> None:
    # the engines load a folder holding config.json; a config.json path is its folder
    assert model_path("/models/glm-5/config.json") == "/models/glm-5"
    assert model_path("/models/glm-5") == "/models/glm-5"


def test_one_vllm_node_needs_no_ray_cluster() -> None:
    # vLLM starts a single-node deployment on its own processes (the multiprocessing executor); a Ray cluster is
    # only for a deployment over several nodes, so one node's notes are the layout line alone
    launch = launch_command(_plan("glm-5.3-8xh200-vllm"), "glm-5.3")
    assert launch.notes == ("planned on 8 x NVIDIA H200 (8 per node)",)


def test_a_flag_missing_from_the_version_names_where_it_exists() -> None:
    # vLLM's EngineArgs.kv_cache_memory_bytes (vllm/engine/arg_utils.py, --kv-cache-memory-bytes) arrived in
    # 0.11.0: a 0.10.1 command cannot carry it, and the refusal names the flag and the version that has it
    with pytest.raises(InputError) as e:
        launch_command(_plan("glm-5.3-8xh200-vllm", "engine_version=0.10.1", "kv_cache_memory=20GiB"), "glm-5.3")
    assert str(e.value) == (
        "vLLM 0.10.1 has no launch flag for kv_cache_memory (--kv-cache-memory-bytes from 0.11.0): unset it to emit"
    )


def test_async_scheduling_off_is_argparse_s_no_flag() -> None:
    # vLLM EngineArgs.async_scheduling is a BooleanOptionalAction (vllm/engine/arg_utils.py), whose off spelling
    # argparse builds as --no-async-scheduling; it reads back as false
    launch = launch_command(_plan("glm-5.3-8xh200-vllm", "async_scheduling=false"), "glm-5.3")
    assert launch.argv[-1] == "--no-async-scheduling"
    assert parse_command("vllm", "0.33.0", list(launch.argv), {})["async_scheduling"] == "false"


def test_vllm_expert_parallel_without_a_tp_flag_spans_the_dp_ranks() -> None:
    # no --tensor-parallel-size: ParallelConfig.tensor_parallel_size = 1, so FusedMoEParallelConfig.make's
    # ep_size = dp_size × tp_size = 4 × 1 = 4
    serve = ["vllm", "serve", "zai-org/GLM-5", "--data-parallel-size", "4", "--enable-expert-parallel"]
    assert parse_command("vllm", "0.33.0", serve, {})["ep"] == "4"


def test_a_dsa_backend_pair_goes_to_each_side_and_back() -> None:
    # SGLang 0.5.23 server_args.py: --dsa-prefill-backend and --dsa-decode-backend (DSA_CHOICES) take one backend
    # each; kvplan's attention_backend 'prefill/decode' is split in that order (flashmla_sparse prefills, flashmla_kv
    # decodes) and read back as the same pair
    p = _plan("glm-5.3-8xh200-sglang", "attention_backend=flashmla_sparse/flashmla_kv")
    cmd = launch_command(p, "glm-5.3")
    assert (_after(cmd.argv, "--dsa-prefill-backend"), _after(cmd.argv, "--dsa-decode-backend")) == (
        "flashmla_sparse",
        "flashmla_kv",
    )
    assert parse_command("sglang", cmd.engine_version, list(cmd.argv), dict(cmd.env))["attention_backend"] == (
        "flashmla_sparse/flashmla_kv"
    )
    # one name: both sides
    one = launch_command(_plan("glm-5.3-8xh200-sglang", "attention_backend=flashmla_kv"), "glm-5.3")
    assert (_after(one.argv, "--dsa-prefill-backend"), _after(one.argv, "--dsa-decode-backend")) == ("flashmla_kv",) * 2


def test_vllm_on_two_data_parallel_ranks_says_each_holds_tp_4() -> None:
    # kvplan tp 8 with dp_attention 2 is vLLM's --tensor-parallel-size 4 --data-parallel-size 2 (each DP rank a
    # whole engine of 8 / 2 GPUs: vllm/config/parallel.py, world_size = tp × pp per DP rank); the dense weights
    # kvplan spread over 8 GPUs sit on 4 in each rank, so the note says tensor-parallel 4
    launch = launch_command(_plan("glm-5.3-8xh200-vllm", "dp_attention=2"), "glm-5.3")
    assert (_after(launch.argv, "--tensor-parallel-size"), _after(launch.argv, "--data-parallel-size")) == ("4", "2")
    assert launch.notes[1] == (
        "kvplan splits the embeddings, dense and shared-expert weights over all 8 GPUs; each of vLLM's 2 "
        "data-parallel ranks holds them at tensor-parallel 4: the planned pool is an upper bound"
    )


def test_sglang_takes_an_expert_parallel_size_of_its_own() -> None:
    # SGLang server_args.py --ep-size: the expert-parallel group, any size dividing tp (ep 4 at tp 8); only vLLM's
    # --enable-expert-parallel is all-or-nothing (ep = tp × dp)
    launch = launch_command(_plan("glm-5.3-8xh200-sglang", "ep=4"), "glm-5.3")
    assert (_after(launch.argv, "--tp-size"), _after(launch.argv, "--ep-size")) == ("8", "4")


def test_an_sglang_chain_of_2_tokens_is_1_step() -> None:
    # EAGLE with speculative_eagle_topk 1: speculative_num_draft_tokens == speculative_num_steps + 1
    # (_handle_speculative_decoding), so 2 verified tokens are 1 draft step
    launch = launch_command(_plan("glm-5.3-8xh200-sglang", "speculative_num_draft_tokens=2"), "glm-5.3")
    assert (_after(launch.argv, "--speculative-num-steps"), _after(launch.argv, "--speculative-num-draft-tokens")) == (
        "1",
        "2",
    )


def test_vllm_refuses_an_expert_parallel_group_smaller_than_its_gpus() -> None:
    # vLLM's --enable-expert-parallel takes no size: the EP group is tp × dp (FusedMoEParallelConfig.make), so ep 4
    # at tp 8 has no vLLM command; ep 8 is the flag alone
    with pytest.raises(InputError) as e:
        launch_command(_plan("glm-5.3-8xh200-vllm", "ep=4"), "glm-5.3")
    assert str(e.value) == (
        "vLLM's --enable-expert-parallel spans all 8 GPUs (its tp × dp), not ep 4: set ep=8 or leave it out"
    )
    assert "--enable-expert-parallel" in launch_command(_plan("glm-5.3-8xh200-vllm", "ep=8"), "glm-5.3").argv
