"""The Triton kernels of Gaussian Mixture Attention (imported only when Triton is installed).

Notation for one (batch, head) pair, with routing vectors ``x`` of size ``d``, ``K`` mixture components and values
of size ``dv``. The mixture enters every kernel through three small fp32 tensors prepared by torch:

* ``w_sq``  ``(H, K, d)`` = ``-0.5 / variances``
* ``w_lin`` ``(H, K, d)`` = ``means / variances``
* ``bias``  ``(H, K)``    = ``log_priors - 0.5 * sum_d log variances - 0.5 * sum_d means**2 / variances``

so that ``logits = (x * x) @ w_sq^T + x @ w_lin^T + bias`` (two GEMMs with fp32 accumulation) and
``gamma = softmax_K(logits)``. Kernels that loop over blocks reload these tables (and other loop-invariant
K-sized tiles) in every iteration from the L2 cache: kept live across the loop, their tensor-core copies in
shared memory add up beyond what a GPU has (measured by compiling ahead of time for sm_90). Gamma is
recomputed wherever it is needed and never written to global memory (except by :func:`responsibility_kernel`,
whose job is to return it).

Every tensor is contiguous in the layout ``(B, H, N, feature)``; program axis 0 runs over ``B * H``. All
arithmetic is fp32: inputs are cast right after ``tl.load``. ``LOGIT_PRECISION`` is the ``input_precision`` of
the logits GEMMs: ``"ieee"`` or ``"tf32x3"``, never one-pass ``"tf32"`` (the logits cancel: chapter 7).
``PRECISION`` is that of every other ``tl.dot`` (values, states, gradients), which do not cancel: one-pass
``"tf32"`` is used there for half-precision inputs, whose results are rounded to 8 or 11 bits anyway.
"""
import triton
import triton.language as tl


# ----------------------------------------------------------------------------------------------------------------
# Building blocks (inlined into the kernels below)
# ----------------------------------------------------------------------------------------------------------------
@triton.jit
def _load_mixture(w_sq_ptr, w_lin_ptr, bias_ptr, head, K, D, BLOCK_K: tl.constexpr, BLOCK_D: tl.constexpr):
    """The head's ``w_sq``, ``w_lin`` as (BLOCK_K, BLOCK_D) tiles (zero padded) and ``bias`` (BLOCK_K,), whose
    padded components get ``-inf`` so that their responsibility is exactly 0."""
    offs_k = tl.arange(0, BLOCK_K)
    offs_d = tl.arange(0, BLOCK_D)
    mask = (offs_k[:, None] < K) & (offs_d[None, :] < D)
    where = head * K * D + offs_k[:, None] * D + offs_d[None, :]
    w_sq = tl.load(w_sq_ptr + where, mask=mask, other=0.0)
    w_lin = tl.load(w_lin_ptr + where, mask=mask, other=0.0)
    bias = tl.load(bias_ptr + head * K + offs_k, mask=offs_k < K, other=float("-inf"))
    return w_sq, w_lin, bias


@triton.jit
def _load_rows(ptr, bh, rows, N, F, BLOCK_F: tl.constexpr):
    """Rows ``rows`` (a vector of positions) of the (N, F) matrix of program ``bh``, as fp32, zero outside."""
    offs_f = tl.arange(0, BLOCK_F)
    mask = (rows[:, None] < N) & (offs_f[None, :] < F)
    return tl.load(ptr + bh * N * F + rows[:, None] * F + offs_f[None, :], mask=mask, other=0.0).to(tl.float32)


@triton.jit
def _store_rows(ptr, value, bh, rows, N, F, BLOCK_F: tl.constexpr):
    offs_f = tl.arange(0, BLOCK_F)
    mask = (rows[:, None] < N) & (offs_f[None, :] < F)
    tl.store(ptr + bh * N * F + rows[:, None] * F + offs_f[None, :], value.to(ptr.dtype.element_ty), mask=mask)


@triton.jit
def _responsibilities(x, rows, N, w_sq, w_lin, bias, LOGIT_PRECISION: tl.constexpr):
    """gamma (BLOCK_N, BLOCK_K) of the routing vectors ``x`` (BLOCK_N, BLOCK_D): the logits GEMM on [x*x, x]
    with fp32 accumulation, then a stable softmax over K. Rows at or beyond N are set to 0."""
    logits = tl.dot(x * x, tl.trans(w_sq), input_precision=LOGIT_PRECISION)
    logits += tl.dot(x, tl.trans(w_lin), input_precision=LOGIT_PRECISION)
    logits += bias[None, :]
    shifted = logits - tl.max(logits, axis=1)[:, None]
    p = tl.exp(shifted)
    gamma = p / tl.sum(p, axis=1)[:, None]
    return tl.where(rows[:, None] < N, gamma, 0.0)


