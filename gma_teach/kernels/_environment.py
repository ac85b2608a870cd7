"""Whether Triton is installed, and whether it compiles for a GPU or runs in its CPU interpreter.

On a machine without CUDA, Triton can still run every kernel in its interpreter (``TRITON_INTERPRET=1``): each
program runs one after another as NumPy code on CPU tensors. Triton reads that variable when a kernel is
*defined* (decorated), so :func:`configure` sets it before ``gma_teach.kernels`` defines its kernels, even
when another library imported Triton first; it then records that fact for :func:`status`.
"""
from __future__ import annotations

import importlib.util
import os
import sys

import torch

_STATE: dict = {}


def configure() -> dict:
    """Decide the mode once per process; returns ``{"installed", "version", "interpreting", "note", "error"}``."""
    if _STATE:
        return _STATE
    _STATE.update(installed=False, version=None, interpreting=False, note="", error="")
    try:
        found = importlib.util.find_spec("triton") is not None
    except (ImportError, ValueError):  # blocked, or a broken entry in sys.modules
        found = False
    if not found:
        return _STATE
    imported_before = "triton" in sys.modules
    requested = os.environ.get("TRITON_INTERPRET", "").strip().lower() in ("1", "true", "yes", "on")
    if requested:
        _STATE["note"] = "you set TRITON_INTERPRET=1"
    elif not torch.cuda.is_available():
        os.environ["TRITON_INTERPRET"] = "1"
        _STATE["note"] = "no CUDA GPU, so TRITON_INTERPRET=1"
    try:
        import triton  # optional dependency: triton
    except Exception as error:  # installed but broken (e.g. a missing compiler runtime)
        _STATE["error"] = f"{type(error).__name__}: {error}"
        return _STATE
    interpret = requested or not torch.cuda.is_available()
    _STATE.update(installed=True, version=triton.__version__, interpreting=interpret)
    if interpret and imported_before and _interpret_library_functions():
        _STATE["note"] += ("; triton had been imported before (e.g. by torch.compile), so gma_teach switched "
                           "triton.language's library functions to the interpreter")
    return _STATE


def _interpret_library_functions() -> int:
    """Make Triton's own ``@triton.jit`` library functions (``tl.sum``, ``tl.max``, ``tl.cdiv``, ...) callable from
    interpreted kernels when Triton was imported before ``TRITON_INTERPRET=1`` was set: they were then defined
    for the compiler, and the interpreter refuses to call them. Only done without a GPU, where compiled Triton
    kernels cannot run anyway. Returns how many functions were switched."""
    from triton.runtime.interpreter import InterpretedFunction  # optional dependency: triton
    from triton.runtime.jit import JITFunction  # optional dependency: triton

    switched = 0
    modules = [module for name, module in list(sys.modules.items())
               if module is not None and (name == "triton.language" or name.startswith("triton.language."))]
    for module in modules:
        for name, value in list(vars(module).items()):
            if isinstance(value, JITFunction):
                setattr(module, name, InterpretedFunction(value.fn))
                switched += 1
    return switched


def interpreting() -> bool:
    """True when the kernels run in Triton's CPU interpreter in this process."""
    return configure()["interpreting"]


def status() -> str:
    """One line: Triton's version and mode, or why it is unavailable and how to install it."""
    state = configure()
    if state["error"]:
        return f"installed but failed to import ({state['error']})"
    if not state["installed"]:
        return "not installed: pip install triton (Linux; or pip install 'gma_teach[triton]')"
    if state["interpreting"]:
        return f"{state['version']}, interpreted on CPU ({state['note']})"
    major, minor = torch.cuda.get_device_capability()
    return f"{state['version']}, compiled for sm_{major}{minor} ({torch.cuda.get_device_name()})"


def is_available(device=None) -> bool:
    """Whether :func:`gma_teach.kernels.gma_triton` can run on tensors of ``device`` (default: CUDA if present).

    True on CUDA when Triton compiles for the GPU; True on CPU when Triton runs interpreted.
    """
    state = configure()
    if not state["installed"]:
        return False
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(device)
    if state["interpreting"]:
        return device.type == "cpu"
    return device.type == "cuda" and torch.cuda.is_available()
