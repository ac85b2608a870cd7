"""The Mamba comparator: the chunked selective scan against its sequential spec (float64)."""
import pytest
import torch

from gma_teach import mamba
from gma_teach.baselines import make_mixer


def _inputs(b=2, n=13, d=16, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(b, n, d, generator=generator, dtype=torch.float64)


@pytest.mark.parametrize("chunk_size", [1, 5, 64])
def test_mamba_chunked_scan_equals_sequential_scan(chunk_size):
    torch.manual_seed(2)
    mixer = make_mixer("mamba", 16, 1, causal=True, chunk_size=chunk_size, d_state=6).double()
    x = _inputs(n=19, d=16)
    torch.testing.assert_close(mixer(x), mixer(x, sequential=True), rtol=1e-10, atol=1e-12)


def test_mamba_scan_splits_chunks_with_large_decay_and_stays_exact():
    generator = torch.Generator().manual_seed(3)
    b, length, d, s = 2, 17, 4, 3
    x, b_in, c = (torch.randn(b, length, n, generator=generator, dtype=torch.float64) for n in (d, s, s))
    dt = 5 * torch.rand(b, length, d, generator=generator, dtype=torch.float64)  # log decay up to ~ -80 a step
    a = -torch.arange(1, s + 1, dtype=torch.float64).repeat(d, 1) * 4
    skip = torch.randn(d, generator=generator, dtype=torch.float64)
    expected = mamba.selective_scan_sequential(x, dt, a, b_in, c, skip)
    got = mamba.selective_scan_chunked(x, dt, a, b_in, c, skip, chunk_size=16, max_log_decay=30.0)
    assert torch.isfinite(got).all()
    torch.testing.assert_close(got, expected, rtol=1e-10, atol=1e-12)


def test_mamba_is_built_by_name_from_its_module():
    assert type(make_mixer("mamba", 16, 2, causal=True)) is mamba.MambaMixer
