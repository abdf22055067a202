"""Property-based tests: random well-formed reversible programs from the grammar (nested loops,
conditionals, routines, calls, ancillas) round-trip, and their pullbacks pass the inner-product test.

Programs are generated as source text, written to a file and imported, exactly as users write them.
"""
import importlib.util
import itertools
import sys
import tempfile
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import revdiff
from revdiff.calls import run
from helpers import assert_round_trip

SCALARS = ["x0", "x1", "x2"]
N = 4  # length of the array parameter a
_counter = itertools.count()
_tmpdir = Path(tempfile.mkdtemp(prefix="revdiff_random_"))

PRELUDE = """import math

import numpy as np
from revdiff import ancilla, release, reversible, rot, routine, zero, zeros


@reversible(backend="{backend}"{options})
def helper(p, q, c):
    p += np.sin(q) * c
    q *= 1.25


"""


@st.composite
def expression(draw, avoid: frozenset, depth: int = 0):
    """A smooth, bounded expression reading variables other than ``avoid``."""
    leaves = [v for v in SCALARS if v not in avoid] + [f"a[{k}]" for k in range(N) if f"a[{k}]" not in avoid]
    leaf = st.sampled_from(leaves + ["0.5", "1.25"]) if leaves else st.just("0.75")
    if depth >= 2 or draw(st.booleans()):
        return draw(leaf)
    kind = draw(st.sampled_from(["+", "*", "sin", "cos", "tanh", "exp", "arcsin", "log1p", "erf", "arcsinh"]))
    a = draw(expression(avoid, depth + 1))
    if kind in "+*":
        b = draw(expression(avoid, depth + 1))
        return f"({a} {kind} {b})"
    if kind == "exp":
        return f"np.exp(np.sin({a}))"
    if kind in ("arcsin", "log1p"):  # arguments inside the domain, away from its edges
        return f"np.{kind}(0.5 * np.tanh({a}))"
    if kind == "erf":
        return f"math.erf({a})"
    return f"np.{kind}({a})"


def targets():
    return st.sampled_from(SCALARS + [f"a[{k}]" for k in range(N)])


@st.composite
def statement(draw, depth: int, ancillas: tuple):
    choices = ["add", "sub", "mul", "div", "swap", "neg", "rot", "whole", "scale_whole", "copy", "copy_whole"]
    if depth < 2:
        choices += ["for", "if", "ifpost", "routine", "call", "invcall"]
    kind = draw(st.sampled_from(choices))
    t = draw(targets())
    if kind in ("add", "sub"):
        return [f"{t} {'+' if kind == 'add' else '-'}= {draw(expression(frozenset({t})))}"]
    if kind in ("mul", "div"):  # factors in [0.75, 1.25]: never zero, and sixteen of them in nested loops
        # grow a value at most 35-fold (factors up to 3 made sin(x0) of x0 ~ 4e7: rounding of 1e-9 and
        # finite differences that no longer approximate the derivative, whatever the rules)
        return [f"{t} {'*' if kind == 'mul' else '/'}= (1.0 + 0.25 * np.sin({draw(expression(frozenset({t})))}))"]
    if kind in ("swap", "rot"):
        u = draw(targets().filter(lambda u: u != t))
        if kind == "swap":
            return [f"{t}, {u} = {u}, {t}"]
        return [f"rot({t}, {u}, {draw(expression(frozenset({t, u})))})"]
    if kind == "neg":
        return [f"{t} = -{t}"]
    not_a = frozenset(["a"] + [f"a[{k}]" for k in range(N)])
    if kind == "whole":  # a whole-array update by an expression of the scalars (it may not read a)
        view = draw(st.sampled_from(["a[:]", "a[1:]", "a[:-1]", f"a[1:{N - 1}]"]))
        return [f"{view} {draw(st.sampled_from(['+=', '-=']))} {draw(expression(not_a))}"]
    if kind == "scale_whole":
        op = draw(st.sampled_from(["*=", "/="]))
        return [f"a[:] {op} (1.0 + 0.25 * np.sin({draw(expression(not_a))}))"]
    if kind == "copy":  # an ancilla holding a value the statement between never changes
        name, value = f"c{depth}_{len(ancillas)}", draw(expression(frozenset({t})))
        return [f"{name} = ancilla({value})", f"{t} += {name} * 0.5", f"release({name}, {value})"]
    if kind == "copy_whole":
        name = f"v{depth}_{len(ancillas)}"
        u = draw(st.sampled_from(SCALARS))
        return [f"{name} = ancilla(a[:])", f"{u} += {name}[{draw(st.integers(0, N - 1))}] * 0.5",
                f"release({name}, a[:])"]
    if kind == "for":
        var = f"i{depth}"
        start, stop, step = draw(st.sampled_from([(0, N, 1), (1, N, 2), (N - 1, -1, -1), (0, N, 3), (2, 2, 1)]))
        body = [f"a[{var}] += {draw(expression(frozenset(['a'] + [f'a[{k}]' for k in range(N)])))} * 0.5"] \
            if draw(st.booleans()) else []
        body += draw(block(depth + 1, ancillas))
        return [f"for {var} in range({start}, {stop}, {step}):"] + ["    " + line for line in body]
    if kind == "if":  # the condition reads x0, which the branches never write
        body = draw(block(depth + 1, ancillas, frozen="x0"))
        orelse = draw(block(depth + 1, ancillas, frozen="x0"))
        return ["if x0 > 0.1:"] + ["    " + s for s in body] + ["else:"] + ["    " + s for s in orelse]
    if kind == "ifpost":
        return [f"if ({t} > 0, {t} > 0):", f"    {t} *= 1.25", "else:", f"    {t} *= 1.5"]
    if kind == "routine":
        # compute reads only x2, which the body between compute and uncompute never writes
        name = f"t{depth}_{len(ancillas)}"
        src = draw(st.sampled_from(["np.sin(x2)", "x2 * x2", "np.exp(x2) * 0.5"]))
        inner = draw(block(depth + 1, ancillas + (name,), frozen="x2", reads_ancilla=name))
        return ([f"{name} = zero()", "with routine:", f"    {name} += {src}"] + inner +
                ["~routine", f"del {name}"])
    u = draw(targets().filter(lambda u: u != t))
    c = draw(expression(frozenset({t, u})))
    return [f"{'~' if kind == 'invcall' else ''}helper({t}, {u}, {c})"]


