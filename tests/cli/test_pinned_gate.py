"""Survivors of the sampled mutation check (scripts/mutate.py, issue 26) on kvplan/plan/gate.py."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from kvplan.engines import plan_pool
from kvplan.errors import InputError
from kvplan.models.deploy import Requirements
from kvplan.models.deployment import load_deployment
from kvplan.models.from_hf import load_model
from kvplan.plan.gate import (
    GateResult,
    _kind,
    _printable,
    check,
    diff,
    figures,
    is_new,
    lock_text,
    parse_lock_untrusted,
    promised_contexts,
    read_lock,
)
from tests.cli.test_lock_forged import _edit, _one_error, repo, run
from tests.conftest import make_plan

__all__ = ["repo"]  # the fixture, imported for the tests below


def test_a_page_of_no_tokens_is_a_forged_lock(repo: Path) -> None:
    # a page holds at least one token (SGLang --page-size and vLLM --block-size are >= 1): a lock saying 0 is
    # refused by the reader's bounds, whatever the digest says
    _edit(repo, rank_page_tokens=0, logical_page_tokens=0)
    _one_error(run("gate", "prod.yaml"), "rank_page_tokens")


def test_the_lock_file_ends_its_last_line(repo: Path) -> None:
    # a text file whose last line ends in a newline, as git and POSIX tools expect, and only one
    text = (repo / "kvplan.lock").read_text()
    assert text.endswith("}\n") and not text.endswith("\n\n")


def test_a_quoted_key_is_cut_only_past_200_characters() -> None:
    # an error quotes at most 200 characters of a key (gate._MAX_NAME_CHARS) and marks a cut with '…'
    assert _printable("k" * 200) == "k" * 200
    assert _printable("k" * 201) == "k" * 200 + "…"
    assert _printable("a\x1b[31mb") == "a\\x1b[31mb"  # no terminal escape reaches the message


def test_an_unknown_key_is_named(repo: Path) -> None:
    # one unknown key: named in one line (exit 2), not an IndexError; of several, the first in sorted order
    _edit(repo, zz_extra=1)
    _one_error(run("gate", "prod.yaml"), "unknown key 'zz_extra'")
    _edit(repo, aa_extra=1)
    _one_error(run("gate", "prod.yaml"), "unknown key 'aa_extra'")


def test_a_string_field_may_hold_200_characters(repo: Path) -> None:
    # the reader's bound on a string field (gate._MAX_NAME_CHARS): 200 characters are read (the forged entry is
    # then caught by its digest), 201 are refused as they are read
    _edit(repo, model="m" * 200)
    _one_error(run("gate", "prod.yaml"), "digest mismatch")
    _edit(repo, model="m" * 201)
    _one_error(run("gate", "prod.yaml"), "model: expected a short string without control characters")


def test_a_concurrency_context_of_one_token_is_read(repo: Path) -> None:
    # a context holds at least one token: "1" is read (the forged entry is then caught by its digest), "0" is refused
    _edit(repo, concurrency={"1": 4})
    _one_error(run("gate", "prod.yaml"), "digest mismatch")
    _edit(repo, concurrency={"0": 4})
    _one_error(run("gate", "prod.yaml"), "concurrency key")


def test_the_capacity_change_is_read_in_ppm_and_the_default_rule_allows_no_drop(repo: Path) -> None:
    # 39 indexer layers instead of 78 on GLM-5.3 (tests/cli/test_gate.py): pool 1,278,208 -> 1,168,256 tokens,
    # (1,168,256 − 1,278,208) × 10^6 // 1,278,208 = −109,952,000,000 // 1,278,208 = −86,021 ppm (floored);
    # without --max-capacity-drop the rule allows 0 %
    shutil.copy(repo / "other.yaml", repo / "prod.yaml")
    r = run("gate", "prod.yaml", "--format", "json")
    assert r.exit_code == 1, r.stdout
    (result,) = json.loads(r.stdout)["results"]
    assert result["capacity_change_ppm"] == -86_021
    assert any(rule["name"] == "capacity drop <= 0%" and not rule["ok"] for rule in result["rules"])


def test_the_capacity_change_is_floored_parts_per_million(repo: Path) -> None:
    # 1,000,000 -> 500,001 tokens: (−499,999 × 10^6) // 10^6 = −499,999 ppm exactly (−49.9999 %)
    (locked,) = parse_lock_untrusted((repo / "kvplan.lock").read_text(), "kvplan.lock")[0].values()
    before = replace(locked, pool_tokens=1_000_000)
    result = GateResult(config="prod.yaml", before=before, after=replace(before, pool_tokens=500_001), rules=())
    assert result.capacity_change_ppm == -499_999


def test_the_drop_rule_floors_the_change_before_comparing(repo: Path) -> None:
    # base.yaml plans 1,278,208 tokens; a lock of 2,556,417 makes the change (1,278,208 − 2,556,417) × 10^6
    # // 2,556,417 = floor(−500,000.196) = −500,001 ppm: a drop of 500,001 ppm, over a 50 % rule
    dep = load_deployment(str(repo / "prod.yaml"))
    plan = plan_pool(load_model(dep.model), dep)
    (locked,) = parse_lock_untrusted((repo / "kvplan.lock").read_text(), "kvplan.lock")[0].values()
    assert plan.logged_tokens == locked.pool_tokens == 1_278_208
    g = check("prod.yaml", plan, Requirements(max_capacity_drop_ppm=500_000), replace(locked, pool_tokens=2_556_417))
    rule = next(r for r in g.rules if r.name == "capacity drop <= 50%")
    assert not rule.ok and rule.detail == "pool 2,556,417 -> 1,278,208 tokens (-50.00%)"
    # the shown percentage is ppm / 10,000: a pool a millionth of its lock's is a change of
    # (1,278,208 − 1,278,208,000,000) × 10^6 // 1,278,208,000,000 = −999,999 ppm, shown as −100.00 %
    g = check("prod.yaml", plan, Requirements(), replace(locked, pool_tokens=1_278_208_000_000))
    assert "(-100.00%)" in next(r for r in g.rules if r.name.startswith("capacity drop")).detail


def test_no_pool_before_and_after_is_no_change(repo: Path) -> None:
    # an engine that did not start and still does not: 0 -> 0 tokens is a change of 0, not a division by zero
    (locked,) = parse_lock_untrusted((repo / "kvplan.lock").read_text(), "kvplan.lock")[0].values()
    none = replace(locked, pool_tokens=0)
    assert GateResult(config="prod.yaml", before=none, after=none, rules=()).capacity_change_ppm == 0


def test_the_draft_row_holds_the_mtp_layer_and_its_indexer() -> None:
    # GLM-5.3 with MTP (speculative_num_draft_tokens 4) on SGLang: the draft worker's pool holds the NextN layer's
    # fp8_ds_mla latent (656 B: 512 fp8 nope + 4 × 4 B scales + 64 bf16 rope) and, the layer being DSA, its
    # indexer key (128 fp8 + a 4 B scale = 132 B): 788 B a row; the cell is 78 × 656 + 21 × 132 + 788 = 54,728 B
    f = figures(make_plan(speculative_num_draft_tokens=4), ())
    assert (f.draft_bytes_per_row, f.cell_bytes) == (788, 54_728)


def test_the_lock_is_two_space_json() -> None:
    # the lock's bytes do not change between kvplan versions for unchanged figures (lock_text: re-locking gives
    # the same file), so the indentation every lock was written with, 2 spaces, is the format
    f = figures(make_plan(), ())
    lines = lock_text({"prod": f}).splitlines()
    assert lines[:3] == ["{", '  "configs": {', '    "prod": {']


# Fresh seed 59039 (issue 26).


def test_new_is_more_than_100_times_the_lock() -> None:
    # NEW_RATIO: a figure more than 100 times its baseline is "new"; exactly 100 times is still a percentage
    # (1,000 -> 100,000 tokens: +9,900 %), one token more is new; a baseline of 0 makes any pool new, none is not
    assert not is_new(1_000, 100_000)
    assert is_new(1_000, 100_001)
    assert is_new(0, 1) and not is_new(0, 0) and not is_new(1_000, 0)
    # a baseline of 1 token is a baseline, not "none": 1 -> 100 is +9,900 %, 1 -> 101 new
    assert not is_new(1, 100) and is_new(1, 101)


def test_the_drop_rule_names_a_fractional_percentage(repo: Path) -> None:
    # --max-capacity-drop 12.5% is 125,000 ppm: the rule says "<= 12.5%", not 12
    dep = load_deployment(str(repo / "prod.yaml"))
    plan = plan_pool(load_model(dep.model), dep)
    (locked,) = parse_lock_untrusted((repo / "kvplan.lock").read_text(), "kvplan.lock")[0].values()
    g = check("prod.yaml", plan, Requirements(max_capacity_drop_ppm=125_000), locked)
    assert [r.name for r in g.rules][:2] == ["engine starts", "capacity drop <= 12.5%"]
    assert g.rules[0].detail == "the pool is built"


def test_a_schema_1_lock_with_a_broken_page_is_one_clear_error(repo: Path) -> None:
    # schema 1's page_tokens "64" (a string) and dcp null: the logical page is not computed from them (no
    # "64" × None, a TypeError), so the entry lacks it and is refused in one line; a boolean page (true × 2) is no
    # int either: not migrated, the same line
    doc = json.loads((repo / "kvplan.lock").read_text())
    entry = doc["configs"]["prod.yaml"]
    entry.pop("rank_page_tokens")
    del entry["logical_page_tokens"]
    doc["schema_version"] = 1
    for page, dcp in (("64", None), (True, 2)):
        entry["page_tokens"], entry["dcp"] = page, dcp
        with pytest.raises(InputError) as e:
            parse_lock_untrusted(json.dumps(doc), "kvplan.lock")
        assert str(e.value) == "kvplan.lock: configs.prod.yaml: missing logical_page_tokens (re-run kvplan lock)"


def test_a_document_without_configs_or_schema_is_not_a_lock() -> None:
    # either key missing, or not an object at all: "not a kvplan lock file", not a KeyError
    for doc in ({"schema_version": 3}, {"configs": {}}, [1, 2]):
        with pytest.raises(InputError, match=r"^x\.lock: not a kvplan lock file \(no schema_version / configs\)$"):
            read_lock(doc, "x.lock")


def test_a_knob_the_old_model_refuses_is_a_row_of_no_pool() -> None:
    # diff GLM-5.3 (SGLang, DSA) -> Llama-3.1-8B at page_size 1: the page_size row applies 1 to GLM-5.3, which
    # SGLang refuses at start-up (the DSA indexer needs 64-token pages): that row plans no pool, 0 tokens and 0 B
    # a token, and says why, instead of a figure for a pool that is never built
    old = make_plan()
    new = make_plan(model="llama-3.1-8b", kv_cache_dtype="auto", page_size=1)
    row = next(e for e in diff(old, new) if e.knob == "page_size")
    assert (row.old, row.new, row.pool_tokens, row.cell_bytes) == ("64", "1", 0, 0)
    assert row.startup_error is not None and row.startup_error.startswith("DSA requires 64-token physical pages")


def test_the_default_contexts_are_128k_and_1m() -> None:
    # without requirements a lock records 128K = 131,072 and 1M = 1,048,576 tokens; a model of 131,072 positions
    # (Llama-3.1's max_position_embeddings) only the first; one of 32,768 its own length
    assert promised_contexts(Requirements()) == (131_072, 1_048_576)
    assert promised_contexts(Requirements(), 131_072) == (131_072,)
    assert promised_contexts(Requirements(), 32_768) == (32_768,)
    assert promised_contexts(Requirements(), 1_048_576) == (131_072, 1_048_576)  # both, 1M itself included
    # requirements name their own contexts: each N@ctx, then --require-ctx
    assert promised_contexts(Requirements(min_ctx_tokens=5_000, concurrency=((4, 8_192),))) == (8_192, 5_000)


def test_a_wrong_string_is_quoted_to_40_characters() -> None:
    # a string where an integer belongs: the message quotes its first 40 characters
    assert _kind("x" * 50) == "a string ('" + "x" * 40 + "')"


def test_an_empty_config_name_is_no_path() -> None:
    # a lock's configs are keyed by the config's path: an empty key names no file
    with pytest.raises(InputError, match=r"^x\.lock: configs: '' is not a config path"):
        read_lock({"schema_version": 3, "configs": {"": {}}}, "x.lock")


def test_a_drop_of_exactly_the_rule_passes(repo: Path) -> None:
    # base.yaml plans 1,278,208 tokens; a lock of twice that, 2,556,416: (1,278,208 − 2,556,416) × 10^6 // 2,556,416
    # = −500,000 ppm exactly, and a 50 % rule allows a drop of 500,000 ppm: met ("<=")
    dep = load_deployment(str(repo / "prod.yaml"))
    plan = plan_pool(load_model(dep.model), dep)
    (locked,) = parse_lock_untrusted((repo / "kvplan.lock").read_text(), "kvplan.lock")[0].values()
    g = check("prod.yaml", plan, Requirements(max_capacity_drop_ppm=500_000), replace(locked, pool_tokens=2_556_416))
    rule = next(r for r in g.rules if r.name == "capacity drop <= 50%")
    assert rule.ok and rule.detail == "pool 2,556,416 -> 1,278,208 tokens (-50.00%)"


def test_the_capacity_change_from_a_one_token_lock(repo: Path) -> None:
    # a lock of 1 token is a baseline: 1 -> 50 is +49,000,000 ppm (not new: 50 <= 100 × 1), 1 -> 0 is −100 %;
    # 4 -> 5 is +250,000 ppm exactly
    (locked,) = parse_lock_untrusted((repo / "kvplan.lock").read_text(), "kvplan.lock")[0].values()

    def change(before: int, after: int) -> int | None:
        b = replace(locked, pool_tokens=before)
        return GateResult(
            config="prod.yaml", before=b, after=replace(b, pool_tokens=after), rules=()
        ).capacity_change_ppm

    assert (change(1, 50), change(1, 0), change(4, 5)) == (49_000_000, -1_000_000, 250_000)


def test_a_one_token_lock_dropping_to_no_pool_is_a_drop_of_100_percent(repo: Path) -> None:
    # the earlier seed's one survivor left (max(locked, 1) -> 2): a lock of 1 token and a pool of 0 now is a change
    # of (0 − 1) × 10^6 // 1 = −1,000,000 ppm, over a 60 % rule (halving the divisor would say −50 % and pass)
    dep = load_deployment(str(repo / "prod.yaml"))
    plan = replace(plan_pool(load_model(dep.model), dep), logged_tokens=0)
    (locked,) = parse_lock_untrusted((repo / "kvplan.lock").read_text(), "kvplan.lock")[0].values()
    g = check("prod.yaml", plan, Requirements(max_capacity_drop_ppm=600_000), replace(locked, pool_tokens=1))
    rule = next(r for r in g.rules if r.name == "capacity drop <= 60%")
    assert not rule.ok and rule.detail == "pool 1 -> 0 tokens (-100.00%)"


def test_what_a_failed_requirement_says(repo: Path) -> None:
    # base.yaml (GLM-5.3, dcp 2: 128-token logical pages) has 9,986 usable pages (tests/cli/test_gate.py); a
    # 131,072-token request takes 1,024 of them, so 9,986 // 1,024 = 9 fit of 100, the pool's pages binding; a
    # 4,000,000-token request is past the 1,048,576-token context
    dep = load_deployment(str(repo / "prod.yaml"))
    plan = plan_pool(load_model(dep.model), dep)
    g = check("prod.yaml", plan, Requirements(min_ctx_tokens=4_000_000, concurrency=((100, 131_072),)), None)
    assert [(r.name, r.ok, r.detail) for r in g.rules[1:]] == [
        ("admits 4,000,000 tokens", False, "rejected by context length; largest 1,048,576"),
        ("admits 100 × 131,072 tokens", False, "9 fit; rejected by pool pages"),
    ]


def test_an_engine_change_drops_the_old_engines_own_knobs() -> None:
    # diff GLM-5.3 SGLang -> vLLM presets: the SGLang preset sets mem_fraction_static, chunked_prefill_size and
    # other knobs only SGLang reads; vLLM refuses them, so they go back to their defaults with the engine and OLD's
    # other settings plan on vLLM: the engine row has a pool (refused at start-up only by vLLM's own max-model-len
    # check at 1M) and the knob rows follow it
    rows = diff(make_plan("glm-5.3-8xh200-sglang"), make_plan("glm-5.3-8xh200-vllm"))
    assert [r.knob for r in rows] == ["engine", "kv_cache_dtype", "context_length"]
    engine = rows[0]
    assert engine.pool_tokens > 0 and engine.cell_bytes == 53_940  # 51,168 B MLA + 2,772 B index K
    assert engine.startup_error is not None and engine.startup_error.startswith("To serve at least one request")


def test_an_engine_version_change_keeps_the_engines_own_knobs() -> None:
    # SGLang 0.5.9 -> 0.5.23 of the same preset with mem_fraction_static 0.8 (an SGLang-only knob, below the
    # preset's 0.886): the version row re-plans OLD's settings on 0.5.23, its own knobs kept (only the other
    # engine's go back to their defaults), which is NEW itself: 330,048 tokens against OLD's 322,368, and no knob
    # rows; resetting 0.8 would plan the preset's 567,616
    old = make_plan("glm-5.3-8xh200-sglang", engine_version="0.5.9", mem_fraction_static=0.8)
    new = make_plan("glm-5.3-8xh200-sglang", mem_fraction_static=0.8)
    (row,) = diff(old, new)
    assert (row.knob, row.old, row.new) == ("engine", "sglang 0.5.9", "sglang 0.5.23")
    assert (row.pool_tokens, row.base_pool_tokens) == (new.logged_tokens, old.logged_tokens) == (330_048, 322_368)


def test_a_lock_of_no_pool_grows_to_a_new_one(repo: Path) -> None:
    # a lock taken when the engine did not start (0 tokens) and a pool now: "new", not a division by zero
    dep = load_deployment(str(repo / "prod.yaml"))
    plan = plan_pool(load_model(dep.model), dep)
    (locked,) = parse_lock_untrusted((repo / "kvplan.lock").read_text(), "kvplan.lock")[0].values()
    g = check("prod.yaml", plan, Requirements(), replace(locked, pool_tokens=0))
    rule = next(r for r in g.rules if r.name == "capacity drop <= 0%")
    assert rule.ok and rule.detail == "pool 0 -> 1,278,208 tokens (new)"
