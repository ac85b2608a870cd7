"""The Triton kernels of Gaussian Mixture Attention (imported only when Triton is installed).

Notation for one (batch, head) pair, with routing vectors ``x`` of size ``d``, ``K`` mixture components and values
of size ``dv``. The mixture enters every kernel through three small fp32 tables that torch derives from
:func:`gma_teach.gmm.gemm_coefficients`:

* ``w_sq``  ``(H, K, d)`` = ``-0.5 / variances``
* ``w_lin`` ``(H, K, d)`` = ``means / variances``
* ``bias``  ``(H, K)``    = the per-component constant of the GEMM form

so that ``logits = (x * x) @ w_sq^T + x @ w_lin^T + bias`` (two GEMMs with fp32 accumulation).

**K is tiled.** No kernel holds all K components at once: each walks the components in tiles of ``BLOCK_KT``
(16 to 64), so that its tiles fit the shared memory of a small GPU (64 KiB on sm_75) for every supported size
(K <= 512, d, dv <= 128). The softmax over K needs every tile, so a first kernel stores each token's log-normalizer
``lse = logsumexp_k logits`` (one fp32 per token, like FlashAttention's); every other kernel then gets a tile of
responsibilities in one pass, ``gamma = exp(logits - lse)``.

**The passes.** Forward, for keys ``K_X`` and values ``V``, queries ``Q_X``:

1. :func:`log_normalizer_kernel` -- ``lse`` of the queries and of the keys;
2. :func:`state_kernel` -- every part's (chunk's) contribution ``[(Γ^K)^T V, (Γ^K)^T 1]`` to the memory;
3. :func:`carry_kernel` -- the exclusive prefix over parts, in a fixed order (causal), and their total;
4. :func:`output_kernel` -- ``O = (Γ^Q memory + A V) / (Γ^Q normalizer + A 1 + eps)`` with the in-chunk
   affinity ``A = tril(Γ^Q (Γ^K)^T)`` (causal) or without it, reading the total memory (bidirectional).

Every pass is parallel over (batch * head, chunks or row blocks[, K tiles]), so one long sequence fills a GPU.
Backward: the same state and carry kernels on the queries (a reverse prefix for causal), then
:func:`query_token_backward_kernel` (d q), :func:`key_token_backward_kernel` (d k, d v) and
:func:`mixture_backward_kernel` (per-part partial gradients of the tables, summed by torch in a fixed order).
No kernel uses atomics: every result is deterministic.

``Γ^Q`` and ``Γ^K`` are the responsibilities of the queries and the keys, ``(N, K)`` per (batch, head); no kernel
stores them: every kernel recomputes its tiles from ``x`` and the log-normalizers.

The softmax backward needs ``delta_i = sum_k gamma_ik d_gamma_ik`` over all K. For queries it is a per-token
quantity torch computes from the forward's output: ``delta = eps * (d_out . out) / den``; for keys the key kernel
computes it in a first pass over the K tiles and stores it for the mixture kernel.

Layout: every tensor is contiguous as ``(B*H, N, feature)``; program axis 0 runs over ``B * H``. All arithmetic is
fp32: inputs are cast right after ``tl.load``. ``LOGIT_PRECISION`` is the ``input_precision`` of the logits GEMMs:
``"ieee"`` or ``"tf32x3"``, never one-pass ``"tf32"`` (the logits cancel: chapter 7). ``PRECISION`` is that of
every other ``tl.dot`` (values, states, gradients), which do not cancel.

Size: one file of 500-odd lines because it is one algorithm's forward and backward, whose kernels share their
``@triton.jit`` helpers, and chapter 7b reads its source as one program.
"""
import triton
import triton.language as tl


# ----------------------------------------------------------------------------------------------------------------
# Building blocks (inlined into the kernels below)
# ----------------------------------------------------------------------------------------------------------------
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
def _load_tile(ptr, slot, k0, K, F, BLOCK_KT: tl.constexpr, BLOCK_F: tl.constexpr):
    """Components ``k0 .. k0 + BLOCK_KT`` of the (K, F) fp32 matrix number ``slot``, zero padded."""
    offs_k = k0 + tl.arange(0, BLOCK_KT)
    offs_f = tl.arange(0, BLOCK_F)
    mask = (offs_k[:, None] < K) & (offs_f[None, :] < F)
    return tl.load(ptr + slot * K * F + offs_k[:, None] * F + offs_f[None, :], mask=mask, other=0.0)


@triton.jit
def _store_tile(ptr, value, slot, k0, K, F, BLOCK_KT: tl.constexpr, BLOCK_F: tl.constexpr):
    offs_k = k0 + tl.arange(0, BLOCK_KT)
    offs_f = tl.arange(0, BLOCK_F)
    mask = (offs_k[:, None] < K) & (offs_f[None, :] < F)
    tl.store(ptr + slot * K * F + offs_k[:, None] * F + offs_f[None, :], value, mask=mask)


