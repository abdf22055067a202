"""LLVM IR of the helpers generated code calls: Python's ``//`` and ``%`` on integers and floats,
integer powers by squaring, complex division and the complex elementary functions, and the C
library functions they and the programs call. A module carries only the helpers it uses, each once
(``internal``: every module has its own copy, so compiled modules depend on nothing but the C library).

The float ``//`` and ``%`` are CPython's ``float_divmod``; complex division
is CPython's ``_Py_c_quot``; the complex functions are those of the CUDA prelude
(``targets/cuda/revdiff_cuda.h``), so the CPU and the GPU compute them with the same formulas.
"""
from __future__ import annotations

from revdiff.targets.llvm import lane_copy
from revdiff.targets.llvm.values import float_constant

#: C library functions of one floating argument, by their name in the function table; ``f``-suffixed
#: for float32 (``sinf``). sqrt and fabs are LLVM intrinsics (exact), the rest calls into libm.
LIBM_UNARY = {"sin": "sin", "cos": "cos", "tan": "tan", "exp": "exp", "log": "log", "log2": "log2",
              "log10": "log10", "log1p": "log1p", "expm1": "expm1", "sinh": "sinh", "cosh": "cosh",
              "tanh": "tanh", "atan": "atan", "asin": "asin", "acos": "acos", "asinh": "asinh",
              "acosh": "acosh", "atanh": "atanh", "erf": "erf", "erfc": "erfc"}
LIBM_BINARY = {"atan2": "atan2", "hypot": "hypot", "pow": "pow", "fmod": "fmod", "copysign": "copysign"}
INTRINSIC_UNARY = {"sqrt": "llvm.sqrt", "fabs": "llvm.fabs", "floor": "llvm.floor", "rint": "llvm.rint"}

_SUFFIX = {"double": "f64", "float": "f32"}


def libm(name: str, t: str) -> str:
    """The symbol of C function ``name`` for floating type ``t``."""
    return name if t == "double" else name + "f"


def declarations(used: set) -> list:
    """``declare`` lines of the C functions and intrinsics in ``used`` ((name, type) pairs)."""
    out = []
    for name, t in sorted(used):
        if name in INTRINSIC_UNARY:
            out.append(f"declare {t} @{INTRINSIC_UNARY[name]}.{_SUFFIX[t]}({t})")
        elif name in LIBM_BINARY:
            out.append(f"declare {t} @{libm(name, t)}({t}, {t})")
        elif name in LIBM_UNARY.values():
            out.append(f"declare {t} @{libm(name, t)}({t})")
        elif name == "malloc":
            out.append("declare ptr @malloc(i64)")
        elif name == "calloc":
            out.append("declare ptr @calloc(i64, i64)")
        elif name == "free":
            out.append("declare void @free(ptr)")
        elif name == "smax":
            out.append("declare i64 @llvm.smax.i64(i64, i64)")
        elif name == "memset":
            out.append("declare void @llvm.memset.p0.i64(ptr, i8, i64, i1)")
        else:
            raise KeyError(name)
    return out


def _fn(t: str, name: str) -> str:
    return f"@rd_{name}_{_SUFFIX[t]}"


def helper_name(name: str, t: str) -> str:
    """The symbol of helper ``name`` for floating type ``t`` (``i64`` for the integer ones)."""
    return f"@rd_{name}_i64" if t == "i64" else _fn(t, name)


def _c(t: str, x: float) -> str:
    """A floating constant of type ``t`` as LLVM writes it (float constants in double's hex form)."""
    return float_constant(x, t)


