"""kernels/advantage.py's own logic on the CPU: load_cuda_advantage behind a stand-in CuPy whose RawKernel is the
kernel's source built by g++ (tests/advantage_impls.py) and launched with the grid and block the wrapper asks for.
So the default keep, lam's float32, the float32 copies, the output buffer and the launch's grid and block run in CI,
against the float64 reference of docs/algorithm.md."""
import contextlib
import sys
import types
from pathlib import Path

import numpy as np
import pytest
import torch

import kernels.advantage
import torch.distributed.tensor  # noqa: F401  assert_close imports it lazily, and it probes CuPy: not the fake one
from advantage_impls import KERNEL, host_kernel_from_source, reference_advantage


@pytest.fixture
def fake_cupy(monkeypatch):
    """A CuPy stand-in on the CPU; returns the record of what the wrapper asked of it."""
    record = {"kernels": [], "launches": []}

    class RawKernel:
        def __init__(self, source, name):
            self.source, self.name, self.library = source, name, None
            record["kernels"].append(self)

        def compile(self):
            self.library = host_kernel_from_source(self.source)

        def __call__(self, grid, block, args):
            assert self.library is not None, "launched before compile()"
            record["launches"].append((self.name, tuple(grid), tuple(block)))
            tensors = [x for x in args if torch.is_tensor(x)]
            numbers = [x for x in args if not torch.is_tensor(x)]
            for x in tensors:
                assert x.dtype == torch.float32 and x.is_contiguous()
            assert self.name == "p3o_advantage"
            lam, T, N, H = numbers
            assert isinstance(lam, np.float32) and all(isinstance(x, np.int32) for x in (T, N, H))
            *inputs, advantages = tensors
            self.library.launch_p3o_advantage(*[x.data_ptr() for x in inputs], float(lam), int(T), int(N), int(H),
                                              advantages.data_ptr(), grid[0], block[0])

    cupy = types.SimpleNamespace(RawKernel=RawKernel, from_dlpack=lambda x: x,
                                 cuda=types.SimpleNamespace(Stream=types.SimpleNamespace(from_external=lambda stream: contextlib.nullcontext())))
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: None)
    return record


def inputs(T, N, H, seed=0):
    g = torch.Generator().manual_seed(seed)
    terminals = (torch.rand(T, N, generator=g) < 0.15).float()
    return (torch.randn(T, N, generator=g), terminals, torch.randn(T, N, H, generator=g), torch.rand(H, generator=g) + 0.2, torch.randn(N, H, generator=g))


@pytest.mark.parametrize("lam", [1.0, 0.8, 0.0])
@pytest.mark.parametrize("with_keep", [False, True])
def test_the_wrapper_computes_the_reference_advantage(fake_cupy, lam, with_keep):
    """45 envs, a block each; H = 12 offsets in a block of 32 threads (a warp, the least), 20 of them padding."""
    T, N, H = 7, 45, 12
    x = inputs(T, N, H)
    tied = (torch.arange(H) % 3 == 0).float() if with_keep else None
    advantage = kernels.advantage.load_cuda_advantage()
    assert [(k.name, k.source == KERNEL.read_text(), k.library is not None) for k in fake_cupy["kernels"]] == [
        ("p3o_advantage", True, True)]  # compiled at load
    got = advantage(*x, lam, tied)
    assert got.shape == (T, N) and got.dtype == torch.float32
    expected = reference_advantage(*x, lam, tied)
    torch.testing.assert_close(got.double(), expected, atol=1e-5, rtol=1e-5)
    assert fake_cupy["launches"] == [("p3o_advantage", (45,), (32,))]
    if lam < 1 and not with_keep:  # the default keep: no offset keeps its rewards, so the keep-all answer differs
        assert not torch.allclose(got.double(), reference_advantage(*x, lam, torch.ones(H)), atol=1e-3)


def test_the_wrapper_reads_other_dtypes_and_strides(fake_cupy):
    """float64 and non-contiguous inputs are copied to contiguous float32 before the launch; H = 40 takes a block of
    64 threads."""
    T, N, H = 5, 9, 40
    rewards, terminals, mu, sigma, tail_mu = inputs(T, N, H, seed=3)
    advantage = kernels.advantage.load_cuda_advantage()
    strided_mu = mu.transpose(0, 1).contiguous().transpose(0, 1)  # same values, other strides
    got = advantage(rewards.double(), terminals.double(), strided_mu, sigma.double(), tail_mu, 0.8)
    torch.testing.assert_close(got.double(), reference_advantage(rewards, terminals, mu, sigma, tail_mu, 0.8), atol=1e-5, rtol=1e-5)
    assert fake_cupy["launches"] == [("p3o_advantage", (9,), (64,))]


def test_the_block_fits_the_horizon():
    """A thread per offset, padded to a power of two and at least a warp; past 1,024 threads a block cannot hold them,
    and the wrapper says so before any launch."""
    assert [kernels.advantage.block_size(H) for H in (1, 32, 33, 128, 129, 1024)] == [32, 32, 64, 128, 256, 1024]
    with pytest.raises(ValueError, match="--kernel torch"):
        kernels.advantage.block_size(1025)
