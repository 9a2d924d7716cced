"""kvplan.perf.step across nodes: a tp group wider than a node all-reduces through NCCL over the nodes' NICs, at
NCCL's own latency model (src/graph/tuning.cc ``ncclTopoTuneModel``), not the intra-node custom all-reduce's."""

from __future__ import annotations

from kvplan.models.arch import Split
from kvplan.models.from_hf import load_model
from kvplan.perf.coeffs import Coefficients
from kvplan.perf.peaks import NET_BYTES_PER_S, Peaks
from kvplan.perf.shape import step_shape
from kvplan.perf.step import Batch, Part, nccl_allreduce_us, parts, step_seconds


def test_nccl_latency_one_node_is_the_ring() -> None:
    # 8 GPUs on one node, LL protocol: ring 6.6 + 2 × 7 steps × NVLink 0.6 = 15.0 µs; tree 6.8 + 2 × 7 × 0.6 = 15.2
    assert abs(nccl_allreduce_us(8, 1) - 15.0) < 1e-9


def test_nccl_latency_two_and_eight_nodes_is_the_tree() -> None:
    # 16 GPUs on 2 nodes: intra LL 0.6 × 1.8 = 1.08; ring 6.6 + (30 − 2) × 1.08 + 2 × 2.7 = 42.24;
    # tree 6.8 + 2 × (7 × 1.08 + log2(2) × 5.0) = 31.92: the tree
    assert abs(nccl_allreduce_us(16, 2) - 31.92) < 1e-9
    # 64 GPUs on 8 nodes: ring 6.6 + (126 − 14) × 1.08 + 14 × 2.7 = 165.36; tree 6.8 + 2 × (7.56 + 3 × 5.0) = 51.92
    assert abs(nccl_allreduce_us(64, 8) - 51.92) < 1e-9


def test_a_tp_group_over_two_nodes_all_reduces_over_the_network() -> None:
    # DeepSeek-V3 (61 layers, hidden 7,168) TP16 on 2 nodes, 4 decode tokens: 2 all-reduces a layer of
    # 4 × 7,168 × 2 B; 2 × 61 × 57,344 = 6,995,968 B, ring share 2 × 15 / 16: 13,117,440 B over the network;
    # latency 122 calls × 31.92 µs = 3,894,240 ns
    shape = step_shape(load_model("deepseek-v3"))
    b = Batch(decode_requests=4, decode_context=4000, sampled=4)
    got = {p.name: p for p in parts(shape, b, Split.of(tp=16), "fp8", "fp8", nodes=2)}
    assert "all-reduce" not in got
    net = got["all-reduce net"]
    assert (net.bytes, net.latency_ns, net.calls) == (13_117_440, 3_894_240, 0)
    # on one node the same group would be priced over NVLink at the coefficients' call latency
    one = {p.name: p for p in parts(shape, b, Split.of(tp=16), "fp8", "fp8")}
    assert "all-reduce net" not in one and one["all-reduce"].calls == 122


def test_the_network_all_reduce_is_priced_at_the_nic() -> None:
    # 10^9 B over a node's 8 × 400 Gb/s NICs (4·10^11 B/s) at link efficiency 0.5: 0.005 s, + 3,894,240 ns
    c = Coefficients(gpu_class="blackwell", engine="sglang", versions=("0.5.0", "0.5.9"), family="mla", gemm_eff=0.5,
                     prefill_eff=0.5, attention_eff=0.5, mem_eff=0.5, link_eff=0.5, comm_us=8.0, layer_us=0.0,
                     fitted_on="test", heldout_mape=(0.1, 0.1, 0.1))  # fmt: skip
    peaks = Peaks(gpu_key="b200", gpu_class="blackwell", bf16_flops_per_s=10**15, fp8_flops_per_s=10**15,
                  fp4_flops_per_s=0, hbm_bytes_per_s=8 * 10**12, link_bytes_per_s=10**12, source="test")  # fmt: skip
    assert NET_BYTES_PER_S == 400 * 10**9
    p = Part(name="all-reduce net", flops=0, bytes=10**9, latency_ns=3_894_240)
    assert abs(step_seconds((p,), peaks, c) - (0.005 + 0.00389424)) < 1e-12


def test_nccl_latency_of_a_small_group_across_nodes_is_the_ring() -> None:
    # 2 GPUs on 2 nodes: ring 6.6 + (2 − 2) × 1.08 + 2 × 2.7 (each hop a network one) = 12.0; tree 6.8 + 2 × (0 +
    # 1 × 5.0) = 16.8: the ring. 4 on 2: ring 6.6 + (6 − 2) × 1.08 + 2 × 2.7 = 16.32; tree 6.8 + 2 × (1.08 + 5.0) =
    # 18.96: the ring
    assert abs(nccl_allreduce_us(2, 2) - 12.0) < 1e-9
    assert abs(nccl_allreduce_us(4, 2) - 16.32) < 1e-9
