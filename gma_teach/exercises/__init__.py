"""Checkers for the chapters' exercises: call one on your own implementation.

A checker compares your function with the package's reference on random inputs. It prints
``"Exercise 4.1: correct"`` when your answer is right, raises :class:`ExerciseError` with a message that says *what*
is wrong (shape, dtype, which entries, by how much, and the likely misconception) when it is not, and prints
``"Exercise 4.1: not attempted yet ..."`` while your function is still the stub (it raises ``NotImplementedError``).
Pass ``strict=True`` to make a stub raise :class:`NotAttempted` instead (for grading). One module per chapter
(``ch01``, ``ch02``, ...); every checker is also importable from here.
"""
from ._common import ExerciseError, NotAttempted, checker
from .ch01 import check_causal_attention, check_softmax_attention
from .ch02 import check_gemm_coefficients, check_log_responsibilities
from .ch03 import check_affinity, check_affinity_rank
from .ch04 import check_flop_count, check_read_memory, check_write_memory
from .ch05 import check_raw_for_variance, check_responsibility_jacobian
from .ch06 import check_causal_gma, check_recurrent_step
from .ch07 import (check_causal_memory_bound, check_masked_softmax, check_matmul_kernel, check_normalizer_kernel,
                   check_softmax_backward)
from .ch08 import check_gma_memory_extrapolation, check_loglog_slope, check_softmax_memory_prediction
from .ch09 import check_cross_attention_gma, check_listops_evaluator, check_listops_tokenizer, check_multi_head_gma
from .ch10 import check_chunked_causal_gma, check_k_sweep, check_pack, check_perplexity, check_state_bytes
from .ch11 import check_mutual_information, check_purity, check_routing_information, check_token_entropy

__all__ = [
    "ExerciseError",
    "NotAttempted",
    "check_affinity",
    "check_affinity_rank",
    "check_causal_attention",
    "check_causal_gma",
    "check_causal_memory_bound",
    "check_chunked_causal_gma",
    "check_cross_attention_gma",
    "check_flop_count",
    "check_gemm_coefficients",
    "check_gma_memory_extrapolation",
    "check_k_sweep",
    "check_listops_evaluator",
    "check_listops_tokenizer",
    "check_log_responsibilities",
    "check_loglog_slope",
    "check_masked_softmax",
    "check_matmul_kernel",
    "check_multi_head_gma",
    "check_mutual_information",
    "check_normalizer_kernel",
    "check_pack",
    "check_perplexity",
    "check_purity",
    "check_raw_for_variance",
    "check_read_memory",
    "check_recurrent_step",
    "check_responsibility_jacobian",
    "check_routing_information",
    "check_softmax_attention",
    "check_softmax_backward",
    "check_softmax_memory_prediction",
    "check_state_bytes",
    "check_token_entropy",
    "check_write_memory",
    "checker",
]
