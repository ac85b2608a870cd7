"""Run as a script by :func:`gma_teach.kernels.shared_memory`, in a fresh process where Triton compiles (never the
interpreter): reads ``[[kernel_name, constexprs, pointer_dtype, arch, num_warps, num_stages, full], ...]`` as JSON
on stdin and writes the shared memory in bytes of each launch, as JSON on stdout.

Each kernel of ``_triton_kernels.py`` is lowered to Triton's GPU dialect for ``sm_<arch>`` and the compiler's
shared-memory allocation pass is run (the first passes of the nvidia backend's ``make_llir``); it stops before
code generation, so no GPU and no CUDA toolchain is needed. With ``full``, the kernel is compiled all the way to a
cubin instead (Triton's bundled ptxas; about half a minute) and the compiled kernel's own count is returned: the
check that the kernels compile for that GPU, and that the quick count is the compiler's. Imports nothing from
gma_teach.
"""
import importlib.util
import json
import sys
from pathlib import Path

INPUT_POINTERS = ("q_ptr", "k_ptr", "v_ptr", "x_ptr", "other_ptr", "out_ptr")


def load_kernels():
    path = Path(__file__).with_name("_triton_kernels.py")
    spec = importlib.util.spec_from_file_location("gma_teach_kernels_for_compiler", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def allocated_bytes(kernel, constants: dict, pointer_dtype: str, arch: int, num_warps: int, num_stages: int,
                    full: bool = False) -> int:
    # triton is an optional dependency: imported only when a launch is sized
    import triton
    from triton._C.libtriton import ir, nvidia, passes
    from triton.backends.compiler import GPUTarget
    from triton.backends.nvidia.compiler import get_ptx_version_from_options
    from triton.compiler.compiler import make_backend

    signature = {arg: "constexpr" if arg in constants else f"*{pointer_dtype}" if arg in INPUT_POINTERS else
                 "*fp32" if arg.endswith("_ptr") else "fp32" if arg == "eps" else "i32" for arg in kernel.arg_names}
    source = triton.compiler.ASTSource(fn=kernel, signature=signature, constexprs=constants)
    target = GPUTarget("cuda", arch, 32)
    if full:
        compiled = triton.compile(source, target=target, options={"num_warps": num_warps, "num_stages": num_stages})
        return int(compiled.metadata.shared)
    backend = make_backend(target)
    options = backend.parse_options({"num_warps": num_warps, "num_stages": num_stages, **source.parse_options()})
    context = ir.context()
    ir.load_dialects(context)
    backend.load_dialects(context)
    module = source.make_ir(target, options, backend.get_codegen_implementation(options), backend.get_module_map(),
                            context)
    stages: dict = {}
    backend.add_stages(stages, options, source.language)
    metadata: dict = {}
    module = stages["ttgir"](stages["ttir"](module, metadata), metadata)
    manager = ir.pass_manager(module.context)
    passes.ttgpuir.add_combine_tensor_select_and_if(manager)
    passes.ttgpuir.add_allocate_warp_groups(manager, False)
    passes.convert.add_scf_to_cf(manager)
    passes.gluon.add_inliner(manager)
    nvidia.passes.ttgpuir.add_allocate_shared_memory_nv(manager, arch, get_ptx_version_from_options(options, arch))
    manager.run(module, "gma_teach.shared_memory")
    return int(module.get_int_attr("ttg.shared"))


def main():
    requests = json.load(sys.stdin)
    module = load_kernels()
    answers = [allocated_bytes(getattr(module, name), constants, pointer_dtype, arch, num_warps, num_stages, full)
               for name, constants, pointer_dtype, arch, num_warps, num_stages, full in requests]
    json.dump(answers, sys.stdout)


if __name__ == "__main__":
    main()
