"""benchmarks/_silicon_rows.py itself: the measurements perf_calibrate and aic_predictions price, each once, none of
the fit's counted as held out, each deployment as its row's id names it."""

from __future__ import annotations

from tests.scripts._load import load

sr = load("kvplan_silicon_rows", "benchmarks/_silicon_rows.py")


def row(rid: str, source: str, ttft: str, tpot: str, cols: tuple[int, int, int, int], **kw: str) -> dict[str, str]:
    tp, dp, moe_tp, moe_ep = (str(c) for c in cols)
    base = {"id": rid, "silicon_data_source": f"{source}; model=X; silicon_concurrency=8; measured=2026",
            "backend": "sglang", "backend_version": "0.5.9", "model_path": "deepseek-ai/DeepSeek-R1",
            "system": "b200_sxm", "mode": "agg", "pp_size": "1", "isl": "1024", "osl": "1024", "tp_size": tp,
            "attention_dp_size": dp, "moe_tp_size": moe_tp, "moe_ep_size": moe_ep, "silicon_ttft_ms": ttft,
            "silicon_tpot_ms": tpot}  # fmt: skip
    return base | kw


TRAIN, LATER, DUMP = "source_file=2026-03-25.csv", "source_file=2026-04-06.csv", "db-dump/2026-04-27; config_id=1"


def test_a_repeat_of_a_training_measurement_is_not_held_out() -> None:
    # the same TTFT / TPOT (within 0.01 ms) under a later source and another model name of the same preset
    got, suspect = sr.measurements([
        row("a_tp8_0_ep1_0_1", TRAIN, "364.1234", "8.8001", (8, 1, 8, 1)),
        row("b_tp8_ep1_2", LATER, "364.1234", "8.8001", (8, 1, 8, 1), model_path="deepseek-ai/DeepSeek-V3"),
        row("c_tp8_ep1_3", LATER, "364.13", "8.81", (8, 1, 8, 1)),  # rounded: 0.0066 and 0.0099 ms off, a twin
        row("d_tp8_ep1_4", LATER, "364.14", "8.80", (8, 1, 8, 1)),  # 0.0166 ms off: another measurement
    ])  # fmt: skip
    assert suspect == 0 and [(m.row["id"], m.train) for m in got] == [("a_tp8_0_ep1_0_1", True), ("d_tp8_ep1_4", False)]
    assert got[0].sources == [TRAIN, LATER]  # sorted by name


def test_multiplied_expert_parallel_columns_are_read_as_the_id_names_them() -> None:
    # 2026-04-06.csv writes DeepSeek-R1's tp8 ep8 on one node as tp_size 64, moe_tp 8, moe_ep 8, and Kimi-K2.5's
    # vLLM tp4 ep4 as tp 4, attention DP 4, moe_ep 16; the ids name tp8_ep8 and tp4_ep4
    got, _ = sr.measurements([
        row("r1_tp8_ep8_1", LATER, "100", "10", (64, 1, 8, 8)),
        row("k_tp4_ep4_2", LATER, "200", "20", (4, 4, 1, 16), backend="vllm"),
        row("q_tp2_epnone_3", LATER, "300", "30", (2, 1, 1, 2)),
    ])  # fmt: skip
    cols = {m.row["id"]: tuple(m.row[k] for k in ("tp_size", "attention_dp_size", "moe_tp_size", "moe_ep_size"))
            for m in got}  # fmt: skip
    # world = the id's tp, experts over its ep, no DP attention; "epnone" is no expert parallel (moe_tp = tp)
    assert cols == {"r1_tp8_ep8_1": ("8", "1", "1", "8"), "k_tp4_ep4_2": ("4", "1", "1", "4"),
                    "q_tp2_epnone_3": ("2", "1", "2", "1")}  # fmt: skip


def test_a_row_without_an_id_takes_its_twins_reading_else_expert_parallel_is_suspect() -> None:
    got, suspect = sr.measurements([
        row("dsr1_cfg202", DUMP, "500", "15", (16, 1, 4, 4)),  # twin of the id-bearing row below: read as tp4 ep4
        row("x_tp4_ep4_9", LATER, "500.004", "15.002", (16, 1, 4, 4)),
        row("dsr1_cfg201", DUMP, "600", "16", (64, 1, 8, 8)),  # no twin, expert-parallel columns: left out
        row("dsr1_cfg203", DUMP, "700", "17", (8, 1, 8, 1)),  # no twin, no expert parallel: kept as written
    ])  # fmt: skip
    assert suspect == 1
    assert [(m.row["id"], m.row["tp_size"], m.row["moe_ep_size"]) for m in got] == [
        ("x_tp4_ep4_9", "4", "4"), ("dsr1_cfg203", "8", "1")]  # fmt: skip


def test_a_missing_version_is_taken_from_a_twin_and_only_kept_rows_pass() -> None:
    got, _ = sr.measurements([
        row("a_tp8_ep1_1", LATER, "10", "1", (8, 1, 8, 1), backend_version=""),
        row("b_tp8_ep1_2", DUMP, "10", "1", (8, 1, 8, 1)),
    ])  # fmt: skip
    assert [m.row["backend_version"] for m in got] == ["0.5.9"]
    assert sr.kept(row("a", LATER, "1", "1", (1, 1, 1, 1)))
    assert not sr.kept(row("a", LATER, "1", "1", (1, 1, 1, 1), mode="disagg"))
    assert not sr.kept(row("a", LATER, "1", "1", (1, 1, 1, 1), system="h100_sxm"))
    assert not sr.kept(row("a", LATER, "1", "1", (1, 1, 1, 1), pp_size="2"))