@triton.jit
def _logits_backward(x, gamma, d_gamma, w_sq, w_lin, PRECISION: tl.constexpr):
    """From d loss / d gamma to d loss / d logits (softmax backward) and d loss / d x (the logits GEMM backward)."""
    d_logits = gamma * (d_gamma - tl.sum(gamma * d_gamma, axis=1)[:, None])
    d_x = 2.0 * x * tl.dot(d_logits, w_sq, input_precision=PRECISION)
    d_x += tl.dot(d_logits, w_lin, input_precision=PRECISION)
    return d_logits, d_x


@triton.jit
def _store_mixture_grads(d_w_sq_ptr, d_w_lin_ptr, d_bias_ptr, slot, d_w_sq, d_w_lin, d_bias, K, D,
                         BLOCK_K: tl.constexpr, BLOCK_D: tl.constexpr):
    """Store one program's partial gradients of w_sq, w_lin (K, D) and bias (K,) into slot ``slot``."""
    offs_k = tl.arange(0, BLOCK_K)
    offs_d = tl.arange(0, BLOCK_D)
    mask = (offs_k[:, None] < K) & (offs_d[None, :] < D)
    where = slot * K * D + offs_k[:, None] * D + offs_d[None, :]
    tl.store(d_w_sq_ptr + where, d_w_sq, mask=mask)
    tl.store(d_w_lin_ptr + where, d_w_lin, mask=mask)
    tl.store(d_bias_ptr + slot * K + offs_k, d_bias, mask=offs_k < K)


# ----------------------------------------------------------------------------------------------------------------
# 1. The fused responsibility kernel
# ----------------------------------------------------------------------------------------------------------------
@triton.jit
def responsibility_kernel(x_ptr, w_sq_ptr, w_lin_ptr, bias_ptr, gamma_ptr, H, N, K, D,
                          BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_D: tl.constexpr,
                          LOGIT_PRECISION: tl.constexpr):
    """gamma (B, H, N, K) fp32 from x (B, H, N, D). Grid: (B * H, cdiv(N, BLOCK_N))."""
    bh = tl.program_id(0)
    rows = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    w_sq, w_lin, bias = _load_mixture(w_sq_ptr, w_lin_ptr, bias_ptr, bh % H, K, D, BLOCK_K, BLOCK_D)
    x = _load_rows(x_ptr, bh, rows, N, D, BLOCK_D)
    gamma = _responsibilities(x, rows, N, w_sq, w_lin, bias, LOGIT_PRECISION)
    _store_rows(gamma_ptr, gamma, bh, rows, N, K, BLOCK_K)


# ----------------------------------------------------------------------------------------------------------------
# 2. Bidirectional GMA: write pass (memory S = Gamma_K^T V and normalizer z = Gamma_K^T 1), read pass
# ----------------------------------------------------------------------------------------------------------------
@triton.jit
def write_kernel(k_ptr, v_ptr, w_sq_ptr, w_lin_ptr, bias_ptr, memory_part_ptr, normalizer_part_ptr,
                 H, N, K, D, DV, BLOCKS_PER_SPLIT, N_SPLITS,
                 BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr,
                 PRECISION: tl.constexpr, LOGIT_PRECISION: tl.constexpr):
    """Partial memories (B*H, N_SPLITS, K, DV) and normalizers (B*H, N_SPLITS, K), fp32: program (bh, split)
    sums the blocks [split * BLOCKS_PER_SPLIT, (split + 1) * BLOCKS_PER_SPLIT) of keys. The caller adds the
    splits in a fixed order (deterministic, no atomics). Grid: (B * H, N_SPLITS)."""
    bh = tl.program_id(0)
    split = tl.program_id(1)
    memory = tl.zeros((BLOCK_K, BLOCK_DV), dtype=tl.float32)
    normalizer = tl.zeros((BLOCK_K,), dtype=tl.float32)
    for i in range(0, BLOCKS_PER_SPLIT):
        w_sq, w_lin, bias = _load_mixture(w_sq_ptr, w_lin_ptr, bias_ptr, bh % H, K, D, BLOCK_K, BLOCK_D)
        rows = (split * BLOCKS_PER_SPLIT + i) * BLOCK_N + tl.arange(0, BLOCK_N)
        x = _load_rows(k_ptr, bh, rows, N, D, BLOCK_D)
        gamma = _responsibilities(x, rows, N, w_sq, w_lin, bias, LOGIT_PRECISION)
        values = _load_rows(v_ptr, bh, rows, N, DV, BLOCK_DV)
        memory += tl.dot(tl.trans(gamma), values, input_precision=PRECISION)
        normalizer += tl.sum(gamma, axis=0)
    slot = bh * N_SPLITS + split
    _store_rows(memory_part_ptr, memory, slot, tl.arange(0, BLOCK_K), K, DV, BLOCK_DV)
    offs_k = tl.arange(0, BLOCK_K)
    tl.store(normalizer_part_ptr + slot * K + offs_k, normalizer, mask=offs_k < K)