@triton.jit
def _load_vector(ptr, slot, k0, K, BLOCK_KT: tl.constexpr):
    offs_k = k0 + tl.arange(0, BLOCK_KT)
    return tl.load(ptr + slot * K + offs_k, mask=offs_k < K, other=0.0)


@triton.jit
def _store_vector(ptr, value, slot, k0, K, BLOCK_KT: tl.constexpr):
    offs_k = k0 + tl.arange(0, BLOCK_KT)
    tl.store(ptr + slot * K + offs_k, value, mask=offs_k < K)


@triton.jit
def _mixture_tile(w_sq_ptr, w_lin_ptr, bias_ptr, head, k0, K, D, BLOCK_KT: tl.constexpr, BLOCK_D: tl.constexpr):
    """Components ``k0 .. k0 + BLOCK_KT`` of the head's tables: w_sq, w_lin (BLOCK_KT, BLOCK_D), zero padded, and
    bias (BLOCK_KT,), whose padded components get ``-inf`` (responsibility exactly 0)."""
    w_sq = _load_tile(w_sq_ptr, head, k0, K, D, BLOCK_KT, BLOCK_D)
    w_lin = _load_tile(w_lin_ptr, head, k0, K, D, BLOCK_KT, BLOCK_D)
    offs_k = k0 + tl.arange(0, BLOCK_KT)
    bias = tl.load(bias_ptr + head * K + offs_k, mask=offs_k < K, other=float("-inf"))
    return w_sq, w_lin, bias


@triton.jit
def _logits(x, w_sq, w_lin, bias, LOGIT_PRECISION: tl.constexpr):
    """Logits (BLOCK_N, BLOCK_KT) of the rows ``x`` (BLOCK_N, BLOCK_D) for one tile of components: the GEMM on
    [x*x, x] with fp32 accumulation."""
    logits = tl.dot(x * x, tl.trans(w_sq), input_precision=LOGIT_PRECISION)
    logits += tl.dot(x, tl.trans(w_lin), input_precision=LOGIT_PRECISION)
    return logits + bias[None, :]


@triton.jit
def _load_lse(lse_ptr, bh, rows, N):
    """Log-normalizers of ``rows``; ``+inf`` past N, so that those rows get responsibilities exactly 0."""
    return tl.load(lse_ptr + bh * N + rows, mask=rows < N, other=float("inf"))


@triton.jit
def _gamma(x, lse, w_sq, w_lin, bias, LOGIT_PRECISION: tl.constexpr):
    """One K tile of responsibilities, ``exp(logits - lse)`` (BLOCK_N, BLOCK_KT)."""
    return tl.exp(_logits(x, w_sq, w_lin, bias, LOGIT_PRECISION) - lse[:, None])


@triton.jit
def _input_gradient(d_x, x, d_logits, w_sq, w_lin, PRECISION: tl.constexpr):
    """``d_x`` plus this K tile's part of d loss / d x through the logits GEMM."""
    d_x += 2.0 * x * tl.dot(d_logits, w_sq, input_precision=PRECISION)
    return d_x + tl.dot(d_logits, w_lin, input_precision=PRECISION)

@triton.jit
def _load_scalars(ptr, bh, rows, N):
    """One fp32 per token of ``rows`` (BLOCK_N,): a per-token quantity such as d_den or delta; 0 past N."""
    return tl.load(ptr + bh * N + rows, mask=rows < N, other=0.0)


@triton.jit
def _causal_mask(scores, BLOCK_N: tl.constexpr):
    """``scores`` (BLOCK_N, BLOCK_N) of one chunk with the entries [i, j], j > i (key after query) set to 0."""
    offs = tl.arange(0, BLOCK_N)
    return tl.where(offs[:, None] >= offs[None, :], scores, 0.0)


@triton.jit
def _block_program(BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr):
    """``(bh, rows, slot)`` of a program of a per-block kernel (grid ``(B * H, cdiv(N, BLOCK_N))``): its (batch,
    head), its token rows, and the slot of the state it reads: its chunk's exclusive prefix (causal) or the head's
    total (bidirectional)."""
    bh = tl.program_id(0)
    chunk = tl.program_id(1)
    rows = chunk * BLOCK_N + tl.arange(0, BLOCK_N)
    slot = bh
    if CAUSAL:
        slot = bh * tl.num_programs(1) + chunk
    return bh, rows, slot


