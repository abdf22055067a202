"""Every entry of the instruction table and of the function table, run through the programs that use
it: forward then inverse gives the inputs back, and the pullback agrees with central finite
differences (``check_grad``), for real and (where the entry takes them) complex values. The
examples are matched to the tables by reading the instructions of their IR and the functions of
their lowered programs, so a new table entry without an example here fails ``test_every_entry_*``."""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

import revdiff
from revdiff import irot, reversible, rot
from revdiff.ir.high import BinOp, Call, Instr, Unary, walk_stmts
from revdiff.primitives import FUNCTIONS, INSTRUCTIONS

rng = np.random.default_rng(7)


def _vector(n, cplx):
    x = rng.standard_normal(n)
    return x + 1j * rng.standard_normal(n) if cplx else x


def _matrix(m, n, cplx):
    return _vector((m, n), cplx)


def _scalar(cplx, low=0.3, high=0.9):
    x = float(rng.uniform(low, high))
    return complex(x, float(rng.uniform(low, high))) if cplx else x


# ----------------------------------------------------------------------------- instructions


@reversible
def add_sub_mul_div(y, x):
    y += x * 2.0
    y -= x * x
    y *= 1.5 + x * x
    y /= 2.0 + x * x


@reversible
def negate_and_swap(y, x):
    y = -y
    y, x = x, y


@reversible
def xor_integers(k, j):
    k ^= j


@reversible
def rotations(a, b, theta):
    rot(a, b, theta)
    irot(a, b, theta * 0.5)


@reversible
def matrix_vector(y, A, x, w, z, u):
    y += A @ x
    y -= A @ w
    z += A.T @ y
    z -= A.T @ u
    z += A.conj().T @ y
    z -= A.conj().T @ u


@reversible
def outer_products(Y, u, v, w, x):
    """Views and whole arrays, both signs."""
    Y[:, :] += np.outer(u, v)
    Y[:, :] -= np.outer(w, x)
    Y[1:4, 1:] += np.outer(u[:3], x[1:])


@reversible
def matrix_matrix(Y, A, B, C, Z, U):
    Y[:, :] += A @ B
    Y[:, :] -= A @ C
    Z[:, :] += A.T @ Y
    Z[:, :] -= A.T @ U
    Z[:, :] += A.conj().T @ Y
    Z[:, :] -= A.conj().T @ U


@reversible
def dots_and_axpy(s, x, y, w, a, b):
    s += np.dot(x, y)
    s -= np.dot(x, w)
    s += np.vdot(x, y)
    s -= np.vdot(w, y)
    y[:] += a * x[:]
    y[:] -= b * w[:]


@reversible
def norms(s, x, w):
    s += np.linalg.norm(x)
    s -= np.linalg.norm(w[1:])


@reversible
def whole_arrays(y, Y, x, A, w):
    y[:] += x * np.sin(x)
    y[1:] -= w[:-1] * 0.5 + 1.0
    Y[:, :] *= A * A + 1.0
    Y[1:, :] /= A[:-1, :] * A[:-1, :] + 2.0
    y[:] *= w * w + 1.0
    y[:] /= 2.0


INSTRUCTION_EXAMPLES = {
    "add_sub_mul_div": (add_sub_mul_div, lambda c: (_scalar(c), _scalar(c)), True),
    "negate_and_swap": (negate_and_swap, lambda c: (_scalar(c), _scalar(c)), True),
    "xor_integers": (xor_integers, lambda c: (5, 12), False),
    "rotations": (rotations, lambda c: (_scalar(c), _scalar(c), _scalar(False)), True),
    "matrix_vector": (matrix_vector, lambda c: (_vector(4, c), _matrix(4, 3, c), _vector(3, c), _vector(3, c),
                                                _vector(3, c), _vector(4, c)), True),
    "matrix_matrix": (matrix_matrix, lambda c: (_matrix(4, 2, c), _matrix(4, 3, c), _matrix(3, 2, c),
                                                _matrix(3, 2, c), _matrix(3, 2, c), _matrix(4, 2, c)), True),
    "outer_products": (outer_products, lambda c: (_matrix(5, 3, c), _vector(5, c), _vector(3, c), _vector(5, c),
                                                  _vector(3, c)), True),
    "dots_and_axpy": (dots_and_axpy, lambda c: (_scalar(c), _vector(5, c), _vector(5, c), _vector(5, c),
                                                _scalar(c), _scalar(c)), True),
    "norms": (norms, lambda c: (_scalar(False), _vector(5, c), _vector(5, c)), True),
    "whole_arrays": (whole_arrays, lambda c: (_vector(5, c), _matrix(3, 4, c), _vector(5, c), _matrix(3, 4, c),
                                              _vector(5, c)), True),
}

