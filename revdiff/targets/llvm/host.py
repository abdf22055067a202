"""LLVM IR of the host routines CPU programs call (``ir/low.HostCall``): BLAS for vector instructions
on large real views, and the largest magnitude of a view (the scale of an ancilla's zero check).

Each BLAS routine returns false, touching nothing, when its operands do not suit BLAS (a dtype other
than float32/float64, mixed dtypes, a matrix strided along both axes, an empty view, a size beyond
BLAS's 32-bit integers, no memory for a scratch product); the program then runs its own loops.

Reversibility: ``y += A @ x`` computes ``t = A @ x`` into scratch with one BLAS call and then adds
``t`` element by element, so the inverse ``y -= A @ x`` subtracts exactly the value the forward
added: the same call on the same operands returns the same ``t``. Gradient updates accumulate into
the gradient arrays directly (``beta = 1``).

BLAS is SciPy's (``scipy.linalg.cython_blas``, the BLAS Numba's products called too):
``targets/llvm/jit.py`` makes its ``?gemv``/``?gemm`` known to the JIT as
``revdiff_dgemm`` and so on. Views arrive as (data, shape..., byte strides...).
"""
from __future__ import annotations

from revdiff.targets.llvm import prelude
from revdiff.targets.llvm.blas import _LETTER, common, routine_definitions

BLAS_ROUTINES = ("matvec", "matvec_input_gradient", "outer_update", "matmat", "matmat_gradient")
#: each routine's operands: the ranks of its views, then how many flags (the sign comes last)
OPERANDS = {"matvec": ((1, 2, 1), 1), "matvec_input_gradient": ((1, 2, 1), 1), "outer_update": ((2, 1, 1), 0),
            "matmat": ((2, 2, 2), 2), "matmat_gradient": ((2, 2, 2), 2)}



def largest_definition(dtype: str) -> str:
    """``double @rd_largest_<dtype>(double scale, ptr v, i64 n, i64 s)``: max(scale, |x|) over a
    vector view, in four running maxima (independent chains the CPU overlaps; the maximum does not
    depend on the order, and a NaN element leaves the scale as it is, as ``max(scale, abs(x))``)."""
    complex_ = dtype.startswith("complex")
    part = {"float64": "double", "float32": "float", "complex128": "double", "complex64": "float"}[dtype]
    step = 2 * (8 if part == "double" else 4) if complex_ else (8 if part == "double" else 4)
    suffix = "f64" if part == "double" else "f32"
    hypot = "hypot" if part == "double" else "hypotf"

    def magnitude(at: str, k: str) -> list:
        if complex_:
            return [f"  %re{k} = load {part}, ptr {at}, align 1",
                    f"  %ip{k} = getelementptr i8, ptr {at}, i64 {step // 2}",
                    f"  %im{k} = load {part}, ptr %ip{k}, align 1",
                    f"  %h{k} = call {part} @{hypot}({part} %re{k}, {part} %im{k})",
                    f"  %m{k} = fpext {part} %h{k} to double" if part == "float" else f"  %m{k} = fadd double %h{k}, -0.0"]
        return [f"  %x{k} = load {part}, ptr {at}, align 1",
                f"  %a{k} = call {part} @llvm.fabs.{suffix}({part} %x{k})",
                f"  %m{k} = fpext {part} %a{k} to double" if part == "float" else f"  %m{k} = fadd double %a{k}, -0.0"]

    lines = [f"define internal double @rd_largest_{dtype}(double %scale, ptr %v, i64 %n, i64 %s) {{",
             "entry:",
             "  %bulk = and i64 %n, -4",
             "  br label %head4",
             "head4:",
             "  %j = phi i64 [0, %entry], [%j4, %body4]"]
    for c in range(4):
        lines.append(f"  %c{c} = phi double [%scale, %entry], [%n{c}, %body4]")
    lines += ["  %more4 = icmp slt i64 %j, %bulk", "  br i1 %more4, label %body4, label %tail", "body4:"]
    for c in range(4):
        lines += [f"  %i{c} = add i64 %j, {c}", f"  %o{c} = mul i64 %i{c}, %s", f"  %p{c} = getelementptr i8, ptr %v, i64 %o{c}"]
        lines += magnitude(f"%p{c}", str(c))
        lines += [f"  %g{c} = fcmp ogt double %m{c}, %c{c}", f"  %n{c} = select i1 %g{c}, double %m{c}, double %c{c}"]
    lines += ["  %j4 = add i64 %j, 4", "  br label %head4",
              "tail:",
              "  br label %head1",
              "head1:",
              "  %k = phi i64 [%bulk, %tail], [%k1, %body1]",
              "  %t0 = phi double [%c0, %tail], [%u0, %body1]",
              "  %more1 = icmp slt i64 %k, %n",
              "  br i1 %more1, label %body1, label %done",
              "body1:",
              "  %oo = mul i64 %k, %s",
              "  %pp = getelementptr i8, ptr %v, i64 %oo"]
    lines += magnitude("%pp", "t")
    lines += ["  %gt = fcmp ogt double %mt, %t0", "  %u0 = select i1 %gt, double %mt, double %t0",
              "  %k1 = add i64 %k, 1", "  br label %head1",
              "done:",
              # max(max(a0, a1), max(a2, a3)), each max(a, b) = b if b > a else a
              "  %g01 = fcmp ogt double %c1, %t0", "  %m01 = select i1 %g01, double %c1, double %t0",
              "  %g23 = fcmp ogt double %c3, %c2", "  %m23 = select i1 %g23, double %c3, double %c2",
              "  %gall = fcmp ogt double %m23, %m01", "  %all = select i1 %gall, double %m23, double %m01",
              "  ret double %all", "}"]
    return "\n".join(lines)


