"""LLVM IR of the BLAS routines CPU programs call for vector instructions on large real views
(``host.py`` says what each does and why): the column-major form of a view, contiguous copies, the
32-bit Fortran calls of SciPy's ``?gemv``/``?gemm``, and the five routines on top of them."""
from __future__ import annotations

from revdiff.targets.llvm.values import float_constant

_INT32_MAX = 2 ** 31 - 1
_T = {"float64": "double", "float32": "float"}
_LETTER = {"float64": "d", "float32": "s"}
_ITEM = {"float64": 8, "float32": 4}


class _Writer:
    """Lines of one function's body and fresh SSA names."""

    def __init__(self):
        self.lines: list = []
        self.k = 0

    def __call__(self, text: str) -> str:
        self.k += 1
        name = f"%v{self.k}"
        self.lines.append(f"  {name} = {text}")
        return name

    def do(self, text: str) -> None:
        self.lines.append("  " + text)

    def label(self, name: str) -> None:
        self.lines.append(f"{name}:")


def _vector(name: str) -> str:
    return f"ptr %{name}, i64 %{name}.n, i64 %{name}.s"


def _matrix(name: str) -> str:
    return f"ptr %{name}, i64 %{name}.r, i64 %{name}.c, i64 %{name}.s0, i64 %{name}.s1"


