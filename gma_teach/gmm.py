r"""Chapter 2: diagonal Gaussian mixtures and their posterior (the *responsibilities*).

For a routing vector :math:`x \in \mathbb{R}^d` and :math:`K` diagonal Gaussians with means :math:`\mu_k`,
variances :math:`\sigma^2_k` and log priors :math:`\log \pi_k`,

.. math::

    \log p(x, k) = \log\pi_k - \tfrac12 \sum_d \log(2\pi\sigma^2_{kd}) - \tfrac12 \sum_d (x_d-\mu_{kd})^2/\sigma^2_{kd},
    \qquad \gamma_k(x) = \operatorname{softmax}_k \log p(x, k).

Expanding the square gives the *GEMM form* used everywhere in the package: one matrix product of the features
:math:`[x \odot x, x]` (``(N, 2d)``) with a ``(2d, K)`` coefficient matrix, plus a per-component constant:

.. math::

    \log p(x, k) = (x\odot x)\cdot(-\tfrac{1}{2\sigma^2_k}) + x \cdot (\mu_k/\sigma^2_k) + c_k,\quad
    c_k = \log\pi_k - \tfrac12\sum_d \log(2\pi\sigma^2_{kd}) - \tfrac12\sum_d \mu_{kd}^2/\sigma^2_{kd}.

The three terms cancel heavily (chapter 2 measures how much), so the logits are always computed in at least
float32, with autocast switched off, whatever the input dtype. Even float32 is not enough when
:math:`x^2/\sigma^2` or :math:`\mu^2/\sigma^2` is large next to the logits' differences (means far from the
origin, or tiny variances): :func:`gemm_cancellation_bound` bounds the float32 rounding error of the logits from
``|x|``, ``|mu|`` and ``1/sigma^2`` at a cost of one pass over ``x``, and :func:`gemm_logits` computes in float64
(and rounds the logits back to float32) when that bound exceeds :data:`GEMM_LOGIT_TOLERANCE`.

Dtypes: a mixture and its inputs may differ in precision (a float64 mixture from :func:`fit_em` used on float32
routing vectors); the logits are computed in :func:`compute_dtype` of all of them (float64 if any is float64).
Variances must be normal numbers (``>= torch.finfo(dtype).tiny``), so that ``1 / variance`` is finite.

Shapes: one mixture has ``means``/``variances`` ``(K, d)`` and ``log_priors`` ``(K,)`` and takes ``x`` of shape
``(..., N, d)``; one mixture per head has ``(H, K, d)`` and ``(H, K)`` and takes ``x`` of shape ``(..., H, N, d)``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from . import _checks

_LOG_2PI = math.log(2.0 * math.pi)


GEMM_LOGIT_TOLERANCE = 1e-3
"""The largest float32 rounding error of the GEMM-form logits (:func:`gemm_cancellation_bound`) that
:func:`gemm_logits` accepts before it computes in float64 instead."""


def check_mixture(x, means, variances, log_priors, *, check_values: bool = True, name: str = "x") -> None:
    """Validate the shapes (and, when asked, the values) of a mixture and its inputs ``x``.

    Args:
        x: ``(..., N, d)``, or ``(..., H, N, d)`` for a mixture per head; ``name`` is how the caller called it.
        means, variances: ``(K, d)`` or ``(H, K, d)``.
        log_priors: ``(K,)`` or ``(H, K)``.
        check_values: also check that the variances are normal positive numbers (``>= finfo(dtype).tiny``) and the
            log priors normalized; this reads the values (a GPU synchronization), so layers whose mixture is valid
            by construction skip it. Skipped while ``torch.compile`` traces.

    Raises:
        TypeError: a non-tensor or a non-floating tensor. ValueError: shapes or values that do not fit.
    """
    _checks.tensor(name, x, min_rank=2)
    _checks.tensor("means", means, min_rank=2)
    _checks.tensor("variances", variances, min_rank=2)
    _checks.tensor("log_priors", log_priors, min_rank=1)
    _checks.same_device(**{name: x}, means=means, variances=variances, log_priors=log_priors)
    if means.dim() not in (2, 3):
        raise ValueError(f"means must be (K, d) or (H, K, d), got shape {tuple(means.shape)}")
    if variances.shape != means.shape:
        raise ValueError(
            f"variances must have the shape of means {tuple(means.shape)}, got {tuple(variances.shape)}"
        )
    if log_priors.shape != means.shape[:-1]:
        raise ValueError(
            f"log_priors must have shape {tuple(means.shape[:-1])} (the K of means/variances), "
            f"got {tuple(log_priors.shape)}"
        )
    if x.shape[-1] != means.shape[-1]:
        raise ValueError(
            f"{name} has feature dim {x.shape[-1]} but means/variances have d={means.shape[-1]} "
            f"({name} {tuple(x.shape)}, means {tuple(means.shape)})"
        )
    if means.dim() == 3:
        n_heads = means.shape[0]
        if x.dim() < 3 or x.shape[-3] != n_heads:
            raise ValueError(
                f"with one mixture per head (means {tuple(means.shape)}) {name} must be (..., H={n_heads}, N, d), "
                f"got shape {tuple(x.shape)}"
            )
    if check_values and not torch.compiler.is_compiling():  # value checks would break a compiled graph
        smallest = variances.detach().min().item()
        tiny = torch.finfo(variances.dtype).tiny
        if not smallest >= tiny:  # also refuses NaN
            raise ValueError(f"variances must be > 0 and normal numbers (>= torch.finfo({variances.dtype}).tiny = "
                             f"{tiny:.3g}, so that 1/variance is finite), got minimum {smallest:.3g}")
        if not bool(torch.isfinite(variances).all()):
            raise ValueError("variances must be finite, got inf")
        total = torch.logsumexp(log_priors.detach().double(), dim=-1)
        tolerance = max(1e-4, 4 * torch.finfo(log_priors.dtype).eps)  # half precision rounds the priors
        if not bool((total.abs() < tolerance).all()):
            raise ValueError(
                f"log_priors must be normalized (logsumexp over K equal to 0), got logsumexp {total.tolist()}"
            )


def check_gma_inputs(q, k, v, means, variances, log_priors, *, causal: bool, check_values: bool = True) -> None:
    """The shape rules of GMA from routing vectors, shared by :func:`gma_teach.gma` and the fused kernels' entry
    :func:`gma_teach.kernels.gma_triton` (which adds only its own limits: 4-D inputs, one mixture per head, sizes).

    It lives here, beside :func:`check_mixture`, because the kernels import nothing above this module.

    Args:
        q: ``(..., N_q, d)``; k: ``(..., N_k, d)``; v: ``(..., N_k, d_v)`` (``(..., H, N, *)`` with a mixture per
            head); means, variances, log_priors: a mixture as in :func:`check_mixture`.
        causal: a bool; causal GMA needs ``N_q == N_k``.
        check_values: also check the mixture's values (:func:`check_mixture`).

    With one mixture per head, ``q``, ``k`` and ``v`` must have the same number of dims (a ``(B, N, d)`` ``q`` with
    ``B == H`` would otherwise pass as ``(H, N, d)``); their leading dims must broadcast.

    Raises:
        TypeError: a non-tensor or a non-floating tensor. ValueError: shapes, devices or values that do not fit.
    """
    check_mixture(q, means, variances, log_priors, name="q", check_values=check_values)
    check_mixture(k, means, variances, log_priors, name="k", check_values=False)
    _checks.tensor("v", v, min_rank=2)
    _checks.same_device(q=q, k=k, v=v)
    if v.shape[-2] != k.shape[-2]:
        raise ValueError(f"v must have one row per key: k has N_k={k.shape[-2]} ({tuple(k.shape)}), "
                         f"v has {v.shape[-2]} ({tuple(v.shape)})")
    if _checks.boolean("causal", causal) and q.shape[-2] != k.shape[-2]:
        raise ValueError(f"causal=True needs as many queries as keys, got N_q={q.shape[-2]} (q {tuple(q.shape)}) "
                         f"and N_k={k.shape[-2]} (k {tuple(k.shape)}); cross-attention needs causal=False")
    if means.dim() == 3 and not q.dim() == k.dim() == v.dim():
        raise ValueError(f"with one mixture per head (means {tuple(means.shape)}) q, k and v must each be "
                         f"(..., H={means.shape[0]}, N, *) with the same number of dims, got q {tuple(q.shape)}, "
                         f"k {tuple(k.shape)} and v {tuple(v.shape)}; add the missing head dim (for one tensor "
                         "shared by the heads: t.unsqueeze(-3).expand(..., H, N, -1))")
    _checks.leading_shape(q=q, k=k, v=v)


def compute_dtype(*dtypes: torch.dtype) -> torch.dtype:
    """The dtype in which mixtures and GMA are computed: float64 if any of ``dtypes`` is float64, else float32
    (the GEMM-form logits cancel too much for half precision)."""
    return torch.float64 if torch.float64 in dtypes else torch.float32


def _head_axis(x: torch.Tensor, params: torch.Tensor) -> torch.Tensor:
    """Reshape per-head parameters ``(H, K, *)`` so they broadcast against ``x``'s ``(..., H, N, d)``."""
    return params.unsqueeze(-3) if params.dim() == 3 else params


