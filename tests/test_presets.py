"""The preset table: every scale in every entry, one set of keys, sizes that grow, and the fields chapters 9-11 read."""
import fnmatch

import pytest

from gma_teach import preset
from gma_teach.environment import SCALES
from gma_teach.presets import PRESETS


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_entry_has_every_scale_with_the_same_keys(name):
    assert tuple(PRESETS[name]) == SCALES, f"{name}: scales {tuple(PRESETS[name])}"
    keys = {scale: set(PRESETS[name][scale]) for scale in SCALES}
    for scale in SCALES:
        assert keys[scale] == keys["tiny"], f"{name} at {scale}: keys differ by {keys[scale] ^ keys['tiny']}"


@pytest.mark.parametrize("name", sorted(n for n in PRESETS if "seq_lens" in PRESETS[n]["tiny"]))
def test_sweeps_reach_further_at_each_scale(name):
    longest = [max(PRESETS[name][scale]["seq_lens"]) for scale in SCALES]
    assert longest == sorted(longest), f"{name}: longest sequence per scale {longest}"
    for scale in SCALES:
        sizes = PRESETS[name][scale]["seq_lens"]
        assert sizes == sorted(set(sizes)), f"{name} at {scale}: seq_lens must be increasing"
        for limit in ("naive_max_len", "cumsum_max_len", "softmax_max_len"):
            if limit in PRESETS[name][scale]:  # the chapter reads the point at the limit: it must be swept
                assert PRESETS[name][scale][limit] in sizes, f"{name} at {scale}: {limit} not in seq_lens"


@pytest.mark.parametrize("chapter", ["ch09", "ch10"])
def test_chapters_9_and_10_train_live_at_a_scale_short_of_full_and_name_their_records(chapter):
    for scale in SCALES:
        p = preset(chapter, scale)
        assert p.live_scale in SCALES and p.live_scale != "full"
        assert p.live_scale == (scale if scale != "full" else "medium")
        assert p.recorded_runs and all(pattern.endswith(".json") for pattern in p.recorded_runs)
    for pattern in preset(chapter, "full").recorded_runs:  # the long runs, never trained in the chapter
        experiment = pattern.split("_")[0]
        assert fnmatch.fnmatch(f"{experiment}_gma_full.json", pattern), pattern


def test_chapter_11_reads_the_language_model_chapter_10_trains():
    for scale in SCALES:
        assert preset("ch11", scale).lm_scale == preset("ch10", scale).live_scale


def test_the_runs_of_chapters_9_and_10_exist_at_their_live_scale():
    for scale in SCALES:
        live = preset("ch09", scale).live_scale
        lm = preset("lm", preset("ch10", scale).live_scale)
        assert preset("listops", live).n_train > 0 and preset("text", live).n_train > 0
        assert lm.n_components in lm.n_components_sweep
        for mixer in preset("ch10", scale).mixers:
            assert mixer != "linformer", "the LM has no Linformer (it is not causal)"


def test_presets_follow_the_chapters():
    """Chapters in order; each experiment's sizes right after the chapter that runs it live (listops and text after
    chapter 9, lm after chapter 10)."""
    assert list(PRESETS) == ["ch01", "ch02", "ch03", "ch04", "ch05", "ch06", "ch07", "ch08", "ch09", "listops", "text",
                             "ch10", "lm", "ch11", "ch12"]