# ----------------------------------------------------------------------------- functions


@reversible
def arithmetic(y, x, z):
    y += x + z
    y += x - z
    y += x * z
    y += x / z
    y += x ** 3
    y += x ** z
    y += -x
    y += +z


@reversible
def integer_valued(y, x, k, j):
    y += round(x * 3.0)
    k += j // 3
    k += j % 3


@reversible
def float_remainder(y, x, z):
    y += x % z + (x // z) * 0.5  # a % b = a - b * (a // b); a // b is piecewise constant
    y *= 1.0 + x % z


@reversible
def elementary(y, x):
    y += np.sin(x) + np.cos(x) + np.tan(x)
    y += np.exp(x) + np.log(x) + np.sqrt(x)
    y += np.sinh(x) + np.cosh(x) + np.tanh(x)
    y += np.arctan(x)


@reversible
def inverse_and_special(y, x, z):
    y += np.arcsin(x) + np.arccos(x) + np.arctanh(x) + np.arcsinh(x) + np.arccosh(z)
    y += np.log1p(x) + np.expm1(x) + np.log2(z) + np.log10(z) + math.erf(x) + math.erfc(x)


@reversible
def real_valued(y, x, z):
    y += np.arctan2(x, z) + np.hypot(x, z)
    y += abs(x - 0.1) + min(x, z) + max(x, z)


@reversible
def complex_parts(y, w):
    y += np.conj(w) * w.real + w.imag


@reversible
def strided_loop(y, x):
    for i in range(1, 7, 2):
        y += x[i] * x[i - 1]


FUNCTION_EXAMPLES = {
    "arithmetic": (arithmetic, lambda c: (_scalar(c), _scalar(c), _scalar(c)), True),
    "integer_valued": (integer_valued, lambda c: (_scalar(False), 0.37, 4, 11), False),
    "float_remainder": (float_remainder, lambda c: (_scalar(False), _scalar(False, 1.2, 1.4), -0.55), False),
    "elementary": (elementary, lambda c: (_scalar(c), _scalar(c)), True),
    "real_valued": (real_valued, lambda c: (_scalar(False), 0.42, 0.77), False),
    "inverse_and_special": (inverse_and_special, lambda c: (_scalar(False), _scalar(False), _scalar(False, 1.2, 3.0)),
                            False),
    "complex_parts": (complex_parts, lambda c: (_scalar(True), _scalar(True)), False),
    "strided_loop": (strided_loop, lambda c: (_scalar(c), _vector(7, c)), True),
}

EXAMPLES = {**INSTRUCTION_EXAMPLES, **FUNCTION_EXAMPLES}
CASES = [(name, cplx) for name, (_, _, takes_complex) in EXAMPLES.items() for cplx in (False, True)
         if takes_complex or not cplx]


def _copy(args):
    return tuple(a.copy() if isinstance(a, np.ndarray) else a for a in args)


@pytest.mark.parametrize("name, cplx", CASES, ids=[f"{n}-{'complex' if c else 'real'}" for n, c in CASES])
def test_round_trip_and_gradient(name, cplx):
    f, make, _ = EXAMPLES[name]
    args = make(cplx)
    back = (~f)(*f(*_copy(args)))
    for a, b in zip(args, back):
        np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-12)
    assert revdiff.check_grad(f, *args) < 1e-6


# ----------------------------------------------------------------------------- coverage


def _walk(value):
    """Every node under a (low- or high-level) IR value: dataclasses, tuples and lists."""
    yield value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        for field in dataclasses.fields(value):
            yield from _walk(getattr(value, field.name))
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _walk(item)


def _used(examples, programs=("forward", "inverse", "adjoint")) -> tuple[set, set]:
    """(instructions, functions) that the examples' programs contain."""
    instructions, functions = set(), set()
    for f, make, takes_complex in examples.values():
        instructions |= {s.op for s in walk_stmts(f.ir.body) if isinstance(s, Instr)}
        for cplx in (False, True) if takes_complex else (False,):
            spec = f.specialize(f.argument_types(make(cplx)))
            for program in programs:
                for node in _walk(spec.low_function(program).body):
                    if isinstance(node, BinOp):
                        functions.add(node.op)
                    elif isinstance(node, Call):
                        functions.add(node.fn)
                    elif isinstance(node, Unary) and node.op in "-+":
                        functions.add("neg" if node.op == "-" else "pos")
    return instructions, functions


