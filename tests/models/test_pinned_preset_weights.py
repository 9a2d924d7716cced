"""A preset's deferred per-tensor groups (kvplan/models/preset_weights.py ``DeferredGroups``): equal where they come
from the same config, equal to the groups they lay out, and never equal to something that is not a sequence."""

from __future__ import annotations

from kvplan.models.from_hf import load_model
from kvplan.models.preset_weights import DeferredGroups


def test_groups_of_one_config_are_equal_and_hash_alike() -> None:
    # glm-5: checkpoint_dtype fp8 and no quantization_config, so its groups are deferred (PRESET_FP8_BLOCKS)
    a, b = load_model("glm-5").param_groups, load_model("glm-5").param_groups
    assert isinstance(a, DeferredGroups) and a is not b
    assert a == b and hash(a) == hash(b)
    assert a != load_model("glm-5.3").param_groups  # another config


def test_deferred_groups_equal_the_groups_they_lay_out() -> None:
    groups = load_model("glm-5").param_groups
    laid_out = tuple(groups)
    assert len(laid_out) > 0 and groups == laid_out and groups == list(laid_out)
    assert groups != laid_out[:-1]


def test_not_a_sequence_is_not_equal_and_lays_nothing_out() -> None:
    groups = load_model("glm-5").param_groups
    assert (groups == 5) is False and (groups == None) is False  # noqa: E711 (the __eq__ under test)


def test_repr_names_the_source() -> None:
    # the key is (source, config text): the repr shows the source, not 100 kB of JSON
    assert repr(load_model("glm-5").param_groups) == "DeferredGroups('models/glm-5.yaml (built-in)')"