def declarations(used_dtypes: set, largest: set) -> tuple:
    """(definitions, C functions they need) of the BLAS routines of ``used_dtypes`` and the largest
    magnitude of ``largest`` dtypes."""
    texts, needs = [], set()
    for dtype in sorted(used_dtypes):
        x = _LETTER[dtype]
        texts.append(common(dtype))
        texts += list(routine_definitions(dtype).values())
        texts.append(f"declare void @revdiff_{x}gemv(ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr)")
        texts.append(f"declare void @revdiff_{x}gemm(ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr)")
        needs |= {("malloc", "ptr"), ("free", "ptr"), ("smax", "i64")}
    for dtype in sorted(largest):
        texts.append(largest_definition(dtype))
        part = "float" if dtype in ("float32", "complex64") else "double"
        needs.add(("hypot", part) if dtype.startswith("complex") else ("fabs", part))
    return texts, needs


def exported(dtype: str) -> tuple:
    """(LLVM module, {routine: symbol}): the BLAS routines of ``dtype`` and the largest-magnitude scans
    of ``dtype`` and its complex twin (``largest_<dtype>``) under external names, for callers outside
    generated code (the Python backend's host routines, tests)."""
    x = _LETTER[dtype]
    complex_ = "complex128" if dtype == "float64" else "complex64"
    texts, needs = declarations({dtype}, {dtype, complex_})
    symbols = {}
    for d in (dtype, complex_):
        symbols[f"largest_{d}"] = f"revdiff_host_largest_{d}"
        texts.append(f"define double @revdiff_host_largest_{d}(double %s, ptr %v, i64 %n, i64 %st) {{\nentry:\n"
                     f"  %r = call double @rd_largest_{d}(double %s, ptr %v, i64 %n, i64 %st)\n  ret double %r\n}}")
    for routine, (ranks, flags) in OPERANDS.items():
        params = []
        for k, rank in enumerate(ranks):
            names = [f"%v{k}"] + [f"%v{k}.{j}" for j in range(2 * rank)]
            params += [f"ptr {names[0]}"] + [f"i64 {n}" for n in names[1:]]
        params += [f"i1 %f{k}" for k in range(flags)] + ["i1 %positive"]
        symbols[routine] = f"revdiff_host_{routine}_{x}"
        texts.append(f"define i1 @{symbols[routine]}({', '.join(params)}) {{\nentry:\n"
                     f"  %ok = call i1 @rd_{routine}_{x}({', '.join(params)})\n  ret i1 %ok\n}}")
    return "\n\n".join(prelude.declarations(needs) + texts) + "\n", symbols