def test_every_entry_of_the_instruction_table_has_an_example():
    used, _ = _used(INSTRUCTION_EXAMPLES, programs=())
    assert not set(INSTRUCTIONS) - used, f"no round trip or gradient test for {sorted(set(INSTRUCTIONS) - used)}"


def test_every_entry_of_the_function_table_has_an_example():
    _, used = _used(FUNCTION_EXAMPLES)
    assert not set(FUNCTIONS) - used, f"no round trip or gradient test for {sorted(set(FUNCTIONS) - used)}"


# ----------------------------------------------------------------------------- forward mode


def _direction(args):
    return tuple(_vector(np.shape(a), np.iscomplexobj(a)) if isinstance(a, np.ndarray) else
                 _scalar(isinstance(a, complex), -1.0, 1.0) if isinstance(a, (float, complex)) else None for a in args)


def _inner(a, b):
    return sum(float(np.real(np.vdot(np.asarray(x), np.asarray(y)))) for x, y in zip(a, b)
               if x is not None and y is not None)


@pytest.mark.parametrize("name, cplx", CASES, ids=[f"{n}-{'complex' if c else 'real'}" for n, c in CASES])
def test_jvp_against_central_differences_and_the_pullback(name, cplx):
    """The tangent program of every table entry: central differences along v, and <u, J v> equal
    to <J^T u, v> from the pullback (to rounding: both are exact derivatives)."""
    f, make, _ = EXAMPLES[name]
    args = make(cplx)
    v, u = _direction(args), _direction(args)
    outs, douts = revdiff.jvp(f, args, v)
    for got, want in zip(outs, f(*_copy(args))):
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13)
    eps = 1e-6
    shifted = [f(*[a + s * eps * d if d is not None else a for a, d in zip(_copy(args), v)]) for s in (1, -1)]
    for plus, minus, d in zip(*shifted, douts):
        if d is not None:
            central = (np.asarray(plus) - np.asarray(minus)) / (2 * eps)
            np.testing.assert_allclose(d, central, rtol=1e-6, atol=1e-7)
    _, pullback = revdiff.vjp(f, *args)
    lhs, rhs = _inner(u, douts), _inner(pullback(*u), v)
    assert abs(lhs - rhs) <= 1e-11 * max(1.0, abs(lhs))


HVP_CASES = [(n, c) for n, c in CASES if isinstance(EXAMPLES[n][1](c)[0], float)]


@pytest.mark.parametrize("name, cplx", HVP_CASES, ids=[f"{n}-{'complex' if c else 'real'}" for n, c in HVP_CASES])
def test_hvp_against_central_differences_of_the_gradient(name, cplx):
    """The tangent of the fused vjp: central differences of the gradient along v, and symmetric."""
    f, make, _ = EXAMPLES[name]
    args = make(cplx)
    v, u = _direction(args), _direction(args)
    hv = revdiff.hvp(f, 0, args, v)
    eps = 1e-5
    grads = [revdiff.grad(f, 0)(*[a + s * eps * d if d is not None else a for a, d in zip(_copy(args), v)])
             for s in (1, -1)]
    for plus, minus, got in zip(*grads, hv):
        if got is not None:
            np.testing.assert_allclose(got, (np.asarray(plus) - np.asarray(minus)) / (2 * eps), rtol=1e-5, atol=1e-6)
    hu = revdiff.hvp(f, 0, args, u)
    assert abs(_inner(u, hv) - _inner(v, hu)) <= 1e-11 * max(1.0, abs(_inner(u, hv)))


@reversible
def complex_loss(loss, z, w):
    loss += (z * np.conj(w)).real + abs(z) * w.imag
    loss += (np.exp(z) * w).real


def test_hvp_of_a_real_loss_of_complex_inputs():
    """Complex directions dz: the derivative of the gradient dL/dx + i dL/dy along dz."""
    args = (0.0, _scalar(True), _scalar(True))
    v, u = _direction(args), _direction(args)
    hv = revdiff.hvp(complex_loss, "loss", args, v)
    eps = 1e-5
    grads = [revdiff.grad(complex_loss, "loss")(*[a + s * eps * d for a, d in zip(args, v)]) for s in (1, -1)]
    for plus, minus, got in zip(*grads, hv):
        np.testing.assert_allclose(got, (plus - minus) / (2 * eps), rtol=1e-6, atol=1e-7)
    hu = revdiff.hvp(complex_loss, "loss", args, u)
    assert abs(_inner(u, hv) - _inner(v, hu)) <= 1e-12