def common(dtype: str) -> str:
    """Helpers every routine of ``dtype`` shares: the column-major form of a matrix view, a vector's
    contiguous copy, the BLAS calls with their 32-bit arguments."""
    t, x, item = _T[dtype], _LETTER[dtype], _ITEM[dtype]
    return f"""define internal {{i1, i64}} @rd_colmajor_{x}(i64 %r, i64 %c, i64 %s0, i64 %s1) alwaysinline {{
entry:
  %c1 = icmp eq i64 %s1, {item}
  %m0 = srem i64 %s0, {item}
  %m0z = icmp eq i64 %m0, 0
  %q0 = sdiv i64 %s0, {item}
  %cmax = call i64 @llvm.smax.i64(i64 %c, i64 1)
  %big0 = icmp sge i64 %q0, %cmax
  %a0 = and i1 %c1, %m0z
  %rowmajor = and i1 %a0, %big0
  %c2 = icmp eq i64 %s0, {item}
  %m1 = srem i64 %s1, {item}
  %m1z = icmp eq i64 %m1, 0
  %q1 = sdiv i64 %s1, {item}
  %rmax = call i64 @llvm.smax.i64(i64 %r, i64 1)
  %big1 = icmp sge i64 %q1, %rmax
  %a1 = and i1 %c2, %m1z
  %colmajor = and i1 %a1, %big1
  %ld1 = select i1 %colmajor, i64 %q1, i64 0
  %ld = select i1 %rowmajor, i64 %q0, i64 %ld1
  %fits = icmp sle i64 %ld, {_INT32_MAX}
  %ldf = select i1 %fits, i64 %ld, i64 0
  %p0 = insertvalue {{i1, i64}} undef, i1 %rowmajor, 0
  %p1 = insertvalue {{i1, i64}} %p0, i64 %ldf, 1
  ret {{i1, i64}} %p1
}}

define internal ptr @rd_contiguous_{x}(ptr %v, i64 %n, i64 %s) alwaysinline {{
entry:
  %unit = icmp eq i64 %s, {item}
  br i1 %unit, label %same, label %copy
same:
  ret ptr %v
copy:
  %bytes = mul i64 %n, {item}
  %m = call ptr @malloc(i64 %bytes)
  %null = icmp eq ptr %m, null
  br i1 %null, label %none, label %loop0
none:
  ret ptr null
loop0:
  br label %loop
loop:
  %i = phi i64 [0, %loop0], [%i1, %loop]
  %src = mul i64 %i, %s
  %from = getelementptr i8, ptr %v, i64 %src
  %val = load {t}, ptr %from, align 1
  %to = getelementptr {t}, ptr %m, i64 %i
  store {t} %val, ptr %to
  %i1 = add i64 %i, 1
  %more = icmp slt i64 %i1, %n
  br i1 %more, label %loop, label %done
done:
  ret ptr %m
}}

define internal void @rd_release_{x}(ptr %copy, ptr %v) alwaysinline {{
entry:
  %own = icmp ne ptr %copy, %v
  br i1 %own, label %free, label %done
free:
  call void @free(ptr %copy)
  br label %done
done:
  ret void
}}

define internal i1 @rd_fits_{x}(i64 %a, i64 %b, i64 %c) alwaysinline {{
entry:
  %fa = icmp sle i64 %a, {_INT32_MAX}
  %fb = icmp sle i64 %b, {_INT32_MAX}
  %fc = icmp sle i64 %c, {_INT32_MAX}
  %ab = and i1 %fa, %fb
  %abc = and i1 %ab, %fc
  ret i1 %abc
}}

define internal void @rd_gemv_{x}(i8 %trans, i64 %m, i64 %n, {t} %alpha, ptr %a, i64 %lda, ptr %xv, {t} %beta, ptr %y) {{
entry:
  %tr = alloca i8
  %mm = alloca i32
  %nn = alloca i32
  %al = alloca {t}
  %ld = alloca i32
  %inc = alloca i32
  %be = alloca {t}
  store i8 %trans, ptr %tr
  %m32 = trunc i64 %m to i32
  store i32 %m32, ptr %mm
  %n32 = trunc i64 %n to i32
  store i32 %n32, ptr %nn
  store {t} %alpha, ptr %al
  %l32 = trunc i64 %lda to i32
  store i32 %l32, ptr %ld
  store i32 1, ptr %inc
  store {t} %beta, ptr %be
  call void @revdiff_{x}gemv(ptr %tr, ptr %mm, ptr %nn, ptr %al, ptr %a, ptr %ld, ptr %xv, ptr %inc, ptr %be, ptr %y, ptr %inc)
  ret void
}}

define internal void @rd_gemm_{x}(i8 %ta, i8 %tb, i64 %m, i64 %n, i64 %k, {t} %alpha, ptr %a, i64 %lda, ptr %b, i64 %ldb, {t} %beta, ptr %c, i64 %ldc) {{
entry:
  %pa = alloca i8
  %pb = alloca i8
  %mm = alloca i32
  %nn = alloca i32
  %kk = alloca i32
  %al = alloca {t}
  %la = alloca i32
  %lb = alloca i32
  %be = alloca {t}
  %lc = alloca i32
  store i8 %ta, ptr %pa
  store i8 %tb, ptr %pb
  %m32 = trunc i64 %m to i32
  store i32 %m32, ptr %mm
  %n32 = trunc i64 %n to i32
  store i32 %n32, ptr %nn
  %k32 = trunc i64 %k to i32
  store i32 %k32, ptr %kk
  store {t} %alpha, ptr %al
  %a32 = trunc i64 %lda to i32
  store i32 %a32, ptr %la
  %b32 = trunc i64 %ldb to i32
  store i32 %b32, ptr %lb
  store {t} %beta, ptr %be
  %c32 = trunc i64 %ldc to i32
  store i32 %c32, ptr %lc
  call void @revdiff_{x}gemm(ptr %pa, ptr %pb, ptr %mm, ptr %nn, ptr %kk, ptr %al, ptr %a, ptr %la, ptr %b, ptr %lb, ptr %be, ptr %c, ptr %lc)
  ret void
}}

; out = alpha op(M) x + beta out, op(M) = M^T when %tr; out and x contiguous. False: M not BLAS-shaped
define internal i1 @rd_product_{x}(ptr %out, {_matrix('M')}, ptr %xv, i1 %tr, {t} %alpha, {t} %beta) {{
entry:
  %cm = call {{i1, i64}} @rd_colmajor_{x}(i64 %M.r, i64 %M.c, i64 %M.s0, i64 %M.s1)
  %st = extractvalue {{i1, i64}} %cm, 0
  %ld = extractvalue {{i1, i64}} %cm, 1
  %fits = call i1 @rd_fits_{x}(i64 %M.r, i64 %M.c, i64 1)
  %has = icmp ne i64 %ld, 0
  %ok = and i1 %has, %fits
  br i1 %ok, label %go, label %no
no:
  ret i1 false
go:
  %m = select i1 %st, i64 %M.c, i64 %M.r
  %n = select i1 %st, i64 %M.r, i64 %M.c
  %same = icmp eq i1 %st, %tr
  %trans = select i1 %same, i8 110, i8 116
  call void @rd_gemv_{x}(i8 %trans, i64 %m, i64 %n, {t} %alpha, ptr %M, i64 %ld, ptr %xv, {t} %beta, ptr %out)
  ret i1 true
}}

; (BLAS transposition letter, ld) that make column-major BLAS read M^T (%want) or M; ld 0: no way
define internal {{i8, i64}} @rd_as_stored_{x}({_matrix('M')}, i1 %want) alwaysinline {{
entry:
  %cm = call {{i1, i64}} @rd_colmajor_{x}(i64 %M.r, i64 %M.c, i64 %M.s0, i64 %M.s1)
  %st = extractvalue {{i1, i64}} %cm, 0
  %ld = extractvalue {{i1, i64}} %cm, 1
  %same = icmp eq i1 %st, %want
  %letter = select i1 %same, i8 110, i8 116
  %p0 = insertvalue {{i8, i64}} undef, i8 %letter, 0
  %p1 = insertvalue {{i8, i64}} %p0, i64 %ld, 1
  ret {{i8, i64}} %p1
}}
"""


