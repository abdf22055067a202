"""The CUDA programs of a function: its device functions and those of everything it calls, kernel
modules with a batched ``__global__`` entry per batched function, and running them (on a GPU
through CuPy, or built for the host to test the same source without one)."""
from __future__ import annotations

from dataclasses import replace
from typing import NamedTuple

from revdiff.backends.cuda.emit import PRELUDE, CudaEmitter, Signature, kernel_source, with_line_directives
from revdiff.backends.cuda.launch import HOST_SHIM, Argument, HostModule, nvrtc_options, run_device, run_host
from revdiff.backends.cuda.launch import layout as kernel_layout
from revdiff.compiler.entries import entry_signature
from revdiff.compiler.graph import ascii_name, invoked, symbol
from revdiff.ir.low import LowFunction, rename_statement
from revdiff.ir.types import VarType
from revdiff.runtime.device import cupy_module

_DEVICE_MODULES: dict = {}
#: the name compiler messages give the generated lines of a kernel module
MODULE_NAME = "revdiff_kernels.cu"


class DeviceFunction(NamedTuple):
    """A device function's CUDA source, the user's source line each of its lines comes from, and
    the size of the largest ancilla element it allocates."""

    text: str
    origins: tuple
    ancilla_itemsize: int = 1


def c_name(name: str) -> str:
    """A variable's name in CUDA C: the user's (and names derived from them, ``g_x``) behind ``v_`` in
    ASCII, clear of C++ keywords (``new``), the kernels' own names (``st``) and the prelude's functions
    (``sqrt``); generated names (``_t3``) as they are."""
    return name if name.startswith("_") else "v_" + ascii_name(name)


def _in_c_names(low: LowFunction) -> LowFunction:
    return replace(low, params=[c_name(p) for p in low.params], body=[rename_statement(s, c_name) for s in low.body],
                   returns=[c_name(r) for r in low.returns],
                   param_types={c_name(k): t for k, t in low.param_types.items()})


def by_reference(spec, program: str) -> tuple:
    """Scalar parameters a program writes (passed by reference), in the driver's parameter order
    (``Plan``): those the function modifies, the gradients of an adjoint or fused vjp, and (fused)
    the saved outputs, which are arrays."""
    plan = spec.plan(program)
    if plan.lowering == "tangent":  # a scalar's tangent changes where the scalar does
        base = by_reference(spec, plan.tangent_of)
        return base + tuple(ref for ref, t in zip(base, _parameter_types(spec, plan.tangent_of)) if t.differentiable)
    modified = spec.rf.modified_positions()
    refs = tuple(k in modified for k in range(len(spec.rf.params)))
    lowering = plan.lowering
    if lowering != "forward":
        refs += tuple(True for t in spec.types if t.differentiable)
    if lowering == "fused":
        refs += tuple(False for _ in modified)
    return refs


def _parameter_types(spec, program: str) -> list:
    """The types of ``program``'s parameters, in the driver's order (``Plan``)."""
    types = list(spec.types)
    lowering = spec.plan(program).lowering
    if lowering != "forward":
        types += [t for t in spec.types if t.differentiable]
    if lowering == "fused":
        modified = spec.rf.modified_positions()
        types += [VarType(t.kind, max(t.ndim, 1), t.dtype) for k, t in enumerate(spec.types) if k in modified]
    return types


def device_functions(spec, programs, done: dict | None = None) -> dict:
    """CUDA source of ``programs`` of ``spec`` and of everything they call, by device function name
    (added to ``done``, which may already hold other programs' functions)."""
    done = {} if done is None else done

    def visit(s, program: str) -> None:
        name = symbol(s, program)
        if name in done:
            return
        done[name] = None  # recursion guard (every entry is a DeviceFunction once visited)
        low = s.low_function(program)
        callees = {}
        for alias, (dep, prog) in list(s.dependencies.items()):
            if alias in invoked(low):
                visit(dep, prog)
                callees[alias] = Signature(symbol(dep, prog), by_reference(dep, prog))
        low = replace(_in_c_names(low), name=name)
        emitter = CudaEmitter(dict(low.param_types), callees)
        text = emitter.function(low, by_reference(s, program))
        done[name] = DeviceFunction(text, tuple(emitter.origins), emitter.ancilla_itemsize)

    for program in programs:
        visit(spec, program)
    return done


def prototypes(functions: dict) -> str:
    """Declarations of device functions, so that the definitions may come in any order."""
    return "\n".join(f.text.split("\n", 1)[0][:-2] + ";" for f in functions.values()) + "\n"


def with_prototypes(functions: dict) -> str:
    """Device functions in any order: prototypes first, then the definitions."""
    return prototypes(functions) + "\n" + "\n".join(f.text for f in functions.values())


def program_source(f, program: str, types: tuple) -> str:
    """``f.source(program, backend="cuda")``: the device functions, for any shapes."""
    spec = f.forward_function.specialize(types)
    header = (f"// Generated by revdiff: the {program} program of {f.forward_function.__qualname__} as CUDA "
              f"device code, for any shapes;\n// element types ({', '.join(t.describe() for t in types)}). "
              f"Needs revdiff/backends/cuda/revdiff_cuda.h.\n")
    return header + with_prototypes(device_functions(spec, [program]))