@st.composite
def block(draw, depth: int, ancillas: tuple, frozen=None, reads_ancilla=None):
    lines = []
    for stmt in draw(st.lists(statement(depth, ancillas), min_size=1, max_size=3)):
        if frozen and any(line.lstrip().startswith(frozen) or f"({frozen}," in line or f", {frozen}" in line
                          or f"{frozen} =" in line for line in stmt):
            continue
        lines += stmt
    if reads_ancilla:  # use the routine's ancilla between compute and uncompute
        t = draw(targets().filter(lambda t: t != frozen))
        lines.append(f"{t} += {reads_ancilla} * 0.5")
    return lines or ["x1 += 0.125"]


def load(body: list, backend: str, options: str = ""):
    """The program of statements ``body``; ``options``: more arguments of ``@reversible`` (", x=y")."""
    name = f"random_program_{next(_counter)}"
    src = PRELUDE.format(backend=backend, options=options) + \
        f"@reversible(backend=\"{backend}\"{options})\ndef prog(x0, x1, x2, a):\n" + \
        "\n".join("    " + line for line in body) + "\n"
    path = _tmpdir / f"{name}.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except revdiff.ReversibilityError as exc:
        raise AssertionError(f"generated program rejected:\n{src}\n{exc}") from None
    return module.prog, src


def args():
    return (0.3, -0.7, 1.1, np.array([0.5, -0.25, 0.8, 1.3]))


@settings(max_examples=60)
@given(block(0, ()))
def test_random_programs_round_trip_and_gradient(body):
    f, src = load(body, "python")
    assert_round_trip(f, *args(), rtol=1e-9, atol=1e-9)
    err = revdiff.check_grad(f, *args(), eps=1e-6)
    assert err < 1e-5, f"gradient error {err:.2e} for\n{src}"
    # the adjoint, started from the final state, recovers the initial state as it runs backwards
    outs = f(*args())
    adjoint = f.specialize(f.argument_types(outs)).callable("adjoint")
    recovered = run(adjoint, (*outs, 1.0, 0.0, 0.0, np.zeros(N)))[:4]
    for got, want in zip(recovered, args()):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-9, atol=1e-9, err_msg=src)


@settings(max_examples=5)
@given(block(0, ()))
def test_random_programs_agree_across_backends(body):
    fp, _ = load(body, "python")
    fn, src = load(body, "llvm")
    a, b = fp(*args()), fn(*args())
    for x, y in zip(a, b):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-13, atol=1e-13, err_msg=src)


@settings(max_examples=40)
@given(block(0, ()))
def test_random_programs_are_bit_for_bit_those_with_loops_as_written(body):
    """Loop fusion (``optimize/fuse_loops.py``) changes no number of the forward, inverse, pullback
    or tangent programs."""
    results = []
    for options in ("", ", fuse_loops=False"):
        f, src = load(body, "python", options)
        outs = f(*args())
        grads = revdiff.vjp(f, *args())[1](1.0, -0.5, 0.25, np.linspace(-1.0, 1.0, N))
        tangents = revdiff.jvp(f, args(), (0.5, 0.25, -1.0, np.linspace(1.0, 2.0, N)))[1]
        results.append([np.asarray(x) for x in (*outs, *(~f)(*outs), *grads, *tangents)])
    for got, want in zip(*results):
        assert np.array_equal(got, want, equal_nan=True), src


@settings(max_examples=25)
@given(block(0, ()))
def test_random_programs_jvp_is_the_transpose_of_the_pullback(body):
    """<u, J v> from the tangent program equals <J^T u, v> from the pullback, and the Hessian of
    x0's final value is symmetric: <u, H v> = <v, H u>."""
    f, src = load(body, "python")
    rng = np.random.default_rng(len(src))
    v = (*rng.standard_normal(3), rng.standard_normal(N))
    u = (*rng.standard_normal(3), rng.standard_normal(N))
    _, jv = revdiff.jvp(f, args(), v)
    _, pullback = revdiff.vjp(f, *args())
    jtu = pullback(*u)
    lhs = sum(float(np.vdot(a, b)) for a, b in zip(u, jv))
    rhs = sum(float(np.vdot(a, b)) for a, b in zip(jtu, v))
    assert abs(lhs - rhs) <= 1e-10 * max(1.0, abs(lhs)), src
    hv, hu = revdiff.hvp(f, "x0", args(), v), revdiff.hvp(f, "x0", args(), u)
    uhv = sum(float(np.vdot(a, b)) for a, b in zip(u, hv))
    vhu = sum(float(np.vdot(a, b)) for a, b in zip(v, hu))
    assert abs(uhv - vhu) <= 1e-9 * max(1.0, abs(uhv)), src