@triton.jit
def read_kernel(q_ptr, memory_ptr, normalizer_ptr, w_sq_ptr, w_lin_ptr, bias_ptr, out_ptr,
                H, N, K, D, DV, eps,
                BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr,
                PRECISION: tl.constexpr, LOGIT_PRECISION: tl.constexpr):
    """out = (Gamma_Q S) / (Gamma_Q z + eps) for one block of queries. Grid: (B * H, cdiv(N, BLOCK_N))."""
    bh = tl.program_id(0)
    rows = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    w_sq, w_lin, bias = _load_mixture(w_sq_ptr, w_lin_ptr, bias_ptr, bh % H, K, D, BLOCK_K, BLOCK_D)
    gamma = _responsibilities(_load_rows(q_ptr, bh, rows, N, D, BLOCK_D), rows, N, w_sq, w_lin, bias, LOGIT_PRECISION)
    offs_k = tl.arange(0, BLOCK_K)
    memory = _load_rows(memory_ptr, bh, offs_k, K, DV, BLOCK_DV)
    normalizer = tl.load(normalizer_ptr + bh * K + offs_k, mask=offs_k < K, other=0.0)
    numerator = tl.dot(gamma, memory, input_precision=PRECISION)
    denominator = tl.sum(gamma * normalizer[None, :], axis=1) + eps
    _store_rows(out_ptr, numerator / denominator[:, None], bh, rows, N, DV, BLOCK_DV)


# ----------------------------------------------------------------------------------------------------------------
# 3. Causal GMA: chunked forward with an fp32 state carried from chunk to chunk
# ----------------------------------------------------------------------------------------------------------------
@triton.jit
def causal_forward_kernel(q_ptr, k_ptr, v_ptr, w_sq_ptr, w_lin_ptr, bias_ptr, out_ptr, H, N, K, D, DV, eps,
                          CHUNK: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_D: tl.constexpr,
                          BLOCK_DV: tl.constexpr, PRECISION: tl.constexpr, LOGIT_PRECISION: tl.constexpr):
    """One program per (batch, head) walks the chunks in order. Within a chunk the masked affinity
    A = tril(Gamma_Q Gamma_K^T) (CHUNK x CHUNK) handles j <= i; the state (S, z) holds every earlier chunk.
    Grid: (B * H,)."""
    bh = tl.program_id(0)
    memory = tl.zeros((BLOCK_K, BLOCK_DV), dtype=tl.float32)
    normalizer = tl.zeros((BLOCK_K,), dtype=tl.float32)
    offs = tl.arange(0, CHUNK)
    causal = offs[:, None] >= offs[None, :]
    for start in range(0, N, CHUNK):
        w_sq, w_lin, bias = _load_mixture(w_sq_ptr, w_lin_ptr, bias_ptr, bh % H, K, D, BLOCK_K, BLOCK_D)
        rows = start + offs
        x_q, x_k = _load_rows(q_ptr, bh, rows, N, D, BLOCK_D), _load_rows(k_ptr, bh, rows, N, D, BLOCK_D)
        gamma_q = _responsibilities(x_q, rows, N, w_sq, w_lin, bias, LOGIT_PRECISION)
        gamma_k = _responsibilities(x_k, rows, N, w_sq, w_lin, bias, LOGIT_PRECISION)
        values = _load_rows(v_ptr, bh, rows, N, DV, BLOCK_DV)
        affinity = tl.where(causal, tl.dot(gamma_q, tl.trans(gamma_k), input_precision=PRECISION), 0.0)
        numerator = tl.dot(affinity, values, input_precision=PRECISION)
        numerator += tl.dot(gamma_q, memory, input_precision=PRECISION)
        denominator = tl.sum(affinity, axis=1) + tl.sum(gamma_q * normalizer[None, :], axis=1) + eps
        _store_rows(out_ptr, numerator / denominator[:, None], bh, rows, N, DV, BLOCK_DV)
        memory += tl.dot(tl.trans(gamma_k), values, input_precision=PRECISION)
        normalizer += tl.sum(gamma_k, axis=0)