def _int_helpers() -> dict:
    floordiv = """define internal i64 @rd_floordiv_i64(i64 %a, i64 %b) alwaysinline {
entry:
  %zero = icmp eq i64 %b, 0
  %m1 = icmp eq i64 %b, -1
  %special = or i1 %zero, %m1
  br i1 %special, label %sp, label %div
sp:
  %neg = sub i64 0, %a
  %r0 = select i1 %zero, i64 0, i64 %neg
  ret i64 %r0
div:
  %q = sdiv i64 %a, %b
  %r = srem i64 %a, %b
  %rnz = icmp ne i64 %r, 0
  %an = icmp slt i64 %a, 0
  %bn = icmp slt i64 %b, 0
  %diff = xor i1 %an, %bn
  %adj = and i1 %rnz, %diff
  %q1 = sub i64 %q, 1
  %res = select i1 %adj, i64 %q1, i64 %q
  ret i64 %res
}"""
    mod = """define internal i64 @rd_mod_i64(i64 %a, i64 %b) alwaysinline {
entry:
  %zero = icmp eq i64 %b, 0
  %m1 = icmp eq i64 %b, -1
  %special = or i1 %zero, %m1
  br i1 %special, label %sp, label %div
sp:
  ret i64 0
div:
  %r = srem i64 %a, %b
  %rnz = icmp ne i64 %r, 0
  %rn = icmp slt i64 %r, 0
  %bn = icmp slt i64 %b, 0
  %diff = xor i1 %rn, %bn
  %adj = and i1 %rnz, %diff
  %rb = add i64 %r, %b
  %res = select i1 %adj, i64 %rb, i64 %r
  ret i64 %res
}"""
    power = """define internal i64 @rd_pow_i64(i64 %x, i64 %n) {
entry:
  br label %loop
loop:
  %k = phi i64 [%n, %entry], [%k2, %body]
  %r = phi i64 [1, %entry], [%r2, %body]
  %b = phi i64 [%x, %entry], [%b2, %body]
  %more = icmp sgt i64 %k, 0
  br i1 %more, label %body, label %done
body:
  %bit = and i64 %k, 1
  %odd = icmp ne i64 %bit, 0
  %rb = mul i64 %r, %b
  %r2 = select i1 %odd, i64 %rb, i64 %r
  %b2 = mul i64 %b, %b
  %k2 = ashr i64 %k, 1
  br label %loop
done:
  ret i64 %r
}"""
    trip = """define internal i64 @rd_trip_count_i64(i64 %start, i64 %stop, i64 %step) alwaysinline {
entry:
  %up = icmp sgt i64 %step, 0
  br i1 %up, label %pos, label %neg
pos:
  %more = icmp sgt i64 %stop, %start
  %d = sub i64 %stop, %start
  %d1 = add i64 %d, %step
  %d2 = sub i64 %d1, 1
  %n = sdiv i64 %d2, %step
  %rp = select i1 %more, i64 %n, i64 0
  ret i64 %rp
neg:
  %zero = icmp eq i64 %step, 0
  %less = icmp sgt i64 %start, %stop
  %e = sub i64 %start, %stop
  %e1 = sub i64 %e, %step
  %e2 = sub i64 %e1, 1
  %ms = sub i64 0, %step
  %safe = select i1 %zero, i64 1, i64 %ms
  %m = sdiv i64 %e2, %safe
  %ok = and i1 %less, true
  %rn0 = select i1 %ok, i64 %m, i64 0
  %rn = select i1 %zero, i64 0, i64 %rn0
  ret i64 %rn
}"""
    return {"floordiv:i64": (floordiv, set()), "mod:i64": (mod, set()), "pow:i64": (power, set()),
            "trip_count:i64": (trip, set())}