def gemm_coefficients(means, variances, log_priors):
    r"""The coefficients of the GEMM form: ``log p(x, k) = [x*x, x] @ weight[k] + constant[k]``.

    With precisions :math:`P_k = 1/\sigma^2_k`, ``weight[k] = [-P_k / 2, mu_k P_k]`` and
    ``constant[k] = log pi_k - 1/2 sum_d (log(2 pi sigma^2_kd) + mu_kd^2 P_kd)`` (see the module docstring). The
    fused kernels (:mod:`gma_teach.kernels`) build their tables from this function.

    Args:
        means, variances: ``(K, d)`` or ``(H, K, d)``; log_priors: ``(K,)`` or ``(H, K)``. Not validated.

    Returns:
        ``(weight, constant)``: ``(..., K, 2d)`` and ``(..., K)`` in :func:`compute_dtype` of the inputs.
    """
    dtype = compute_dtype(means.dtype, variances.dtype, log_priors.dtype)
    means, variances, log_priors = means.to(dtype), variances.to(dtype), log_priors.to(dtype)
    precision = 1.0 / variances
    weight = torch.cat([-0.5 * precision, means * precision], dim=-1)
    constant = log_priors - 0.5 * (
        torch.log(variances).sum(-1) + (means * means * precision).sum(-1) + means.shape[-1] * _LOG_2PI
    )
    return weight, constant