# ----------------------------------------------------------------------------------------------------------------
# 4a. Bidirectional backward. With num = Gamma_Q S and den = Gamma_Q z + eps, out = num / den:
#     d_num = d_out / den,  d_den = -(d_out . num) / den^2,
#     d_Gamma_Q = d_num S^T + d_den z^T,   d_S = Gamma_Q^T d_num,   d_z = Gamma_Q^T d_den,
#     d_Gamma_K = V d_S^T + 1 d_z^T,       d_V = Gamma_K d_S.
# ----------------------------------------------------------------------------------------------------------------
@triton.jit
def query_backward_kernel(q_ptr, d_out_ptr, memory_ptr, normalizer_ptr, w_sq_ptr, w_lin_ptr, bias_ptr, d_q_ptr,
                          d_memory_part_ptr, d_normalizer_part_ptr, d_w_sq_part_ptr, d_w_lin_part_ptr,
                          d_bias_part_ptr, H, N, K, D, DV, eps, BLOCKS_PER_SPLIT, N_SPLITS,
                          BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_D: tl.constexpr,
                          BLOCK_DV: tl.constexpr, PRECISION: tl.constexpr, LOGIT_PRECISION: tl.constexpr):
    """d_q, plus per-program partials of d_S, d_z and of the mixture gradients (query side).
    Grid: (B * H, N_SPLITS)."""
    bh = tl.program_id(0)
    split = tl.program_id(1)
    offs_k = tl.arange(0, BLOCK_K)
    d_memory = tl.zeros((BLOCK_K, BLOCK_DV), dtype=tl.float32)
    d_normalizer = tl.zeros((BLOCK_K,), dtype=tl.float32)
    d_w_sq = tl.zeros((BLOCK_K, BLOCK_D), dtype=tl.float32)
    d_w_lin = tl.zeros((BLOCK_K, BLOCK_D), dtype=tl.float32)
    d_bias = tl.zeros((BLOCK_K,), dtype=tl.float32)
    for i in range(0, BLOCKS_PER_SPLIT):
        w_sq, w_lin, bias = _load_mixture(w_sq_ptr, w_lin_ptr, bias_ptr, bh % H, K, D, BLOCK_K, BLOCK_D)
        memory = _load_rows(memory_ptr, bh, offs_k, K, DV, BLOCK_DV)
        normalizer = tl.load(normalizer_ptr + bh * K + offs_k, mask=offs_k < K, other=0.0)
        rows = (split * BLOCKS_PER_SPLIT + i) * BLOCK_N + tl.arange(0, BLOCK_N)
        x = _load_rows(q_ptr, bh, rows, N, D, BLOCK_D)
        gamma = _responsibilities(x, rows, N, w_sq, w_lin, bias, LOGIT_PRECISION)
        d_out = _load_rows(d_out_ptr, bh, rows, N, DV, BLOCK_DV)
        numerator = tl.dot(gamma, memory, input_precision=PRECISION)
        denominator = tl.sum(gamma * normalizer[None, :], axis=1) + eps
        d_num = d_out / denominator[:, None]
        d_den = -tl.sum(d_out * numerator, axis=1) / (denominator * denominator)
        d_gamma = tl.dot(d_num, tl.trans(memory), input_precision=PRECISION) + d_den[:, None] * normalizer[None, :]
        d_memory += tl.dot(tl.trans(gamma), d_num, input_precision=PRECISION)
        d_normalizer += tl.sum(gamma * d_den[:, None], axis=0)
        d_logits, d_x = _logits_backward(x, gamma, d_gamma, w_sq, w_lin, PRECISION)
        _store_rows(d_q_ptr, d_x, bh, rows, N, D, BLOCK_D)
        d_w_sq += tl.dot(tl.trans(d_logits), x * x, input_precision=PRECISION)
        d_w_lin += tl.dot(tl.trans(d_logits), x, input_precision=PRECISION)
        d_bias += tl.sum(d_logits, axis=0)
    slot = bh * N_SPLITS + split
    _store_rows(d_memory_part_ptr, d_memory, slot, offs_k, K, DV, BLOCK_DV)
    tl.store(d_normalizer_part_ptr + slot * K + offs_k, d_normalizer, mask=offs_k < K)
    _store_mixture_grads(d_w_sq_part_ptr, d_w_lin_part_ptr, d_bias_part_ptr, slot, d_w_sq, d_w_lin, d_bias, K, D,
                         BLOCK_K, BLOCK_D)