@triton.jit
def _routing_rows(x_ptr, lse_ptr, other_ptr, other_lse_ptr, bh, rows, N, D, BLOCK_D: tl.constexpr,
                  OTHER: tl.constexpr):
    """``(x, lse, x_other, lse_other)``: a block's routing vectors (BLOCK_N, BLOCK_D) and log-normalizers
    (BLOCK_N,), and, when ``OTHER`` (the in-chunk terms need them), the other side's at the same positions; without
    ``OTHER`` the block's own again (nothing is loaded)."""
    x = _load_rows(x_ptr, bh, rows, N, D, BLOCK_D)
    lse = _load_lse(lse_ptr, bh, rows, N)
    x_other, lse_other = x, lse
    if OTHER:
        x_other = _load_rows(other_ptr, bh, rows, N, D, BLOCK_D)
        lse_other = _load_lse(other_lse_ptr, bh, rows, N)
    return x, lse, x_other, lse_other


@triton.jit
def _part_rows(part, i, BLOCKS_PER_PART, BLOCK_N: tl.constexpr):
    """``(block, rows)`` of the ``i``-th row block of part ``part`` (a run of ``BLOCKS_PER_PART`` blocks)."""
    block = part * BLOCKS_PER_PART + i
    return block, block * BLOCK_N + tl.arange(0, BLOCK_N)


@triton.jit
def _gamma_tile(x, lse, w_sq_ptr, w_lin_ptr, bias_ptr, head, k0, K, D, BLOCK_KT: tl.constexpr,
                BLOCK_D: tl.constexpr, LOGIT_PRECISION: tl.constexpr):
    """The head's tables for components ``k0 .. k0 + BLOCK_KT`` and the responsibilities of the rows ``x`` under
    them: ``(gamma (BLOCK_N, BLOCK_KT), w_sq, w_lin, bias)``."""
    w_sq, w_lin, bias = _mixture_tile(w_sq_ptr, w_lin_ptr, bias_ptr, head, k0, K, D, BLOCK_KT, BLOCK_D)
    return _gamma(x, lse, w_sq, w_lin, bias, LOGIT_PRECISION), w_sq, w_lin, bias


@triton.jit
def _load_state(state_ptr, norm_ptr, slot, k0, K, DV, BLOCK_KT: tl.constexpr, BLOCK_DV: tl.constexpr):
    """One K tile of the state number ``slot``: ``(state (BLOCK_KT, BLOCK_DV), norm (BLOCK_KT,))``."""
    return _load_tile(state_ptr, slot, k0, K, DV, BLOCK_KT, BLOCK_DV), _load_vector(norm_ptr, slot, k0, K, BLOCK_KT)


@triton.jit
def _store_state(state_ptr, norm_ptr, state, norm, slot, k0, K, DV, BLOCK_KT: tl.constexpr,
                 BLOCK_DV: tl.constexpr):
    """Store one K tile of the state number ``slot`` (the inverse of :func:`_load_state`)."""
    _store_tile(state_ptr, state, slot, k0, K, DV, BLOCK_KT, BLOCK_DV)
    _store_vector(norm_ptr, norm, slot, k0, K, BLOCK_KT)


@triton.jit
def _query_state_gradient(d_num, d_den, state, norm, PRECISION: tl.constexpr):
    """d loss / d Γ^Q through the read of one K tile of the memory: ``d_num state^T + d_den norm^T``."""
    return tl.dot(d_num, tl.trans(state), input_precision=PRECISION) + d_den[:, None] * norm[None, :]


@triton.jit
def _key_state_gradient(values, state, norm, PRECISION: tl.constexpr):
    """d loss / d Γ^K through the write of one K tile, given the query states ``R, r``: ``V R^T + 1 r^T``."""
    return tl.dot(values, tl.trans(state), input_precision=PRECISION) + norm[None, :]


@triton.jit
def _logit_gradient(gamma, d_gamma, delta):
    """The softmax backward on one K tile: ``gamma * (d_gamma - delta)``, with ``delta = sum_k gamma d_gamma``
    over all K (computed beforehand)."""
    return gamma * (d_gamma - delta[:, None])


