"""Fused Triton kernels for Gaussian Mixture Attention (chapter 7). The only module of gma_teach that imports Triton.

* :func:`gma_triton` -- bidirectional, causal and cross GMA, forward and backward, differentiable w.r.t. q, k, v,
  means, variances and log_priors; works under ``torch.compile``. The mixture dimension K is tiled, so every
  supported size (:func:`supports`: K <= 512, d_r, d_v <= 128) fits a small GPU's shared memory.
* :func:`fused_responsibilities` -- the kernels' responsibilities on their own (forward only).
* :func:`mixture_tables` -- the fp32 tables ``(w_sq, w_lin, bias)`` the kernels read (from ``gmm.gemm_coefficients``).
* :func:`tile_sizes`, :func:`shared_memory`, ``SHARED_MEMORY_LIMITS`` -- the tiles used on a GPU architecture,
  and their shared memory, counted by Triton's own allocator for that architecture (no GPU needed).
* :func:`is_available`, :func:`triton_status`, :func:`interpreting` -- can the kernels run here, and how.
* :func:`dot_precision`, :func:`tolerance` -- the precision a ``tl.dot`` multiplies in on a device (TF32 or IEEE
  float32), and the tolerance a kernel's result is checked with against float64 at that precision.

Without CUDA, Triton runs the same kernels in its CPU interpreter: importing this package sets
``TRITON_INTERPRET=1`` first (see ``gma_teach/kernels/_environment.py``). Without Triton, importing still works,
:func:`is_available` is False, :func:`supports` is False, and the kernel functions raise an ImportError saying how
to install it. This package imports nothing of gma_teach above :mod:`gma_teach.gmm`.
"""
from ._environment import configure as _configure
from ._environment import interpreting, is_available
from ._environment import status as triton_status
from ._precision import dot_precision, tolerance

if _configure()["installed"]:  # optional dependency: these modules import triton
    from ._accounting import SHARED_MEMORY_LIMITS, shared_memory
    from ._ops import fused_responsibilities, gma_triton, mixture_tables, supports, tile_sizes
else:
    def _missing(*args, **kwargs):
        raise ImportError(f"the Triton kernels are unavailable: triton {triton_status()}")

    gma_triton = fused_responsibilities = mixture_tables = tile_sizes = shared_memory = _missing
    SHARED_MEMORY_LIMITS: dict = {}

    def supports(*args, **kwargs) -> bool:
        return False

# The name chapter 7 used before the kernels' responsibilities were named for what they are; kept so that existing
# code keeps working (gma_teach.responsibilities is the package's differentiable one).
responsibilities = fused_responsibilities

__all__ = ["gma_triton", "fused_responsibilities", "mixture_tables", "supports", "tile_sizes", "shared_memory",
           "SHARED_MEMORY_LIMITS", "is_available", "triton_status", "interpreting", "dot_precision", "tolerance"]