@triton.jit
def key_backward_kernel(k_ptr, v_ptr, d_memory_ptr, d_normalizer_ptr, w_sq_ptr, w_lin_ptr, bias_ptr, d_k_ptr, d_v_ptr,
                        d_w_sq_part_ptr, d_w_lin_part_ptr, d_bias_part_ptr, H, N, K, D, DV, BLOCKS_PER_SPLIT,
                        N_SPLITS, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_D: tl.constexpr,
                        BLOCK_DV: tl.constexpr, PRECISION: tl.constexpr, LOGIT_PRECISION: tl.constexpr):
    """d_k, d_v, plus per-program partials of the mixture gradients (key side). Grid: (B * H, N_SPLITS)."""
    bh = tl.program_id(0)
    split = tl.program_id(1)
    offs_k = tl.arange(0, BLOCK_K)
    d_w_sq = tl.zeros((BLOCK_K, BLOCK_D), dtype=tl.float32)
    d_w_lin = tl.zeros((BLOCK_K, BLOCK_D), dtype=tl.float32)
    d_bias = tl.zeros((BLOCK_K,), dtype=tl.float32)
    for i in range(0, BLOCKS_PER_SPLIT):
        w_sq, w_lin, bias = _load_mixture(w_sq_ptr, w_lin_ptr, bias_ptr, bh % H, K, D, BLOCK_K, BLOCK_D)
        d_memory = _load_rows(d_memory_ptr, bh, offs_k, K, DV, BLOCK_DV)
        d_normalizer = tl.load(d_normalizer_ptr + bh * K + offs_k, mask=offs_k < K, other=0.0)
        rows = (split * BLOCKS_PER_SPLIT + i) * BLOCK_N + tl.arange(0, BLOCK_N)
        x = _load_rows(k_ptr, bh, rows, N, D, BLOCK_D)
        gamma = _responsibilities(x, rows, N, w_sq, w_lin, bias, LOGIT_PRECISION)
        values = _load_rows(v_ptr, bh, rows, N, DV, BLOCK_DV)
        d_gamma = tl.dot(values, tl.trans(d_memory), input_precision=PRECISION) + d_normalizer[None, :]
        _store_rows(d_v_ptr, tl.dot(gamma, d_memory, input_precision=PRECISION), bh, rows, N, DV, BLOCK_DV)
        d_logits, d_x = _logits_backward(x, gamma, d_gamma, w_sq, w_lin, PRECISION)
        _store_rows(d_k_ptr, d_x, bh, rows, N, D, BLOCK_D)
        d_w_sq += tl.dot(tl.trans(d_logits), x * x, input_precision=PRECISION)
        d_w_lin += tl.dot(tl.trans(d_logits), x, input_precision=PRECISION)
        d_bias += tl.sum(d_logits, axis=0)
    _store_mixture_grads(d_w_sq_part_ptr, d_w_lin_part_ptr, d_bias_part_ptr, bh * N_SPLITS + split, d_w_sq, d_w_lin,
                         d_bias, K, D, BLOCK_K, BLOCK_D)