@triton.jit
def _read_state_and_chunk(x, lse, x_other, lse_other, w_sq_ptr, w_lin_ptr, bias_ptr, state_ptr, norm_ptr, head,
                          slot, K, D, DV, QUERIES: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_N: tl.constexpr,
                          BLOCK_KT: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr,
                          PRECISION: tl.constexpr, LOGIT_PRECISION: tl.constexpr):
    """One pass over the K tiles for a block of rows ``x`` (the queries if ``QUERIES``, else the keys): the read
    of the state ``slot``, ``(Γ state (BLOCK_N, BLOCK_DV), Γ norm (BLOCK_N,))``, and, when causal, the chunk's
    masked affinity ``A = tril(Γ^Q (Γ^K)^T)`` (BLOCK_N, BLOCK_N) ``[query i, key j]`` with the other side's rows
    ``x_other`` (else zeros)."""
    read = tl.zeros((BLOCK_N, BLOCK_DV), dtype=tl.float32)
    read_norm = tl.zeros((BLOCK_N,), dtype=tl.float32)
    affinity = tl.zeros((BLOCK_N, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_KT):
        gamma, w_sq, w_lin, bias = _gamma_tile(x, lse, w_sq_ptr, w_lin_ptr, bias_ptr, head, k0, K, D, BLOCK_KT,
                                               BLOCK_D, LOGIT_PRECISION)
        state, norm = _load_state(state_ptr, norm_ptr, slot, k0, K, DV, BLOCK_KT, BLOCK_DV)
        read += tl.dot(gamma, state, input_precision=PRECISION)
        read_norm += tl.sum(gamma * norm[None, :], axis=1)
        if CAUSAL:
            other = _gamma(x_other, lse_other, w_sq, w_lin, bias, LOGIT_PRECISION)
            if QUERIES:
                affinity += tl.dot(gamma, tl.trans(other), input_precision=PRECISION)
            else:
                affinity += tl.dot(other, tl.trans(gamma), input_precision=PRECISION)
    if CAUSAL:
        affinity = _causal_mask(affinity, BLOCK_N)
    return read, read_norm, affinity


# ----------------------------------------------------------------------------------------------------------------
# 1. Log-normalizers, and the fused responsibility kernel
# ----------------------------------------------------------------------------------------------------------------
@triton.jit
def log_normalizer_kernel(x_ptr, w_sq_ptr, w_lin_ptr, bias_ptr, lse_ptr, H, N, K, D,
                          BLOCK_N: tl.constexpr, BLOCK_KT: tl.constexpr, BLOCK_D: tl.constexpr,
                          LOGIT_PRECISION: tl.constexpr):
    """``lse`` (B*H, N) fp32 = logsumexp over K of the logits, by an online max over the K tiles.
    Grid: (B * H, cdiv(N, BLOCK_N))."""
    bh = tl.program_id(0)
    rows = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    x = _load_rows(x_ptr, bh, rows, N, D, BLOCK_D)
    running_max = tl.full((BLOCK_N,), float("-inf"), dtype=tl.float32)
    running_sum = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_KT):
        w_sq, w_lin, bias = _mixture_tile(w_sq_ptr, w_lin_ptr, bias_ptr, bh % H, k0, K, D, BLOCK_KT, BLOCK_D)
        logits = _logits(x, w_sq, w_lin, bias, LOGIT_PRECISION)
        new_max = tl.maximum(running_max, tl.max(logits, axis=1))
        running_sum = running_sum * tl.exp(running_max - new_max) + tl.sum(tl.exp(logits - new_max[:, None]), axis=1)
        running_max = new_max
    tl.store(lse_ptr + bh * N + rows, running_max + tl.log(running_sum), mask=rows < N)


@triton.jit
def responsibility_kernel(x_ptr, lse_ptr, w_sq_ptr, w_lin_ptr, bias_ptr, gamma_ptr, H, N, K, D,
                          BLOCK_N: tl.constexpr, BLOCK_KT: tl.constexpr, BLOCK_D: tl.constexpr,
                          LOGIT_PRECISION: tl.constexpr):
    """gamma (B*H, N, K) fp32, one K tile per program. Grid: (B * H, cdiv(N, BLOCK_N), cdiv(K, BLOCK_KT))."""
    bh, rows, _ = _block_program(BLOCK_N, False)
    k0 = tl.program_id(2) * BLOCK_KT
    x = _load_rows(x_ptr, bh, rows, N, D, BLOCK_D)
    gamma, _, _, _ = _gamma_tile(x, _load_lse(lse_ptr, bh, rows, N), w_sq_ptr, w_lin_ptr, bias_ptr, bh % H, k0, K,
                                 D, BLOCK_KT, BLOCK_D, LOGIT_PRECISION)
    offs_k = k0 + tl.arange(0, BLOCK_KT)
    mask = (rows[:, None] < N) & (offs_k[None, :] < K)
    tl.store(gamma_ptr + bh * N * K + rows[:, None] * K + offs_k[None, :], gamma, mask=mask)