def _float_helpers(t: str) -> dict:
    s = _SUFFIX[t]
    fmod, floor = f"@{libm('fmod', t)}", f"@llvm.floor.{s}"
    divmod_body = f"""  %mod = call {t} {fmod}({t} %a, {t} %b)
  %amod = fsub {t} %a, %mod
  %div = fdiv {t} %amod, %b
  %modnz = fcmp une {t} %mod, {_c(t, 0.0)}
  %bneg = fcmp olt {t} %b, {_c(t, 0.0)}
  %modneg = fcmp olt {t} %mod, {_c(t, 0.0)}
  %signs = xor i1 %bneg, %modneg
  %adj = and i1 %modnz, %signs
  %modb = fadd {t} %mod, %b
  %div1 = fsub {t} %div, {_c(t, 1.0)}
  %mod2 = select i1 %adj, {t} %modb, {t} %mod
  %div2 = select i1 %adj, {t} %div1, {t} %div
  %zz = fmul {t} %mod, %mod
  %nzz = fneg {t} %zz
  %mod0 = select i1 %bneg, {t} %nzz, {t} %zz
  %modr = select i1 %modnz, {t} %mod2, {t} %mod0
  %divnz = fcmp une {t} %div2, {_c(t, 0.0)}
  %fl = call {t} {floor}({t} %div2)
  %frac = fsub {t} %div2, %fl
  %up = fcmp ogt {t} %frac, {_c(t, 0.5)}
  %fl1 = fadd {t} %fl, {_c(t, 1.0)}
  %snapped = select i1 %up, {t} %fl1, {t} %fl
  %dd = fmul {t} %div2, %div2
  %dv = fmul {t} %dd, %a
  %signed0 = fdiv {t} %dv, %b
  %floordiv = select i1 %divnz, {t} %snapped, {t} %signed0"""
    mod = f"define internal {t} {_fn(t, 'mod')}({t} %a, {t} %b) alwaysinline {{\nentry:\n{divmod_body}\n  ret {t} %modr\n}}"
    floordiv = (f"define internal {t} {_fn(t, 'floordiv')}({t} %a, {t} %b) alwaysinline {{\nentry:\n{divmod_body}\n"
                f"  ret {t} %floordiv\n}}")
    uses = {("fmod", t), ("floor", t)}
    powi = f"""define internal {t} {_fn(t, 'powi')}({t} %x, i64 %n) {{
entry:
  %big = icmp sgt i64 %n, 65536
  %small = icmp slt i64 %n, -65536
  %far = or i1 %big, %small
  br i1 %far, label %generic, label %start
generic:
  %nf = sitofp i64 %n to {t}
  %p = call {t} @{libm('pow', t)}({t} %x, {t} %nf)
  ret {t} %p
start:
  %inv = icmp slt i64 %n, 0
  %mn = sub i64 0, %n
  %k0 = select i1 %inv, i64 %mn, i64 %n
  br label %loop
loop:
  %k = phi i64 [%k0, %start], [%k2, %body]
  %r = phi {t} [{_c(t, 1.0)}, %start], [%r2, %body]
  %b = phi {t} [%x, %start], [%b2, %body]
  %more = icmp ne i64 %k, 0
  br i1 %more, label %body, label %done
body:
  %bit = and i64 %k, 1
  %odd = icmp ne i64 %bit, 0
  %rb = fmul {t} %r, %b
  %r2 = select i1 %odd, {t} %rb, {t} %r
  %b2 = fmul {t} %b, %b
  %k2 = lshr i64 %k, 1
  br label %loop
done:
  %rinv = fdiv {t} {_c(t, 1.0)}, %r
  %res = select i1 %inv, {t} %rinv, {t} %r
  ret {t} %res
}}"""
    c = f"{{{t}, {t}}}"

    def cfn(name: str, body: str, args: str = f"{t} %x, {t} %y") -> str:
        return f"define internal {c} {_fn(t, name)}({args}) {{\nentry:\n{body}\n}}"

    def pack(re: str, im: str) -> str:
        return (f"  %pk0 = insertvalue {c} undef, {t} {re}, 0\n  %pk1 = insertvalue {c} %pk0, {t} {im}, 1\n"
                f"  ret {c} %pk1")

    L = lambda name: f"@{libm(name, t)}"  # noqa: E731
    zero, one, two = _c(t, 0.0), _c(t, 1.0), _c(t, 2.0)
    # CPython's _Py_c_quot: a / b by the larger part of b
    cdiv = cfn("cdiv", f"""  %abr = call {t} @llvm.fabs.{s}({t} %br)
  %abi = call {t} @llvm.fabs.{s}({t} %bi)
  %byre = fcmp oge {t} %abr, %abi
  br i1 %byre, label %re, label %im
re:
  %brz = fcmp oeq {t} %br, {zero}
  br i1 %brz, label %nan, label %re2
re2:
  %r1 = fdiv {t} %bi, %br
  %t1 = fmul {t} %bi, %r1
  %d1 = fadd {t} %br, %t1
  %u1 = fmul {t} %ai, %r1
  %n1 = fadd {t} %ar, %u1
  %q1 = fdiv {t} %n1, %d1
  %v1 = fmul {t} %ar, %r1
  %m1 = fsub {t} %ai, %v1
  %p1 = fdiv {t} %m1, %d1
  %x0 = insertvalue {c} undef, {t} %q1, 0
  %x1 = insertvalue {c} %x0, {t} %p1, 1
  ret {c} %x1
im:
  %biz = fcmp oeq {t} %bi, {zero}
  br i1 %biz, label %nan, label %im2
im2:
  %r2 = fdiv {t} %br, %bi
  %t2 = fmul {t} %br, %r2
  %d2 = fadd {t} %t2, %bi
  %u2 = fmul {t} %ar, %r2
  %n2 = fadd {t} %u2, %ai
  %q2 = fdiv {t} %n2, %d2
  %v2 = fmul {t} %ai, %r2
  %m2 = fsub {t} %v2, %ar
  %p2 = fdiv {t} %m2, %d2
  %y0 = insertvalue {c} undef, {t} %q2, 0
  %y1 = insertvalue {c} %y0, {t} %p2, 1
  ret {c} %y1
nan:
  %nn = fdiv {t} {zero}, {zero}
  %z0 = insertvalue {c} undef, {t} %nn, 0
  %z1 = insertvalue {c} %z0, {t} %nn, 1
  ret {c} %z1""", f"{t} %ar, {t} %ai, {t} %br, {t} %bi")
    cexp = cfn("cexp", f"""  %e = call {t} {L('exp')}({t} %x)
  %c = call {t} {L('cos')}({t} %y)
  %s = call {t} {L('sin')}({t} %y)
  %re = fmul {t} %e, %c
  %im = fmul {t} %e, %s
{pack('%re', '%im')}""")
    clog = cfn("clog", f"""  %h = call {t} {L('hypot')}({t} %x, {t} %y)
  %re = call {t} {L('log')}({t} %h)
  %im = call {t} {L('atan2')}({t} %y, {t} %x)
{pack('%re', '%im')}""")
    csqrt = cfn("csqrt", f"""  %r = call {t} {L('hypot')}({t} %x, {t} %y)
  %ax = call {t} @llvm.fabs.{s}({t} %x)
  %sum = fadd {t} %r, %ax
  %half = fdiv {t} %sum, {two}
  %sq = call {t} @llvm.sqrt.{s}({t} %half)
  %sz = fcmp oeq {t} %sq, {zero}
  br i1 %sz, label %zero, label %nz
zero:
{pack(zero, zero).replace('%pk', '%zk')}
nz:
  %xpos = fcmp oge {t} %x, {zero}
  %two_s = fmul {t} {two}, %sq
  br i1 %xpos, label %pos, label %neg
pos:
  %im1 = fdiv {t} %y, %two_s
{pack('%sq', '%im1')}
neg:
  %ay = call {t} @llvm.fabs.{s}({t} %y)
  %re2 = fdiv {t} %ay, %two_s
  %ypos = fcmp oge {t} %y, {zero}
  %ms = fneg {t} %sq
  %im2 = select i1 %ypos, {t} %sq, {t} %ms
{pack('%re2', '%im2').replace('%pk', '%qk')}""")
    csin = cfn("csin", f"""  %a = call {t} {L('sin')}({t} %x)
  %b = call {t} {L('cosh')}({t} %y)
  %c = call {t} {L('cos')}({t} %x)
  %d = call {t} {L('sinh')}({t} %y)
  %re = fmul {t} %a, %b
  %im = fmul {t} %c, %d
{pack('%re', '%im')}""")
    ccos = cfn("ccos", f"""  %a = call {t} {L('cos')}({t} %x)
  %b = call {t} {L('cosh')}({t} %y)
  %c = call {t} {L('sin')}({t} %x)
  %d = call {t} {L('sinh')}({t} %y)
  %re = fmul {t} %a, %b
  %p = fmul {t} %c, %d
  %im = fneg {t} %p
{pack('%re', '%im')}""")
    csinh = cfn("csinh", f"""  %a = call {t} {L('sinh')}({t} %x)
  %b = call {t} {L('cos')}({t} %y)
  %c = call {t} {L('cosh')}({t} %x)
  %d = call {t} {L('sin')}({t} %y)
  %re = fmul {t} %a, %b
  %im = fmul {t} %c, %d
{pack('%re', '%im')}""")
    ccosh = cfn("ccosh", f"""  %a = call {t} {L('cosh')}({t} %x)
  %b = call {t} {L('cos')}({t} %y)
  %c = call {t} {L('sinh')}({t} %x)
  %d = call {t} {L('sin')}({t} %y)
  %re = fmul {t} %a, %b
  %im = fmul {t} %c, %d
{pack('%re', '%im')}""")
    # Kahan's formula; |x| > 22: tanh x rounds to +-1, the imaginary part 4 sin y cos y e^(-2|x|)
    ctanh = cfn("ctanh", f"""  %ax = call {t} @llvm.fabs.{s}({t} %x)
  %far = fcmp ogt {t} %ax, {_c(t, 22.0)}
  br i1 %far, label %farpath, label %nearpath
farpath:
  %one = call {t} {L('copysign')}({t} {one}, {t} %x)
  %sy = call {t} {L('sin')}({t} %y)
  %cy = call {t} {L('cos')}({t} %y)
  %f4 = fmul {t} {_c(t, 4.0)}, %sy
  %f4c = fmul {t} %f4, %cy
  %m2 = fmul {t} {_c(t, -2.0)}, %ax
  %ex = call {t} {L('exp')}({t} %m2)
  %fim = fmul {t} %f4c, %ex
{pack('%one', '%fim').replace('%pk', '%fk')}
nearpath:
  %tn = call {t} {L('tan')}({t} %y)
  %tt = fmul {t} %tn, %tn
  %beta = fadd {t} {one}, %tt
  %sh = call {t} {L('sinh')}({t} %x)
  %ss = fmul {t} %sh, %sh
  %ss1 = fadd {t} {one}, %ss
  %rho = call {t} @llvm.sqrt.{s}({t} %ss1)
  %bs = fmul {t} %beta, %ss
  %den = fadd {t} {one}, %bs
  %br = fmul {t} %beta, %rho
  %brs = fmul {t} %br, %sh
  %re = fdiv {t} %brs, %den
  %im = fdiv {t} %tn, %den
{pack('%re', '%im')}""")
    ctan = cfn("ctan", f"""  %mx = fneg {t} %y
  %h = call {c} {_fn(t, 'ctanh')}({t} %mx, {t} %x)
  %hr = extractvalue {c} %h, 0
  %hi = extractvalue {c} %h, 1
  %nhr = fneg {t} %hr
{pack('%hi', '%nhr')}""")
    catan = cfn("catan", f"""  %ax = call {t} @llvm.fabs.{s}({t} %x)
  %ay = call {t} @llvm.fabs.{s}({t} %y)
  %bx = fcmp ogt {t} %ax, {_c(t, 1e18)}
  %by = fcmp ogt {t} %ay, {_c(t, 1e18)}
  %far = or i1 %bx, %by
  br i1 %far, label %farpath, label %nearpath
farpath:
  %h = call {t} {L('hypot')}({t} %x, {t} %y)
  %re0 = call {t} {L('copysign')}({t} {_c(t, 1.5707963267948966)}, {t} %x)
  %q = fdiv {t} %y, %h
  %im0 = fdiv {t} %q, %h
{pack('%re0', '%im0').replace('%pk', '%fk')}
nearpath:
  %x2 = fmul {t} {two}, %x
  %a1 = fsub {t} {one}, %y
  %a2 = fadd {t} {one}, %y
  %a3 = fmul {t} %a1, %a2
  %xx = fmul {t} %x, %x
  %d = fsub {t} %a3, %xx
  %at = call {t} {L('atan2')}({t} %x2, {t} %d)
  %re = fdiv {t} %at, {two}
  %y4 = fmul {t} {_c(t, 4.0)}, %y
  %b2 = fmul {t} %a1, %a1
  %den = fadd {t} %xx, %b2
  %ratio = fdiv {t} %y4, %den
  %lp = call {t} {L('log1p')}({t} %ratio)
  %im = fdiv {t} %lp, {_c(t, 4.0)}
{pack('%re', '%im')}""")
    # z ** w = exp(w log z); 0 ** w is 1 for w = 0, else 0 (Re w > 0: the domain check)
    cpow = cfn("cpow", f"""  %zr0 = fcmp oeq {t} %zr, {zero}
  %zi0 = fcmp oeq {t} %zi, {zero}
  %z0 = and i1 %zr0, %zi0
  br i1 %z0, label %zero, label %general
zero:
  %wr0 = fcmp oeq {t} %wr, {zero}
  %wi0 = fcmp oeq {t} %wi, {zero}
  %w0 = and i1 %wr0, %wi0
  %v = select i1 %w0, {t} {one}, {t} {zero}
{pack('%v', zero).replace('%pk', '%zk')}
general:
  %l = call {c} {_fn(t, 'clog')}({t} %zr, {t} %zi)
  %lr = extractvalue {c} %l, 0
  %li = extractvalue {c} %l, 1
  %p1 = fmul {t} %wr, %lr
  %p2 = fmul {t} %wi, %li
  %er = fsub {t} %p1, %p2
  %p3 = fmul {t} %wr, %li
  %p4 = fmul {t} %wi, %lr
  %ei = fadd {t} %p3, %p4
  %r = call {c} {_fn(t, 'cexp')}({t} %er, {t} %ei)
  ret {c} %r""", f"{t} %zr, {t} %zi, {t} %wr, {t} %wi")
    fns = {"exp": "exp", "cos": "cos", "sin": "sin", "cosh": "cosh", "sinh": "sinh", "log": "log",
           "tan": "tan", "log1p": "log1p"}
    libm_uses = {(v, t) for v in fns.values()} | {("hypot", t), ("atan2", t), ("copysign", t), ("sqrt", t),
                                                   ("fabs", t)}
    return {f"mod:{t}": (mod, uses), f"floordiv:{t}": (floordiv, uses), f"powi:{t}": (powi, {("pow", t)}),
            f"cdiv:{t}": (cdiv, {("fabs", t)}), f"cexp:{t}": (cexp, libm_uses), f"clog:{t}": (clog, libm_uses),
            f"csqrt:{t}": (csqrt, libm_uses), f"csin:{t}": (csin, libm_uses), f"ccos:{t}": (ccos, libm_uses),
            f"csinh:{t}": (csinh, libm_uses), f"ccosh:{t}": (ccosh, libm_uses),
            f"ctanh:{t}": (ctanh, libm_uses), f"ctan:{t}": (ctan, libm_uses | {"ctanh"}),
            f"catan:{t}": (catan, libm_uses), f"cpow:{t}": (cpow, libm_uses | {"clog", "cexp"})}


HELPERS: dict = {**_int_helpers(), **_float_helpers("double"), **_float_helpers("float"), **lane_copy.helpers()}


def helper_definitions(used: set) -> tuple:
    """(definitions, C functions they call) of the helpers ``used`` (keys "name:type") and of the
    helpers those call, each once."""
    todo, seen, texts, calls = sorted(used), set(), [], set()
    while todo:
        key = todo.pop()
        if key in seen:
            continue
        seen.add(key)
        text, uses = HELPERS[key]
        texts.append(text)
        t = key.split(":")[1]
        for u in uses:
            if isinstance(u, str):  # another helper of the same type
                todo.append(f"{u}:{t}")
            else:
                calls.add(u)
    return texts, calls