# Kernels use the CPU's specialisation (``blas=True``), whose BLAS calls the CUDA emitter replaces by
# their loops: below BLAS_MIN_ELEMENTS those are the loops the CPU runs, so a kernel's arithmetic is
# the CPU's (elements and lanes) bit for bit, which ``run_on_host`` tests without a GPU.


def entry_name(bf, kind: str, types: tuple) -> str:
    """The kernel of batched function ``bf``'s ``kind`` ("call" or "vjp") entry."""
    return symbol(bf.f.forward_function.specialize(types), bf.f.programs[0]) + "_batch_" + kind


def module_source(entries: list, host: bool = False, check: bool = True) -> str:
    """A whole kernel module: prelude, the device functions, and a ``__global__`` entry per
    (BatchedFunction, kind, element types) in ``entries`` (kind "call" or "vjp")."""
    functions: dict = {}
    kernels = []
    for bf, kind, types in entries:
        spec = bf.f.forward_function.specialize(types)
        sig = entry_signature(bf.f, bf.batched, kind, types)
        type_map = dict(zip(bf.f.params, types))
        type_map.update({g.name: t for g, t in zip(sig.grads, [t for t in types if t.differentiable])})
        type_map.update({"d_" + p: t for p, t in list(type_map.items()) if t.differentiable})  # tangents
        device_functions(spec, [sig.program], functions)
        named = {c_name(k): t for k, t in type_map.items()}
        kernels.append(kernel_source(entry_name(bf, kind, types), symbol(spec, sig.program), _c(sig.params),
                                     _c(sig.grads), named, tuple(map(c_name, sig.saved)), host=host,
                                     tangents=_c(sig.tangents), tangent_saved=tuple(map(c_name, sig.tangent_saved))))
    prelude = f'#include "{HOST_SHIM}"\n#include "{PRELUDE}"' if host else PRELUDE.read_text()
    slot = max((f.ancilla_itemsize for f in functions.values()), default=1)  # interleaved stacks' slot
    head = "\n".join((["#define RD_BOUNDSCHECK"] if check else []) + [f"#define RD_ANCILLA_SLOT {slot}", prelude,
                                                                        prototypes(functions)])
    lines = [(line, None) for line in head.split("\n")]
    for function in functions.values():
        lines += list(zip(function.text.splitlines(), function.origins)) + [("", None)]
    lines += [(line, None) for line in "\n".join(kernels).split("\n")]
    return "\n".join(with_line_directives(lines, MODULE_NAME))


def _c(params) -> list:
    """BatchParams with their names in CUDA C (``c_name``)."""
    return [replace(p, name=c_name(p.name)) for p in params]


def _batch_size(bf, arrays) -> int:
    return next(a.shape[0] for p, a in zip(bf.f.params, arrays) if p in bf.batched)


def kernel_arguments(bf, kind: str, types: tuple) -> list:
    """An ``Argument`` (batched, written) for each argument of ``bf``'s ``kind`` entry, in the
    kernel's order: parameters and gradients, saved outputs, tangents, the saved outputs' tangents.
    The kernel writes all but the parameters the function does not modify and their tangents."""
    sig = entry_signature(bf.f, bf.batched, kind, types)
    modified = {bf.f.params[k] for k in bf.f.forward_function.modified_positions()}
    read_only = {p for p in bf.f.params if p not in modified}
    read_only |= {"d_" + p for p in read_only}
    named = list(sig.params) + list(sig.grads)
    out = [Argument(p.batched, p.name not in read_only) for p in named]
    out += [Argument(True, True)] * len(sig.saved)
    out += [Argument(p.batched, p.name not in read_only) for p in sig.tangents]
    return out + [Argument(True, True)] * len(sig.tangent_saved)


def run_on_host(module: HostModule, bf, kind: str, arrays: list, types: tuple, layout: str | None = None) -> None:
    """Run ``bf``'s ``kind`` entry of a host-built module in place on ``arrays`` (the argument list
    of the compiled batched entry), in ``layout`` (``launch.LAYOUTS``; default ``launch.layout()``).
    Raises what the CPU backend raises on a failed check."""
    run_host(module, entry_name(bf, kind, types), arrays, kernel_arguments(bf, kind, types),
             _batch_size(bf, arrays), kernel_layout(layout) == "interleaved")


def run_on_device(bf, kind: str, arrays: list, types: tuple) -> None:
    """Run ``bf``'s ``kind`` entry on the GPU, in place on ``arrays``, in the layout
    ``launch.layout()`` names; the module is compiled once per function version, options and
    element types."""
    cupy = cupy_module()
    options = bf.f.forward_function.options
    # keyed by the function's source and globals as they are now (a rebound global compiles anew),
    # and by the batched function itself, kept alive by the key (an id could be reused)
    key = (bf, kind, types, options.check, options.fmad, options.fuse_loops, bf.f.forward_function.version())
    if key not in _DEVICE_MODULES:
        source = module_source([(bf, kind, types)], check=options.check)
        _DEVICE_MODULES[key] = cupy.RawModule(code=source, options=nvrtc_options(options.fmad))
    run_device(_DEVICE_MODULES[key], entry_name(bf, kind, types), arrays, kernel_arguments(bf, kind, types),
               _batch_size(bf, arrays), kernel_layout() == "interleaved")