# ----------------------------------------------------------------------------------------------------------------
# 4b. Causal backward: the same formulas with prefix sums. Query side is a forward scan over chunks (state S, z
#     as in the forward); key/value side is a reverse scan with state R = sum_{i later} Gamma_Q,i^T d_num_i and
#     r = sum_{i later} Gamma_Q,i d_den_i.
# ----------------------------------------------------------------------------------------------------------------
@triton.jit
def causal_query_backward_kernel(q_ptr, k_ptr, v_ptr, d_out_ptr, w_sq_ptr, w_lin_ptr, bias_ptr, d_q_ptr, d_num_ptr,
                                 d_den_ptr, d_w_sq_part_ptr, d_w_lin_part_ptr, d_bias_part_ptr, H, N, K, D, DV, eps,
                                 CHUNK: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_D: tl.constexpr,
                                 BLOCK_DV: tl.constexpr, PRECISION: tl.constexpr, LOGIT_PRECISION: tl.constexpr):
    """d_q, d_num (B*H, N, DV) and d_den (B*H, N) for the reverse scan, mixture-gradient partials (query side).
    d_Gamma_Q,i = sum_{j <= i} Gamma_K,j (V_j . d_num_i + d_den_i). Grid: (B * H,)."""
    bh = tl.program_id(0)
    memory = tl.zeros((BLOCK_K, BLOCK_DV), dtype=tl.float32)
    normalizer = tl.zeros((BLOCK_K,), dtype=tl.float32)
    d_w_sq = tl.zeros((BLOCK_K, BLOCK_D), dtype=tl.float32)
    d_w_lin = tl.zeros((BLOCK_K, BLOCK_D), dtype=tl.float32)
    d_bias = tl.zeros((BLOCK_K,), dtype=tl.float32)
    offs = tl.arange(0, CHUNK)
    causal = offs[:, None] >= offs[None, :]
    for start in range(0, N, CHUNK):
        w_sq, w_lin, bias = _load_mixture(w_sq_ptr, w_lin_ptr, bias_ptr, bh % H, K, D, BLOCK_K, BLOCK_D)
        rows = start + offs
        x = _load_rows(q_ptr, bh, rows, N, D, BLOCK_D)
        gamma_q = _responsibilities(x, rows, N, w_sq, w_lin, bias, LOGIT_PRECISION)
        x_k = _load_rows(k_ptr, bh, rows, N, D, BLOCK_D)
        gamma_k = _responsibilities(x_k, rows, N, w_sq, w_lin, bias, LOGIT_PRECISION)
        values = _load_rows(v_ptr, bh, rows, N, DV, BLOCK_DV)
        d_out = _load_rows(d_out_ptr, bh, rows, N, DV, BLOCK_DV)
        affinity = tl.where(causal, tl.dot(gamma_q, tl.trans(gamma_k), input_precision=PRECISION), 0.0)
        numerator = tl.dot(affinity, values, input_precision=PRECISION)
        numerator += tl.dot(gamma_q, memory, input_precision=PRECISION)
        denominator = tl.sum(affinity, axis=1) + tl.sum(gamma_q * normalizer[None, :], axis=1) + eps
        d_num = d_out / denominator[:, None]
        d_den = -tl.sum(d_out * numerator, axis=1) / (denominator * denominator)
        _store_rows(d_num_ptr, d_num, bh, rows, N, DV, BLOCK_DV)
        tl.store(d_den_ptr + bh * N + rows, d_den, mask=rows < N)
        weights = tl.dot(d_num, tl.trans(values), input_precision=PRECISION) + d_den[:, None]
        weights = tl.where(causal, weights, 0.0)
        d_gamma = tl.dot(weights, gamma_k, input_precision=PRECISION)
        d_gamma += tl.dot(d_num, tl.trans(memory), input_precision=PRECISION) + d_den[:, None] * normalizer[None, :]
        d_logits, d_x = _logits_backward(x, gamma_q, d_gamma, w_sq, w_lin, PRECISION)
        _store_rows(d_q_ptr, d_x, bh, rows, N, D, BLOCK_D)
        d_w_sq += tl.dot(tl.trans(d_logits), x * x, input_precision=PRECISION)
        d_w_lin += tl.dot(tl.trans(d_logits), x, input_precision=PRECISION)
        d_bias += tl.sum(d_logits, axis=0)
        memory += tl.dot(tl.trans(gamma_k), values, input_precision=PRECISION)
        normalizer += tl.sum(gamma_k, axis=0)
    _store_mixture_grads(d_w_sq_part_ptr, d_w_lin_part_ptr, d_bias_part_ptr, bh, d_w_sq, d_w_lin, d_bias, K, D,
                         BLOCK_K, BLOCK_D)