# ----------------------------------------------------------------------------------------------------------------
# 2. States: every part's [Γ^T values, Γ^T weights]; 3. the carry over parts
# ----------------------------------------------------------------------------------------------------------------
@triton.jit
def state_kernel(x_ptr, lse_ptr, values_ptr, weights_ptr, w_sq_ptr,
                 w_lin_ptr, bias_ptr, state_ptr, norm_ptr,
                 H, N, K, D, DV, N_PARTS, BLOCKS_PER_PART,
                 HAS_WEIGHTS: tl.constexpr,
                 BLOCK_N: tl.constexpr, BLOCK_KT: tl.constexpr,
                 BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr,
                 PRECISION: tl.constexpr, LOGIT_PRECISION: tl.constexpr):
    """Part ``p`` (rows of blocks ``[p * BLOCKS_PER_PART, (p + 1) * BLOCKS_PER_PART)``), K tile ``t``:
    ``state[bh, p, tile] = Γ_tile^T values`` (BLOCK_KT, DV) and ``norm[bh, p, tile] = Γ_tile^T weights``
    (weights 1 unless HAS_WEIGHTS). Forward: x = keys, values = V. Backward: x = queries, values = d_num,
    weights = d_den. Grid: (B * H, N_PARTS, cdiv(K, BLOCK_KT))."""
    bh = tl.program_id(0)
    part = tl.program_id(1)
    k0 = tl.program_id(2) * BLOCK_KT
    state = tl.zeros((BLOCK_KT, BLOCK_DV), dtype=tl.float32)
    norm = tl.zeros((BLOCK_KT,), dtype=tl.float32)
    # The K tile's tables are reloaded in every iteration (from L2): kept
    # live across the loop, their copies for the tensor cores would take
    # shared memory for the whole loop.
    for i in range(0, BLOCKS_PER_PART):
        _, rows = _part_rows(part, i, BLOCKS_PER_PART, BLOCK_N)
        x = _load_rows(x_ptr, bh, rows, N, D, BLOCK_D)
        gamma, _, _, _ = _gamma_tile(
            x, _load_lse(lse_ptr, bh, rows, N), w_sq_ptr, w_lin_ptr,
            bias_ptr, bh % H, k0, K, D, BLOCK_KT, BLOCK_D, LOGIT_PRECISION)
        values = _load_rows(values_ptr, bh, rows, N, DV, BLOCK_DV)
        state += tl.dot(tl.trans(gamma), values, input_precision=PRECISION)
        if HAS_WEIGHTS:
            gamma = gamma * _load_scalars(
                weights_ptr, bh, rows, N)[:, None]
        norm += tl.sum(gamma, axis=0)
    _store_state(state_ptr, norm_ptr, state, norm, bh * N_PARTS + part, k0,
                 K, DV, BLOCK_KT, BLOCK_DV)


@triton.jit
def carry_kernel(state_ptr, norm_ptr, total_state_ptr, total_norm_ptr,
                 K, DV, N_PARTS, REVERSE: tl.constexpr,
                 BLOCK_KT: tl.constexpr, BLOCK_DV: tl.constexpr):
    """In place, every part's state becomes the sum over the parts before it (after it when REVERSE): the
    exclusive prefix, added in a fixed order. The sum of all parts goes to the totals (B*H, K, DV), (B*H, K).
    Grid: (B * H, cdiv(K, BLOCK_KT))."""
    bh = tl.program_id(0)
    k0 = tl.program_id(1) * BLOCK_KT
    state = tl.zeros((BLOCK_KT, BLOCK_DV), dtype=tl.float32)
    norm = tl.zeros((BLOCK_KT,), dtype=tl.float32)
    for step in range(0, N_PARTS):
        if REVERSE:
            part = N_PARTS - 1 - step
        else:
            part = step
        slot = bh * N_PARTS + part
        contribution, norm_contribution = _load_state(
            state_ptr, norm_ptr, slot, k0, K, DV, BLOCK_KT, BLOCK_DV)
        _store_state(state_ptr, norm_ptr, state, norm, slot, k0, K, DV,
                     BLOCK_KT, BLOCK_DV)
        state += contribution
        norm += norm_contribution
    _store_state(total_state_ptr, total_norm_ptr, state, norm, bh, k0,
                 K, DV, BLOCK_KT, BLOCK_DV)


