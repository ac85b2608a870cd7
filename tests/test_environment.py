"""The reader's environment (gma_teach.environment): the scale chosen by the device, presets, seeding, the report."""
import importlib
import types

import pytest
import torch

import gma_teach
from gma_teach import environment

GiB = 2**30


def fake_cuda(monkeypatch, *, total_memory, capability, name="fake GPU"):
    """Make torch report one CUDA GPU with this memory and compute capability (nothing runs on it)."""
    properties = types.SimpleNamespace(total_memory=total_memory, major=capability[0], minor=capability[1], name=name)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device=None: properties)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: name)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *args, **kwargs: capability >= (8, 0))


@pytest.fixture
def no_scale_variable(monkeypatch):
    monkeypatch.delenv(environment.SCALE_VARIABLE, raising=False)


def test_a_cpu_defaults_to_small(monkeypatch, no_scale_variable):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert environment.scale() == "small" and gma_teach.scale() == "small"


def test_a_16_gb_t4_defaults_to_medium(monkeypatch, no_scale_variable):
    fake_cuda(monkeypatch, total_memory=15_828_320_256, capability=(7, 5), name="Tesla T4")  # what a T4 reports
    assert gma_teach.scale() == "medium"
    assert gma_teach.preset("ch01").scale == "medium"
    assert gma_teach.device().type == "cuda"


def test_an_h200_defaults_to_medium_and_runs_full_only_when_asked(monkeypatch, no_scale_variable):
    fake_cuda(monkeypatch, total_memory=150_119_997_440, capability=(9, 0), name="NVIDIA H200")
    assert gma_teach.scale() == "medium"
    monkeypatch.setenv(environment.SCALE_VARIABLE, "full")
    assert gma_teach.scale() == "full"


def test_a_gpu_too_small_for_medium_defaults_to_small(monkeypatch, no_scale_variable):
    fake_cuda(monkeypatch, total_memory=8 * GiB, capability=(7, 5))
    assert gma_teach.scale() == "small"


def test_the_variable_wins_and_is_checked(monkeypatch):
    for value, expected in (("tiny", "tiny"), (" Small ", "small"), ("MEDIUM", "medium"), ("full", "full")):
        monkeypatch.setenv(environment.SCALE_VARIABLE, value)
        assert gma_teach.scale() == expected
    monkeypatch.setenv(environment.SCALE_VARIABLE, "huge")
    with pytest.raises(ValueError, match="GMA_TEACH_SCALE must be one of .*'huge'"):
        gma_teach.scale()


def test_preset_reads_the_table_and_checks_its_arguments(monkeypatch):
    from gma_teach.presets import PRESETS

    monkeypatch.setenv(environment.SCALE_VARIABLE, "tiny")
    p = gma_teach.preset("ch04")
    assert p.scale == "tiny" and p.seq_lens == PRESETS["ch04"]["tiny"]["seq_lens"]
    assert gma_teach.preset("ch04", "medium").n_components == PRESETS["ch04"]["medium"]["n_components"]
    with pytest.raises(ValueError, match="preset name must be one of .*'ch99'"):
        gma_teach.preset("ch99")
    with pytest.raises(TypeError, match="preset name must be a str, got int"):
        gma_teach.preset(4)
    with pytest.raises(ValueError, match="scale_name must be one of .*'large'"):
        gma_teach.preset("ch04", "large")


def test_the_module_is_importable_by_its_name_and_the_public_names_stay():
    module = importlib.import_module("gma_teach.environment")
    assert isinstance(module, types.ModuleType) and module.SCALES == ("tiny", "small", "medium", "full")
    for name in ("scale", "preset", "env_report", "device", "cache_dir", "seed_everything"):
        assert getattr(gma_teach, name) is getattr(module, name), name


def test_seed_everything_repeats_every_generator():
    import random

    import numpy as np

    def draw():
        return random.random(), float(np.random.rand()), float(torch.rand(()))

    gma_teach.seed_everything(123)
    first = draw()
    gma_teach.seed_everything(123)
    assert draw() == first
    gma_teach.seed_everything(124)
    assert draw() != first


def test_cache_dir_follows_the_variable(monkeypatch, tmp_path):
    target = tmp_path / "nested" / "cache"
    monkeypatch.setenv("GMA_TEACH_CACHE", str(target))
    assert gma_teach.cache_dir() == target and target.is_dir()


def test_env_report_names_the_scale_and_why(monkeypatch, no_scale_variable):
    fake_cuda(monkeypatch, total_memory=15_828_320_256, capability=(7, 5), name="Tesla T4")
    monkeypatch.setattr(environment, "_triton_line", lambda: "mocked")
    report = gma_teach.env_report()
    assert "Tesla T4 (sm_75, 14.7 GiB, bf16 no)" in report
    assert "scale      medium (default on this device; GMA_TEACH_SCALE=full for the paper's sizes)" in report
    monkeypatch.setenv(environment.SCALE_VARIABLE, "tiny")
    assert gma_teach.env_report().endswith("scale      tiny (from GMA_TEACH_SCALE)")
