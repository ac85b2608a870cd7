"""Fused Triton kernels for Gaussian Mixture Attention (chapter 7). The only module of gma_teach that imports Triton.

* :func:`gma_triton` -- bidirectional (write pass + read pass) and causal (chunked) GMA, forward and backward,
  differentiable w.r.t. q, k, v, means, variances and log_priors; works under ``torch.compile``.
* :func:`responsibilities` -- the fused responsibility kernel on its own (forward only).
* :func:`is_available`, :func:`triton_status` -- can the kernels run here, and how (compiled or interpreted).

Without CUDA, Triton runs the same kernels in its CPU interpreter: importing this package sets
``TRITON_INTERPRET=1`` first (see ``gma_teach/kernels/_environment.py``). Without Triton, importing still works,
:func:`is_available` is False, and :func:`gma_triton` raises an ImportError saying how to install it.
"""
from ._environment import configure as _configure
from ._environment import interpreting, is_available
from ._environment import status as triton_status

if _configure()["installed"]:
    from ._ops import gma_triton, mixture_tables, responsibilities, supports
else:
    def _missing(*args, **kwargs):
        raise ImportError(f"the Triton kernels are unavailable: triton {triton_status()}")

    gma_triton = responsibilities = mixture_tables = _missing

    def supports(*args, **kwargs) -> bool:
        return False

__all__ = ["gma_triton", "responsibilities", "mixture_tables", "supports", "is_available", "triton_status",
           "interpreting"]