# ----------------------------------------------------------------------------------------------------------------
# 4. The output: the state read by the queries, plus the masked in-chunk affinity when causal
# ----------------------------------------------------------------------------------------------------------------
@triton.jit
def output_kernel(q_ptr, k_ptr, v_ptr, lse_q_ptr, lse_k_ptr, w_sq_ptr, w_lin_ptr, bias_ptr, memory_ptr,
                  normalizer_ptr, out_ptr, den_ptr, H, N, K, D, DV, eps, CAUSAL: tl.constexpr,
                  BLOCK_N: tl.constexpr, BLOCK_KT: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr,
                  PRECISION: tl.constexpr, LOGIT_PRECISION: tl.constexpr):
    """out (B*H, N, DV) and den (B*H, N) fp32 for one block of queries. Causal: the block is chunk ``c``, the
    memory is the exclusive prefix of chunk ``c`` (B*H, n_chunks, K, DV), and ``A = tril(Γ^Q (Γ^K)^T)`` adds
    the chunk's own keys ``j <= i``. Bidirectional: the memory is the total (B*H, 1, K, DV), no A.
    Grid: (B * H, cdiv(N, BLOCK_N))."""
    bh, rows, slot = _block_program(BLOCK_N, CAUSAL)
    x_q, lse_q, x_k, lse_k = _routing_rows(q_ptr, lse_q_ptr, k_ptr, lse_k_ptr, bh, rows, N, D, BLOCK_D, CAUSAL)
    numerator, denominator, affinity = _read_state_and_chunk(
        x_q, lse_q, x_k, lse_k, w_sq_ptr, w_lin_ptr, bias_ptr, memory_ptr, normalizer_ptr, bh % H, slot, K, D, DV,
        True, CAUSAL, BLOCK_N, BLOCK_KT, BLOCK_D, BLOCK_DV, PRECISION, LOGIT_PRECISION)
    if CAUSAL:
        numerator += tl.dot(affinity, _load_rows(v_ptr, bh, rows, N, DV, BLOCK_DV), input_precision=PRECISION)
        denominator += tl.sum(affinity, axis=1)
    denominator += eps
    _store_rows(out_ptr, numerator / denominator[:, None], bh, rows, N, DV, BLOCK_DV)
    tl.store(den_ptr + bh * N + rows, denominator, mask=rows < N)


# ----------------------------------------------------------------------------------------------------------------
# 5. Backward. With num = Γ^Q memory (+ A V), den = Γ^Q normalizer (+ A 1) + eps, out = num / den:
#     d_num = d_out / den,  d_den = -(d_out . out) / den  (computed by torch, as is delta_Q = -eps d_den),
#     d_Γ^Q_i = d_num_i memory^T + d_den_i normalizer^T (+ sum_{j <= i in chunk} W_ij Γ^K_j),
#     W_ij = V_j . d_num_i + d_den_i;  the query states R = (Γ^Q)^T d_num, r = (Γ^Q)^T d_den (reverse prefix),
#     d_Γ^K_j = V_j R^T + r^T (+ sum_{i >= j in chunk} W_ij Γ^Q_i),
#     d_V_j = Γ^K_j R (+ sum_{i >= j in chunk} A_ij d_num_i).
# ----------------------------------------------------------------------------------------------------------------
@triton.jit
def _in_chunk_weights(d_num, d_den, values, BLOCK_N: tl.constexpr, PRECISION: tl.constexpr):
    """W (BLOCK_N, BLOCK_N): W_ij = V_j . d_num_i + d_den_i for j <= i, else 0."""
    return _causal_mask(tl.dot(d_num, tl.trans(values), input_precision=PRECISION) + d_den[:, None], BLOCK_N)


@triton.jit
def query_token_backward_kernel(q_ptr, k_ptr, v_ptr, lse_q_ptr, lse_k_ptr, d_num_ptr, d_den_ptr, w_sq_ptr, w_lin_ptr,
                                bias_ptr, memory_ptr, normalizer_ptr, d_q_ptr, H, N, K, D, DV, eps,
                                IN_CHUNK: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_N: tl.constexpr,
                                BLOCK_KT: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr,
                                PRECISION: tl.constexpr, LOGIT_PRECISION: tl.constexpr):
    """d_q (B*H, N, D) fp32 for one block (chunk) of queries, in two launches: d loss / d logits is linear in
    d_Γ^Q, so the state terms (memory/normalizer as in :func:`output_kernel`, and the softmax's delta) and the
    causal in-chunk term (``IN_CHUNK``: ``W Γ^K``, added to d_q) are done apart; together their tiles would not
    fit a small GPU's shared memory. Grid: (B * H, cdiv(N, BLOCK_N))."""
    bh, rows, slot = _block_program(BLOCK_N, CAUSAL)
    x, lse, x_k, lse_k = _routing_rows(q_ptr, lse_q_ptr, k_ptr, lse_k_ptr, bh, rows, N, D, BLOCK_D, IN_CHUNK)
    d_num = _load_rows(d_num_ptr, bh, rows, N, DV, BLOCK_DV)
    d_den = _load_scalars(d_den_ptr, bh, rows, N)
    if IN_CHUNK:
        d_x = _load_rows(d_q_ptr, bh, rows, N, D, BLOCK_D)
        weights = _in_chunk_weights(d_num, d_den, _load_rows(v_ptr, bh, rows, N, DV, BLOCK_DV), BLOCK_N, PRECISION)
    else:
        d_x = tl.zeros((BLOCK_N, BLOCK_D), dtype=tl.float32)
        delta = -eps * d_den
    for k0 in range(0, K, BLOCK_KT):
        gamma, w_sq, w_lin, bias = _gamma_tile(x, lse, w_sq_ptr, w_lin_ptr, bias_ptr, bh % H, k0, K, D, BLOCK_KT,
                                               BLOCK_D, LOGIT_PRECISION)
        if IN_CHUNK:
            gamma_k = _gamma(x_k, lse_k, w_sq, w_lin, bias, LOGIT_PRECISION)
            d_logits = gamma * tl.dot(weights, gamma_k, input_precision=PRECISION)
        else:
            memory, normalizer = _load_state(memory_ptr, normalizer_ptr, slot, k0, K, DV, BLOCK_KT, BLOCK_DV)
            d_gamma = _query_state_gradient(d_num, d_den, memory, normalizer, PRECISION)
            d_logits = _logit_gradient(gamma, d_gamma, delta)
        d_x = _input_gradient(d_x, x, d_logits, w_sq, w_lin, PRECISION)
    _store_rows(d_q_ptr, d_x, bh, rows, N, D, BLOCK_D)