def gemm_cancellation_bound(x, means, variances) -> float:
    r"""An upper bound on the float32 rounding error of the GEMM-form logits of ``x`` (absolute, in nats).

    The GEMM form adds :math:`-\tfrac12 x^2 P`, :math:`x \mu P` and :math:`-\tfrac12 \mu^2 P` (per dimension,
    :math:`P = 1/\sigma^2`), whose sum is much smaller than the terms when they cancel. Each rounding error is
    relative to the terms, so the error of a logit is at most a few float32 epsilons times
    :math:`\tfrac12 \sum_d P_{kd} (|x_d| + |\mu_{kd}|)^2`. Bounding ``|x_d|`` by its maximum ``A_d`` over the
    tokens (per head) gives the cheap bound returned here:

    .. math:: \varepsilon_{32} \max_k \tfrac12 \sum_d P_{kd} (A_d + |\mu_{kd}|)^2,

    one pass over ``x`` plus ``O(K d)``. :func:`gemm_logits` computes in float64 when it exceeds
    :data:`GEMM_LOGIT_TOLERANCE`. Ordinary routing vectors (``|x| <~ 5``, ``|mu| <~ 3``, unit variances,
    ``d = 16``) give about ``3e-5``; means near 1000 with unit variances, or variances of ``1e-6``, give ``> 0.1``.

    Args:
        x: ``(..., N, d)`` or ``(..., H, N, d)``; means, variances: ``(K, d)`` or ``(H, K, d)``.

    Returns:
        a Python float (0.0 for an empty ``x``).
    """
    if x.numel() == 0:
        return 0.0
    with torch.autocast(x.device.type, enabled=False):
        x = x.detach().float()
        if means.dim() == 3:  # (..., H, N, d) -> (H, d)
            largest = x.abs().transpose(-3, 0).reshape(x.shape[-3], -1, x.shape[-1]).amax(1)[:, None, :]
        else:
            largest = x.abs().reshape(-1, x.shape[-1]).amax(0)
        terms = (largest + means.detach().float().abs()) ** 2 / variances.detach().float()
        return torch.finfo(torch.float32).eps * 0.5 * terms.sum(-1).max().item()