@triton.jit
def causal_key_backward_kernel(q_ptr, k_ptr, v_ptr, d_num_ptr, d_den_ptr, w_sq_ptr, w_lin_ptr, bias_ptr, d_k_ptr,
                               d_v_ptr, d_w_sq_part_ptr, d_w_lin_part_ptr, d_bias_part_ptr, H, N, K, D, DV,
                               CHUNK: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_D: tl.constexpr,
                               BLOCK_DV: tl.constexpr, PRECISION: tl.constexpr, LOGIT_PRECISION: tl.constexpr):
    """d_k, d_v and mixture-gradient partials (key side), walking the chunks from last to first.
    d_Gamma_K,j = sum_{i >= j} Gamma_Q,i (V_j . d_num_i + d_den_i);  d_V_j = sum_{i >= j} (Gamma_Q,i . Gamma_K,j)
    d_num_i. Grid: (B * H,)."""
    bh = tl.program_id(0)
    reverse_memory = tl.zeros((BLOCK_K, BLOCK_DV), dtype=tl.float32)
    reverse_normalizer = tl.zeros((BLOCK_K,), dtype=tl.float32)
    d_w_sq = tl.zeros((BLOCK_K, BLOCK_D), dtype=tl.float32)
    d_w_lin = tl.zeros((BLOCK_K, BLOCK_D), dtype=tl.float32)
    d_bias = tl.zeros((BLOCK_K,), dtype=tl.float32)
    offs = tl.arange(0, CHUNK)
    causal = offs[:, None] >= offs[None, :]  # [i, j]: query i sees key j
    n_chunks = tl.cdiv(N, CHUNK)
    for step in range(0, n_chunks):
        w_sq, w_lin, bias = _load_mixture(w_sq_ptr, w_lin_ptr, bias_ptr, bh % H, K, D, BLOCK_K, BLOCK_D)
        rows = (n_chunks - 1 - step) * CHUNK + offs
        x = _load_rows(k_ptr, bh, rows, N, D, BLOCK_D)
        gamma_k = _responsibilities(x, rows, N, w_sq, w_lin, bias, LOGIT_PRECISION)
        x_q = _load_rows(q_ptr, bh, rows, N, D, BLOCK_D)
        gamma_q = _responsibilities(x_q, rows, N, w_sq, w_lin, bias, LOGIT_PRECISION)
        values = _load_rows(v_ptr, bh, rows, N, DV, BLOCK_DV)
        d_num = _load_rows(d_num_ptr, bh, rows, N, DV, BLOCK_DV)
        d_den = tl.load(d_den_ptr + bh * N + rows, mask=rows < N, other=0.0)
        affinity = tl.where(causal, tl.dot(gamma_q, tl.trans(gamma_k), input_precision=PRECISION), 0.0)
        weights = tl.dot(d_num, tl.trans(values), input_precision=PRECISION) + d_den[:, None]
        weights = tl.where(causal, weights, 0.0)
        d_gamma = tl.dot(tl.trans(weights), gamma_q, input_precision=PRECISION)
        d_gamma += tl.dot(values, tl.trans(reverse_memory), input_precision=PRECISION) + reverse_normalizer[None, :]
        d_values = tl.dot(tl.trans(affinity), d_num, input_precision=PRECISION)
        d_values += tl.dot(gamma_k, reverse_memory, input_precision=PRECISION)
        _store_rows(d_v_ptr, d_values, bh, rows, N, DV, BLOCK_DV)
        d_logits, d_x = _logits_backward(x, gamma_k, d_gamma, w_sq, w_lin, PRECISION)
        _store_rows(d_k_ptr, d_x, bh, rows, N, D, BLOCK_D)
        d_w_sq += tl.dot(tl.trans(d_logits), x * x, input_precision=PRECISION)
        d_w_lin += tl.dot(tl.trans(d_logits), x, input_precision=PRECISION)
        d_bias += tl.sum(d_logits, axis=0)
        reverse_memory += tl.dot(tl.trans(gamma_q), d_num, input_precision=PRECISION)
        reverse_normalizer += tl.sum(gamma_q * d_den[:, None], axis=0)
    _store_mixture_grads(d_w_sq_part_ptr, d_w_lin_part_ptr, d_bias_part_ptr, bh, d_w_sq, d_w_lin, d_bias, K, D,
                         BLOCK_K, BLOCK_D)