@triton.jit
def key_token_backward_kernel(q_ptr, k_ptr, v_ptr, lse_q_ptr, lse_k_ptr, d_num_ptr, d_den_ptr, w_sq_ptr, w_lin_ptr,
                              bias_ptr, reverse_ptr, reverse_norm_ptr, d_k_ptr, d_v_ptr, delta_ptr, H, N, K, D, DV,
                              CAUSAL: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_KT: tl.constexpr,
                              BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr, PRECISION: tl.constexpr,
                              LOGIT_PRECISION: tl.constexpr):
    """d_k (B*H, N, D), d_v (B*H, N, DV) and the keys' softmax term delta (B*H, N), fp32, for one block (chunk) of
    keys; reverse/reverse_norm are the query states R, r (their reverse exclusive prefix when causal, else the
    total). Two passes over K: the first gives d_v and delta, the second d_k. Grid: (B * H, cdiv(N, BLOCK_N))."""
    bh, rows, slot = _block_program(BLOCK_N, CAUSAL)
    x, lse, x_q, lse_q = _routing_rows(k_ptr, lse_k_ptr, q_ptr, lse_q_ptr, bh, rows, N, D, BLOCK_D, CAUSAL)
    values = _load_rows(v_ptr, bh, rows, N, DV, BLOCK_DV)
    if CAUSAL:
        d_num = _load_rows(d_num_ptr, bh, rows, N, DV, BLOCK_DV)
        d_den = _load_scalars(d_den_ptr, bh, rows, N)
    d_values, delta, affinity = _read_state_and_chunk(
        x, lse, x_q, lse_q, w_sq_ptr, w_lin_ptr, bias_ptr, reverse_ptr, reverse_norm_ptr, bh % H, slot, K, D, DV,
        False, CAUSAL, BLOCK_N, BLOCK_KT, BLOCK_D, BLOCK_DV, PRECISION, LOGIT_PRECISION)
    if CAUSAL:  # affinity[i, j]: query i sees key j
        d_values += tl.dot(tl.trans(affinity), d_num, input_precision=PRECISION)
        delta += tl.sum(affinity * d_den[:, None], axis=0)
        weights = _in_chunk_weights(d_num, d_den, values, BLOCK_N, PRECISION)
    delta += tl.sum(values * d_values, axis=1)
    _store_rows(d_v_ptr, d_values, bh, rows, N, DV, BLOCK_DV)
    tl.store(delta_ptr + bh * N + rows, delta, mask=rows < N)
    d_x = tl.zeros((BLOCK_N, BLOCK_D), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_KT):
        gamma, w_sq, w_lin, bias = _gamma_tile(x, lse, w_sq_ptr, w_lin_ptr, bias_ptr, bh % H, k0, K, D, BLOCK_KT,
                                               BLOCK_D, LOGIT_PRECISION)
        reverse, reverse_norm = _load_state(reverse_ptr, reverse_norm_ptr, slot, k0, K, DV, BLOCK_KT, BLOCK_DV)
        d_gamma = _key_state_gradient(values, reverse, reverse_norm, PRECISION)
        if CAUSAL:
            gamma_q = _gamma(x_q, lse_q, w_sq, w_lin, bias, LOGIT_PRECISION)
            d_gamma += tl.dot(tl.trans(weights), gamma_q, input_precision=PRECISION)
        d_logits = _logit_gradient(gamma, d_gamma, delta)
        d_x = _input_gradient(d_x, x, d_logits, w_sq, w_lin, PRECISION)
    _store_rows(d_k_ptr, d_x, bh, rows, N, D, BLOCK_D)