def _usable(w: _Writer, sizes: list) -> str:
    """An i1: every size positive (non-empty views)."""
    ok = "true"
    for s in sizes:
        ok = w(f"and i1 {ok}, {w(f'icmp sgt i64 {s}, 0')}")
    return ok


def _add_loop(w: _Writer, t: str, target: str, n: str, stride: str, source: str, op: str, scale: str | None = None) -> None:
    """``target[i*stride] op= scale * source[i]`` for i < n (source contiguous)."""
    w.k += 1
    k = w.k
    pre, head, body, done = f"pre{k}", f"head{k}", f"body{k}", f"done{k}"
    w.do(f"br label %{pre}")
    w.label(pre)
    w.do(f"br label %{head}")
    w.label(head)
    i = w(f"phi i64 [0, %{pre}], [%next{k}, %{body}]")
    w.do(f"br i1 {w(f'icmp slt i64 {i}, {n}')}, label %{body}, label %{done}")
    w.label(body)
    src = w(f"load {t}, ptr {w(f'getelementptr {t}, ptr {source}, i64 {i}')}")
    if scale is not None:
        src = w(f"fmul {t} {scale}, {src}")
    at = w(f"getelementptr i8, ptr {target}, i64 {w(f'mul i64 {i}, {stride}')}")
    old = w(f"load {t}, ptr {at}, align 1")
    w.do(f"store {t} {w(f'{op} {t} {old}, {src}')}, ptr {at}, align 1")
    w.do(f"%next{k} = add i64 {i}, 1")
    w.do(f"br label %{head}")
    w.label(done)