def _gemm_logits(x, means, variances, log_priors, dtype):
    weight, constant = gemm_coefficients(means.to(dtype), variances.to(dtype), log_priors.to(dtype))
    x = x.to(dtype)
    return torch.cat([x * x, x], dim=-1) @ weight.transpose(-1, -2) + constant.unsqueeze(-2)


def gemm_logits(x, means, variances, log_priors):
    """``log p(x, k)`` in GEMM form, without validation: ``(..., [H,] N, K)`` in float32 or float64.

    Computed in :func:`compute_dtype` of all inputs with autocast off. In float32, when
    :func:`gemm_cancellation_bound` exceeds :data:`GEMM_LOGIT_TOLERANCE` the logits are computed in float64 and
    rounded to float32 (the guard is skipped while ``torch.compile`` traces).
    """
    dtype = compute_dtype(x.dtype, means.dtype, variances.dtype, log_priors.dtype)
    with torch.autocast(x.device.type, enabled=False):
        if (dtype == torch.float32 and not torch.compiler.is_compiling()
                and gemm_cancellation_bound(x, means, variances) > GEMM_LOGIT_TOLERANCE):
            return _gemm_logits(x, means, variances, log_priors, torch.float64).to(dtype)
        return _gemm_logits(x, means, variances, log_priors, dtype)


def log_joint(x, means, variances, log_priors):
    """``log p(x, c=k)`` for every token and component, ``(..., [H,] N, K)``, in GEMM form.

    Args:
        x: ``(..., N, d)``, or ``(..., H, N, d)`` with one mixture per head.
        means, variances: ``(K, d)`` or ``(H, K, d)``; variances > 0.
        log_priors: ``(K,)`` or ``(H, K)``, normalized (``logsumexp == 0``).
    """
    check_mixture(x, means, variances, log_priors)
    return gemm_logits(x, means, variances, log_priors)


def log_likelihood(x, means, variances, log_priors):
    """``log p(x) = logsumexp_k log p(x, k)`` per token: ``(..., [H,] N)``."""
    return torch.logsumexp(log_joint(x, means, variances, log_priors), dim=-1)


def log_responsibilities(x, means, variances, log_priors):
    """``log gamma_k(x) = log p(c=k | x)``: ``(..., [H,] N, K)`` (at least float32), computed in GEMM form.

    Shapes as in :func:`~gma_teach.gmm.log_joint`.
    """
    return torch.log_softmax(log_joint(x, means, variances, log_priors), dim=-1)


def responsibilities(x, means, variances, log_priors):
    """Posterior responsibilities ``gamma_k(x) = p(c=k | x)``: ``(..., [H,] N, K)``, rows sum to 1.

    Computed as one GEMM of ``[x*x, x]`` followed by a stable softmax, in at least float32 (float64 stays float64).

    Args:
        x: ``(..., N, d)``, or ``(..., H, N, d)`` when the mixture has one set of components per head.
        means, variances: ``(K, d)`` or ``(H, K, d)``; variances > 0.
        log_priors: ``(K,)`` or ``(H, K)``, normalized.
    """
    return torch.softmax(log_joint(x, means, variances, log_priors), dim=-1)


def direct_log_joint(x, means, variances, log_priors):
    """``log p(x, k)`` by broadcasting ``(x - mu)`` into ``(..., [H,] N, K, d)``: the slow, transparent spec."""
    check_mixture(x, means, variances, log_priors)
    dtype = compute_dtype(x.dtype, means.dtype, variances.dtype, log_priors.dtype)
    x, means, variances, log_priors = (t.to(dtype) for t in (x, means, variances, log_priors))
    diff = x.unsqueeze(-2) - _head_axis(x, means)
    variances = _head_axis(x, variances)
    per_dim = diff * diff / variances + torch.log(variances) + _LOG_2PI
    priors = log_priors.unsqueeze(-2) if log_priors.dim() == 2 else log_priors
    return priors - 0.5 * per_dim.sum(-1)