@triton.jit
def mixture_backward_kernel(x_ptr, other_ptr, v_ptr, lse_ptr, other_lse_ptr, d_num_ptr, d_den_ptr, delta_ptr,
                            w_sq_ptr, w_lin_ptr, bias_ptr, state_ptr, state_norm_ptr, d_w_sq_ptr, d_w_lin_ptr,
                            d_bias_ptr, H, N, K, D, DV, eps, N_PARTS, BLOCKS_PER_PART, N_BLOCKS,
                            KEYS: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_N: tl.constexpr,
                            BLOCK_KT: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr,
                            PRECISION: tl.constexpr, LOGIT_PRECISION: tl.constexpr):
    """Partial gradients of one K tile of w_sq, w_lin (B*H*N_PARTS, K, D) and bias (B*H*N_PARTS, K) from the rows
    of part ``p``, for the queries (``KEYS`` false: x = q, state = the forward memory) or the keys (x = k,
    state = the query states R, r; delta stored by :func:`key_token_backward_kernel`). ``other`` is the other
    side's routing vectors, needed for the in-chunk terms when causal. Grid: (B * H, N_PARTS, cdiv(K, BLOCK_KT))."""
    bh = tl.program_id(0)
    part = tl.program_id(1)
    k0 = tl.program_id(2) * BLOCK_KT
    d_w_sq = tl.zeros((BLOCK_KT, BLOCK_D), dtype=tl.float32)
    d_w_lin = tl.zeros((BLOCK_KT, BLOCK_D), dtype=tl.float32)
    d_bias = tl.zeros((BLOCK_KT,), dtype=tl.float32)
    for i in range(0, BLOCKS_PER_PART):
        block, rows = _part_rows(part, i, BLOCKS_PER_PART, BLOCK_N)
        slot = bh
        if CAUSAL:
            slot = bh * N_BLOCKS + block
        x = _load_rows(x_ptr, bh, rows, N, D, BLOCK_D)
        gamma, w_sq, w_lin, bias = _gamma_tile(x, _load_lse(lse_ptr, bh, rows, N), w_sq_ptr, w_lin_ptr, bias_ptr,
                                               bh % H, k0, K, D, BLOCK_KT, BLOCK_D, LOGIT_PRECISION)
        state, state_norm = _load_state(state_ptr, state_norm_ptr, slot, k0, K, DV, BLOCK_KT, BLOCK_DV)
        if KEYS:
            values = _load_rows(v_ptr, bh, rows, N, DV, BLOCK_DV)
            d_gamma = _key_state_gradient(values, state, state_norm, PRECISION)
            delta = _load_scalars(delta_ptr, bh, rows, N)
        else:
            d_num = _load_rows(d_num_ptr, bh, rows, N, DV, BLOCK_DV)
            d_den = _load_scalars(d_den_ptr, bh, rows, N)
            d_gamma = _query_state_gradient(d_num, d_den, state, state_norm, PRECISION)
            delta = -eps * d_den
        if CAUSAL:
            other = _gamma(_load_rows(other_ptr, bh, rows, N, D, BLOCK_D), _load_lse(other_lse_ptr, bh, rows, N),
                           w_sq, w_lin, bias, LOGIT_PRECISION)
            if KEYS:
                d_num = _load_rows(d_num_ptr, bh, rows, N, DV, BLOCK_DV)
                d_den = _load_scalars(d_den_ptr, bh, rows, N)
                weights = _in_chunk_weights(d_num, d_den, values, BLOCK_N, PRECISION)
                d_gamma += tl.dot(tl.trans(weights), other, input_precision=PRECISION)
            else:
                weights = _in_chunk_weights(d_num, d_den, _load_rows(v_ptr, bh, rows, N, DV, BLOCK_DV), BLOCK_N,
                                            PRECISION)
                d_gamma += tl.dot(weights, other, input_precision=PRECISION)
        d_logits = _logit_gradient(gamma, d_gamma, delta)
        d_w_sq += tl.dot(tl.trans(d_logits), x * x, input_precision=PRECISION)
        d_w_lin += tl.dot(tl.trans(d_logits), x, input_precision=PRECISION)
        d_bias += tl.sum(d_logits, axis=0)
    slot = bh * N_PARTS + part
    _store_tile(d_w_sq_ptr, d_w_sq, slot, k0, K, D, BLOCK_KT, BLOCK_D)
    _store_tile(d_w_lin_ptr, d_w_lin, slot, k0, K, D, BLOCK_KT, BLOCK_D)
    _store_vector(d_bias_ptr, d_bias, slot, k0, K, BLOCK_KT)