def routine_definitions(dtype: str) -> dict:
    """{routine: LLVM definition} for views of ``dtype`` (float32 or float64)."""
    t, x, item = _T[dtype], _LETTER[dtype], _ITEM[dtype]
    one, zero = float_constant(1.0, t), float_constant(0.0, t)
    out = {}

    # y += sign op(M) x, through a scratch product t
    w = _Writer()
    w.label("entry")
    usable = _usable(w, ["%y.n", "%M.r", "%M.c", "%x.n"])
    w.do(f"br i1 {usable}, label %alloc, label %no")
    w.label("no")
    w.do("ret i1 false")
    w.label("alloc")
    tmp = w(f"call ptr @malloc(i64 {w(f'mul i64 %y.n, {item}')})")
    xc = w(f"call ptr @rd_contiguous_{x}(ptr %x, i64 %x.n, i64 %x.s)")
    missing = w(f"or i1 {w(f'icmp eq ptr {tmp}, null')}, {w(f'icmp eq ptr {xc}, null')}")
    w.do(f"br i1 {missing}, label %nomem, label %prod")
    w.label("nomem")
    w.do(f"call void @free(ptr {tmp})")
    w.do(f"call void @rd_release_{x}(ptr {xc}, ptr %x)")
    w.do("ret i1 false")
    w.label("prod")
    ok = w(f"call i1 @rd_product_{x}(ptr {tmp}, ptr %M, i64 %M.r, i64 %M.c, i64 %M.s0, i64 %M.s1, ptr {xc}, i1 %tr, {t} {one}, {t} {zero})")
    w.do(f"call void @rd_release_{x}(ptr {xc}, ptr %x)")
    w.do(f"br i1 {ok}, label %add, label %declined")
    w.label("declined")
    w.do(f"call void @free(ptr {tmp})")
    w.do("ret i1 false")
    w.label("add")
    w.do("br i1 %positive, label %plus, label %minus")
    w.label("plus")
    _add_loop(w, t, "%y", "%y.n", "%y.s", tmp, "fadd")
    w.do("br label %end")
    w.label("minus")
    _add_loop(w, t, "%y", "%y.n", "%y.s", tmp, "fsub")
    w.do("br label %end")
    w.label("end")
    w.do(f"call void @free(ptr {tmp})")
    w.do("ret i1 true")
    out["matvec"] = (f"define internal i1 @rd_matvec_{x}({_vector('y')}, {_matrix('M')}, {_vector('x')}, i1 %tr, "
                     f"i1 %positive) {{\n" + "\n".join(w.lines) + "\n}")

    # gx += sign op(M)^T gy (real): straight into gx when it is contiguous
    w = _Writer()
    w.label("entry")
    usable = _usable(w, ["%g.n", "%M.r", "%M.c", "%d.n"])
    w.do(f"br i1 {usable}, label %go, label %no")
    w.label("no")
    w.do("ret i1 false")
    w.label("go")
    sign = w(f"select i1 %positive, {t} {one}, {t} {float_constant(-1.0, t)}")
    dc = w(f"call ptr @rd_contiguous_{x}(ptr %d, i64 %d.n, i64 %d.s)")
    w.do(f"br i1 {w(f'icmp eq ptr {dc}, null')}, label %no, label %have")
    w.label("have")
    back = w("xor i1 %tr, true")
    w.do(f"br i1 {w(f'icmp eq i64 %g.s, {item}')}, label %direct, label %scratch")
    w.label("direct")
    ok = w(f"call i1 @rd_product_{x}(ptr %g, ptr %M, i64 %M.r, i64 %M.c, i64 %M.s0, i64 %M.s1, ptr {dc}, i1 {back}, {t} {sign}, {t} {one})")
    w.do(f"call void @rd_release_{x}(ptr {dc}, ptr %d)")
    w.do(f"ret i1 {ok}")
    w.label("scratch")
    tmp = w(f"call ptr @malloc(i64 {w(f'mul i64 %g.n, {item}')})")
    w.do(f"br i1 {w(f'icmp eq ptr {tmp}, null')}, label %nomem, label %prod")
    w.label("nomem")
    w.do(f"call void @rd_release_{x}(ptr {dc}, ptr %d)")
    w.do("ret i1 false")
    w.label("prod")
    ok = w(f"call i1 @rd_product_{x}(ptr {tmp}, ptr %M, i64 %M.r, i64 %M.c, i64 %M.s0, i64 %M.s1, ptr {dc}, i1 {back}, {t} {one}, {t} {zero})")
    w.do(f"call void @rd_release_{x}(ptr {dc}, ptr %d)")
    w.do(f"br i1 {ok}, label %add, label %declined")
    w.label("declined")
    w.do(f"call void @free(ptr {tmp})")
    w.do("ret i1 false")
    w.label("add")
    _add_loop(w, t, "%g", "%g.n", "%g.s", tmp, "fadd", scale=sign)
    w.do(f"call void @free(ptr {tmp})")
    w.do("ret i1 true")
    out["matvec_input_gradient"] = (f"define internal i1 @rd_matvec_input_gradient_{x}({_vector('g')}, {_matrix('M')}, "
                                    f"{_vector('d')}, i1 %tr, i1 %positive) {{\n" + "\n".join(w.lines) + "\n}")

    # G += sign outer(u, v): a rank-1 gemm
    w = _Writer()
    w.label("entry")
    usable = _usable(w, ["%G.r", "%G.c", "%u.n", "%v.n"])
    w.do(f"br i1 {usable}, label %shape, label %no")
    w.label("no")
    w.do("ret i1 false")
    w.label("shape")
    cm = w(f"call {{i1, i64}} @rd_colmajor_{x}(i64 %G.r, i64 %G.c, i64 %G.s0, i64 %G.s1)")
    st, ld = w(f"extractvalue {{i1, i64}} {cm}, 0"), w(f"extractvalue {{i1, i64}} {cm}, 1")
    fits = w(f"call i1 @rd_fits_{x}(i64 %G.r, i64 %G.c, i64 1)")
    has = w(f"icmp ne i64 {ld}, 0")
    w.do(f"br i1 {w(f'and i1 {fits}, {has}')}, label %go, label %no")
    w.label("go")
    first, second = w(f"select i1 {st}, ptr %v, ptr %u"), w(f"select i1 {st}, ptr %u, ptr %v")
    fn, fs = w(f"select i1 {st}, i64 %v.n, i64 %u.n"), w(f"select i1 {st}, i64 %v.s, i64 %u.s")
    sn, ss = w(f"select i1 {st}, i64 %u.n, i64 %v.n"), w(f"select i1 {st}, i64 %u.s, i64 %v.s")
    a = w(f"call ptr @rd_contiguous_{x}(ptr {first}, i64 {fn}, i64 {fs})")
    # the second vector as BLAS's increment when its stride is a positive multiple of the item, else a copy
    remainder = w(f"srem i64 {ss}, {item}")
    positive_stride = w(f"and i1 {w(f'icmp eq i64 {remainder}, 0')}, {w(f'icmp sge i64 {ss}, {item}')}")
    w.do(f"br i1 {positive_stride}, label %strided, label %copied")
    w.label("copied")
    made = w(f"call ptr @rd_contiguous_{x}(ptr {second}, i64 {sn}, i64 {ss})")
    w.do("br label %second")
    w.label("strided")
    w.do("br label %second")
    w.label("second")
    bcopy = w(f"phi ptr [{made}, %copied], [{second}, %strided]")
    b = bcopy
    inc = w(f"select i1 {positive_stride}, i64 {w(f'sdiv i64 {ss}, {item}')}, i64 1")
    missing = w(f"or i1 {w(f'icmp eq ptr {a}, null')}, {w(f'icmp eq ptr {b}, null')}")
    w.do(f"br i1 {missing}, label %nomem, label %gemm")
    w.label("nomem")
    w.do(f"call void @rd_release_{x}(ptr {a}, ptr {first})")
    w.do(f"call void @rd_release_{x}(ptr {bcopy}, ptr {second})")
    w.do("ret i1 false")
    w.label("gemm")
    sign = w(f"select i1 %positive, {t} {one}, {t} {float_constant(-1.0, t)}")
    w.do(f"call void @rd_gemm_{x}(i8 110, i8 110, i64 {fn}, i64 {sn}, i64 1, {t} {sign}, ptr {a}, i64 {fn}, "
         f"ptr {b}, i64 {inc}, {t} {one}, ptr %G, i64 {ld})")
    w.do(f"call void @rd_release_{x}(ptr {a}, ptr {first})")
    w.do(f"call void @rd_release_{x}(ptr {bcopy}, ptr {second})")
    w.do("ret i1 true")
    out["outer_update"] = (f"define internal i1 @rd_outer_update_{x}({_matrix('G')}, {_vector('u')}, {_vector('v')}, "
                           f"i1 %positive) {{\n" + "\n".join(w.lines) + "\n}")

    # Y += sign op(A) op(B) through a scratch product T (C order): column-major BLAS computes
    # T^T = op(B)^T op(A)^T
    w = _Writer()
    w.label("entry")
    usable = _usable(w, ["%Y.r", "%Y.c", "%A.r", "%A.c", "%B.r", "%B.c"])
    w.do(f"br i1 {usable}, label %shape, label %no")
    w.label("no")
    w.do("ret i1 false")
    w.label("shape")
    inner = w("select i1 %ta, i64 %A.r, i64 %A.c")
    sb = w(f"call {{i8, i64}} @rd_as_stored_{x}(ptr %B, i64 %B.r, i64 %B.c, i64 %B.s0, i64 %B.s1, i1 {w('xor i1 %tb, true')})")
    sa = w(f"call {{i8, i64}} @rd_as_stored_{x}(ptr %A, i64 %A.r, i64 %A.c, i64 %A.s0, i64 %A.s1, i1 {w('xor i1 %ta, true')})")
    trans_b, ldb = w(f"extractvalue {{i8, i64}} {sb}, 0"), w(f"extractvalue {{i8, i64}} {sb}, 1")
    trans_a, lda = w(f"extractvalue {{i8, i64}} {sa}, 0"), w(f"extractvalue {{i8, i64}} {sa}, 1")
    fits = w(f"call i1 @rd_fits_{x}(i64 %Y.r, i64 %Y.c, i64 {inner})")
    have = w(f"and i1 {w(f'icmp ne i64 {ldb}, 0')}, {w(f'icmp ne i64 {lda}, 0')}")
    w.do(f"br i1 {w(f'and i1 {have}, {fits}')}, label %alloc, label %no")
    w.label("alloc")
    entries = w("mul i64 %Y.r, %Y.c")
    tmp = w(f"call ptr @malloc(i64 {w(f'mul i64 {entries}, {item}')})")
    w.do(f"br i1 {w(f'icmp eq ptr {tmp}, null')}, label %no, label %gemm")
    w.label("gemm")
    w.do(f"call void @rd_gemm_{x}(i8 {trans_b}, i8 {trans_a}, i64 %Y.c, i64 %Y.r, i64 {inner}, {t} {one}, ptr %B, "
         f"i64 {ldb}, ptr %A, i64 {lda}, {t} {zero}, ptr {tmp}, i64 {w('call i64 @llvm.smax.i64(i64 %Y.c, i64 1)')})")
    w.do("br label %rows")
    w.label("rows")
    w.do("br label %rowhead")
    w.label("rowhead")
    i = w("phi i64 [0, %rows], [%inext, %rowend]")
    w.do(f"br i1 {w(f'icmp slt i64 {i}, %Y.r')}, label %rowbody, label %done")
    w.label("rowbody")
    rowptr = w(f"getelementptr i8, ptr %Y, i64 {w(f'mul i64 {i}, %Y.s0')}")
    trow = w(f"getelementptr {t}, ptr {tmp}, i64 {w(f'mul i64 {i}, %Y.c')}")
    w.do("br i1 %positive, label %plusrow, label %minusrow")
    w.label("plusrow")
    _add_loop(w, t, rowptr, "%Y.c", "%Y.s1", trow, "fadd")
    w.do("br label %rowend")
    w.label("minusrow")
    _add_loop(w, t, rowptr, "%Y.c", "%Y.s1", trow, "fsub")
    w.do("br label %rowend")
    w.label("rowend")
    w.lines.append(f"  %inext = add i64 {i}, 1")
    w.do("br label %rowhead")
    w.label("done")
    w.do(f"call void @free(ptr {tmp})")
    w.do("ret i1 true")
    out["matmat"] = (f"define internal i1 @rd_matmat_{x}({_matrix('Y')}, {_matrix('A')}, {_matrix('B')}, i1 %ta, "
                     f"i1 %tb, i1 %positive) {{\n" + "\n".join(w.lines) + "\n}")

    # G += sign op(A) op(B) (a gradient, real), accumulated by BLAS straight into G
    w = _Writer()
    w.label("entry")
    usable = _usable(w, ["%G.r", "%G.c", "%A.r", "%A.c", "%B.r", "%B.c"])
    w.do(f"br i1 {usable}, label %shape, label %no")
    w.label("no")
    w.do("ret i1 false")
    w.label("shape")
    cm = w(f"call {{i1, i64}} @rd_colmajor_{x}(i64 %G.r, i64 %G.c, i64 %G.s0, i64 %G.s1)")
    st, ldg = w(f"extractvalue {{i1, i64}} {cm}, 0"), w(f"extractvalue {{i1, i64}} {cm}, 1")
    inner = w("select i1 %ta, i64 %A.r, i64 %A.c")
    fits = w(f"call i1 @rd_fits_{x}(i64 %G.r, i64 %G.c, i64 {inner})")
    has = w(f"icmp ne i64 {ldg}, 0")
    w.do(f"br i1 {w(f'and i1 {fits}, {has}')}, label %go, label %no")
    w.label("go")
    sign = w(f"select i1 %positive, {t} {one}, {t} {float_constant(-1.0, t)}")
    w.do(f"br i1 {st}, label %transposed, label %plain")
    w.label("transposed")  # column-major G^T += sign op(B)^T op(A)^T
    sb = w(f"call {{i8, i64}} @rd_as_stored_{x}(ptr %B, i64 %B.r, i64 %B.c, i64 %B.s0, i64 %B.s1, i1 {w('xor i1 %tb, true')})")
    sa = w(f"call {{i8, i64}} @rd_as_stored_{x}(ptr %A, i64 %A.r, i64 %A.c, i64 %A.s0, i64 %A.s1, i1 {w('xor i1 %ta, true')})")
    tb_, ldb = w(f"extractvalue {{i8, i64}} {sb}, 0"), w(f"extractvalue {{i8, i64}} {sb}, 1")
    ta_, lda = w(f"extractvalue {{i8, i64}} {sa}, 0"), w(f"extractvalue {{i8, i64}} {sa}, 1")
    both = w(f"and i1 {w(f'icmp ne i64 {ldb}, 0')}, {w(f'icmp ne i64 {lda}, 0')}")
    w.do(f"br i1 {both}, label %gemm1, label %no")
    w.label("gemm1")
    w.do(f"call void @rd_gemm_{x}(i8 {tb_}, i8 {ta_}, i64 %G.c, i64 %G.r, i64 {inner}, {t} {sign}, ptr %B, i64 {ldb}, "
         f"ptr %A, i64 {lda}, {t} {one}, ptr %G, i64 {ldg})")
    w.do("ret i1 true")
    w.label("plain")  # column-major G += sign op(A) op(B)
    sa = w(f"call {{i8, i64}} @rd_as_stored_{x}(ptr %A, i64 %A.r, i64 %A.c, i64 %A.s0, i64 %A.s1, i1 %ta)")
    sb = w(f"call {{i8, i64}} @rd_as_stored_{x}(ptr %B, i64 %B.r, i64 %B.c, i64 %B.s0, i64 %B.s1, i1 %tb)")
    ta_, lda = w(f"extractvalue {{i8, i64}} {sa}, 0"), w(f"extractvalue {{i8, i64}} {sa}, 1")
    tb_, ldb = w(f"extractvalue {{i8, i64}} {sb}, 0"), w(f"extractvalue {{i8, i64}} {sb}, 1")
    both = w(f"and i1 {w(f'icmp ne i64 {ldb}, 0')}, {w(f'icmp ne i64 {lda}, 0')}")
    w.do(f"br i1 {both}, label %gemm2, label %no")
    w.label("gemm2")
    w.do(f"call void @rd_gemm_{x}(i8 {ta_}, i8 {tb_}, i64 %G.r, i64 %G.c, i64 {inner}, {t} {sign}, ptr %A, i64 {lda}, "
         f"ptr %B, i64 {ldb}, {t} {one}, ptr %G, i64 {ldg})")
    w.do("ret i1 true")
    out["matmat_gradient"] = (f"define internal i1 @rd_matmat_gradient_{x}({_matrix('G')}, {_matrix('A')}, {_matrix('B')}, "
                              f"i1 %ta, i1 %tb, i1 %positive) {{\n" + "\n".join(w.lines) + "\n}")
    return out