def responsibilities_direct(x, means, variances, log_priors):
    """The slow spec of :func:`responsibilities`: same shapes, memory ``O(N K d)`` instead of ``O(N K)``."""
    return torch.softmax(direct_log_joint(x, means, variances, log_priors), dim=-1)


def inverse_softplus(y: torch.Tensor) -> torch.Tensor:
    """The ``r`` with ``softplus(r) == y`` for ``y > 0`` (stable for large ``y``)."""
    return y + torch.log(-torch.expm1(-y))


class GaussianMixture(nn.Module):
    """A learnable diagonal Gaussian mixture with unconstrained parameters.

    * ``means``: ``(K, d)`` or ``(H, K, d)``, initialized from ``N(0, init_std^2)``;
    * ``variances = softplus(raw_variances) + min_variance`` (the floor keeps the responsibility map Lipschitz),
      initialized to ``init_variance + min_variance``;
    * ``log_priors = log_softmax(prior_logits)``, uniform at initialization.

    Args:
        n_components: K.
        dim: d, the routing dimension.
        n_heads: ``None`` for one mixture, else H independent mixtures (one per attention head).
        min_variance: the variance floor (> 0).
        init_std: standard deviation of the initial means (> 0).
        init_variance: the initial ``softplus(raw_variances)`` (> 0). With ``d`` routing dimensions the squared
            distance ``sum_d (x_d - mu_d)^2 / sigma^2`` grows like ``d / sigma^2``, so unit variances make
            logits of size ``~d`` and nearly one-hot responsibilities at initialization; ``init_variance = d``
            keeps them of order one.

    Calling the module (``mixture(x)``) returns :meth:`responsibilities`.
    """

    def __init__(self, n_components: int, dim: int, n_heads: int | None = None, min_variance: float = 1e-3,
                 init_std: float = 1.0, init_variance: float = 1.0):
        super().__init__()
        self.n_components = _checks.positive_int("n_components", n_components)
        self.dim = _checks.positive_int("dim", dim)
        self.n_heads = None if n_heads is None else _checks.positive_int("n_heads", n_heads)
        self.min_variance = _checks.positive_number("min_variance", min_variance)
        init_std = _checks.positive_number("init_std", init_std)
        init_variance = _checks.positive_number("init_variance", init_variance)
        shape = (self.n_components, self.dim) if n_heads is None else (self.n_heads, self.n_components, self.dim)
        self.means = nn.Parameter(torch.randn(shape) * init_std)
        self.raw_variances = nn.Parameter(inverse_softplus(torch.full(shape, init_variance)))
        self.prior_logits = nn.Parameter(torch.zeros(shape[:-1]))

    @property
    def variances(self) -> torch.Tensor:
        """``softplus(raw_variances) + min_variance``: ``(K, d)`` or ``(H, K, d)``."""
        return F.softplus(self.raw_variances) + self.min_variance

    @property
    def log_priors(self) -> torch.Tensor:
        """``log_softmax(prior_logits)``: ``(K,)`` or ``(H, K)``."""
        return torch.log_softmax(self.prior_logits, dim=-1)

    def log_responsibilities(self, x: torch.Tensor) -> torch.Tensor:
        """``log gamma``: x ``(..., N, d)`` (or ``(..., H, N, d)`` per head) -> ``(..., [H,] N, K)``."""
        check_mixture(x, self.means, self.raw_variances, self.prior_logits, check_values=False)
        return torch.log_softmax(gemm_logits(x, self.means, self.variances, self.log_priors), dim=-1)

    def responsibilities(self, x: torch.Tensor) -> torch.Tensor:
        """``gamma``: x ``(..., N, d)`` (or ``(..., H, N, d)`` per head) -> ``(..., [H,] N, K)``."""
        check_mixture(x, self.means, self.raw_variances, self.prior_logits, check_values=False)
        return torch.softmax(gemm_logits(x, self.means, self.variances, self.log_priors), dim=-1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.responsibilities(x)

    def extra_repr(self) -> str:
        # the sizes, then the floor on a line of its own: printed as a submodule ("(mixture): GaussianMixture(...")
        # one line would pass the page's width
        heads = "" if self.n_heads is None else f", n_heads={self.n_heads}"
        return f"n_components={self.n_components}, dim={self.dim}{heads},\nmin_variance={self.min_variance}"


@dataclass
class EMResult:
    """What :func:`fit_em` returns. Shapes: means/variances ``(K, d)``, log_priors ``(K,)``."""

    means: torch.Tensor
    variances: torch.Tensor
    log_priors: torch.Tensor
    log_likelihoods: list[float]  # mean log-likelihood per sample after each iteration
    n_iter: int
    converged: bool


def fit_em(x: torch.Tensor, n_components: int, *, n_iter: int = 100, tol: float = 1e-6,
           min_variance: float = 1e-6, seed: int = 0) -> EMResult:
    """Classic expectation-maximization for a diagonal GMM, the contrast to gradient learning in chapter 2.

    Initialization: means are ``K`` distinct data points drawn with ``seed``; variances are the data variance;
    priors are uniform. Each iteration computes responsibilities (E-step, GEMM form) and the closed-form
    weighted means, variances (floored at ``min_variance``) and priors (M-step). Stops when the mean
    log-likelihood improves by less than ``tol``.

    Args:
        x: ``(N, d)`` data, N >= n_components.
        n_components: K.
    """
    _checks.tensor("x", x, min_rank=2)
    if x.dim() != 2:
        raise ValueError(f"x must be (N, d), got shape {tuple(x.shape)}")
    n_components = _checks.positive_int("n_components", n_components)
    n_iter = _checks.positive_int("n_iter", n_iter)
    tol = _checks.positive_number("tol", tol)
    min_variance = _checks.positive_number("min_variance", min_variance)
    seed = _checks.integer("seed", seed, minimum=0)
    n_samples = x.shape[0]
    if n_samples < n_components:
        raise ValueError(f"x must have at least n_components={n_components} rows, got {n_samples}")
    data = x.detach().double()
    generator = torch.Generator().manual_seed(seed)
    means = data[torch.randperm(n_samples, generator=generator)[:n_components]].clone()
    variances = data.var(0, unbiased=False).clamp_min(min_variance).expand(n_components, -1).clone()
    log_priors = torch.full((n_components,), -math.log(n_components), dtype=torch.float64)
    history: list[float] = []
    converged = False
    for _ in range(n_iter):
        logits = gemm_logits(data, means, variances, log_priors)
        history.append(torch.logsumexp(logits, -1).mean().item())
        gamma = torch.softmax(logits, dim=-1)
        counts = gamma.sum(0).clamp_min(1e-12)
        means = gamma.T @ data / counts[:, None]
        variances = (gamma.T @ (data * data) / counts[:, None] - means * means).clamp_min(min_variance)
        log_priors = torch.log(counts / n_samples)
        if len(history) > 1 and history[-1] - history[-2] < tol:
            converged = True
            break
    return EMResult(means.to(x.dtype), variances.to(x.dtype), log_priors.to(x.dtype), history, len(history),
                    converged)


def kmeans(x: torch.Tensor, n_components: int, *, n_iter: int = 10, seed: int = 0) -> torch.Tensor:
    """k-means++ seeding followed by ``n_iter`` Lloyd iterations: the ``K`` cluster centres of ``x``.

    Used to place a mixture's means where the routing vectors are (:meth:`GaussianMixtureAttention.init_means_from
    <gma_teach.layer.GaussianMixtureAttention.init_means_from>`). Computed in float64; a cluster that loses all its
    points keeps its previous centre.

    Args:
        x: ``(n, d)`` points, or ``(H, n, d)`` for ``H`` independent problems (one per head); ``n >= n_components``.
        n_components: K.
        n_iter: Lloyd iterations after seeding (>= 1).
        seed: seed of the k-means++ draws.

    Returns:
        ``(K, d)`` or ``(H, K, d)`` centres in ``x``'s dtype.
    """
    _checks.tensor("x", x, min_rank=2)
    if x.dim() not in (2, 3):
        raise ValueError(f"x must be (n, d) or (H, n, d), got shape {tuple(x.shape)}")
    n_components = _checks.positive_int("n_components", n_components)
    n_iter = _checks.positive_int("n_iter", n_iter)
    seed = _checks.integer("seed", seed, minimum=0)
    if x.shape[-2] < n_components:
        raise ValueError(f"x must hold at least n_components={n_components} points, got {x.shape[-2]} "
                         f"(shape {tuple(x.shape)})")
    points = x.detach().double()
    points = points.unsqueeze(0) if points.dim() == 2 else points  # (H, n, d)
    if not bool(torch.isfinite(points).all()):
        raise ValueError("x must be finite, got NaN or infinite values")
    generator = torch.Generator().manual_seed(seed)
    n_problems, n_points, _ = points.shape
    rows = torch.arange(n_problems)
    first = torch.randint(n_points, (n_problems,), generator=generator)
    centres = [points[rows, first]]
    closest = ((points - centres[0][:, None]) ** 2).sum(-1)  # (H, n) squared distance to the nearest centre
    for _ in range(1, n_components):  # k-means++: draw the next centre with probability ~ squared distance
        weights = closest.clamp_min(0).cpu()
        weights[weights.sum(-1) == 0] = 1.0  # all points already covered: draw uniformly
        chosen = torch.multinomial(weights, 1, generator=generator)[:, 0].to(points.device)
        centres.append(points[rows, chosen])
        closest = torch.minimum(closest, ((points - centres[-1][:, None]) ** 2).sum(-1))
    centres = torch.stack(centres, dim=1)  # (H, K, d)
    for _ in range(n_iter):
        distances = (points * points).sum(-1, keepdim=True) - 2 * points @ centres.transpose(-1, -2) \
            + (centres * centres).sum(-1).unsqueeze(-2)
        assignment = F.one_hot(distances.argmin(-1), n_components).double()  # (H, n, K)
        counts = assignment.sum(-2)  # (H, K)
        sums = assignment.transpose(-1, -2) @ points  # (H, K, d)
        centres = torch.where(counts[..., None] > 0, sums / counts.clamp_min(1)[..., None], centres)
    centres = centres.to(x.dtype)
    return centres[0] if x.dim() == 2 else centres


# ------------------------------------------------------------------------------------------------ random inputs
def random_mixture(n_components: int, dim: int, n_heads: int | None = None, *, dtype=torch.float64, spread=1.0,
                   generator: torch.Generator | None = None, device=None):
    """A random valid mixture for tests, benchmarks and checkers: means ``N(0, spread^2)``, variances uniform in
    ``[0.3, 1.8]`` and normalized log priors, each ``(K, d)`` / ``(K,)``, or ``(H, K, d)`` / ``(H, K)`` with
    ``n_heads``. Drawn on the CPU from ``generator`` (default: torch's global one), then moved to ``device``."""
    shape = (n_components, dim) if n_heads is None else (n_heads, n_components, dim)
    means = torch.randn(shape, generator=generator, dtype=dtype) * spread
    variances = 0.3 + 1.5 * torch.rand(shape, generator=generator, dtype=dtype)
    log_priors = torch.log_softmax(torch.randn(shape[:-1], generator=generator, dtype=dtype), dim=-1)
    return means.to(device), variances.to(device), log_priors.to(device)


def random_gma_inputs(batch: int, heads: int, n_q: int, n_k: int, d: int, d_v: int, n_components: int, *,
                      dtype=torch.float32, spread=1.0, generator: torch.Generator | None = None, device=None):
    """Random inputs of :func:`gma_teach.gma` with a per-head mixture: ``q (B, H, N_q, d)``, ``k (B, H, N_k, d)``,
    ``v (B, H, N_k, d_v)`` in ``dtype`` and a float32 :func:`random_mixture` ``(H, K, d)``, as a list of six
    tensors (``[t.requires_grad_() for t in ...]`` for gradients)."""
    q = torch.randn(batch, heads, n_q, d, generator=generator)
    k = torch.randn(batch, heads, n_k, d, generator=generator)
    v = torch.randn(batch, heads, n_k, d_v, generator=generator)
    mixture = random_mixture(n_components, d, heads, dtype=torch.float32, spread=spread, generator=generator,
                             device=device)
    return [t.to(device=device, dtype=dtype) for t in (q, k, v)] + list(mixture)
