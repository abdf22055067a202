"""A new instruction written through ``revdiff.extend`` (the example of its docstring): it parses,
inverts, differentiates and compiles for every backend like the built-in ones, and registration
refuses entries the table cannot take."""
from __future__ import annotations

import numpy as np
import pytest

import revdiff
from revdiff import extend
from revdiff.ir.low import Assign
from revdiff.primitives import INSTRUCTIONS


def rotate_left(ops, ctx):
    a, b, c = ops
    ctx.emit(Assign((a, b, c), (b, c, a)))


def rotate_right(ops, ctx):
    a, b, c = ops
    ctx.emit(Assign((a, b, c), (c, a, b)))


def cotangents_of(permute):
    def rule(ops, ctx):
        grads = tuple(ctx.grad(o) for o in ops)
        if all(g is not None for g in grads):
            permute(grads, ctx)
    return rule


def entries(name="cycle", inverse="uncycle"):
    return (extend.Instruction(name, f"{name}(a, b, c)", ("target",) * 3, inverse, rotate_right,
                               cotangents_of(rotate_left), call_name=name),
            extend.Instruction(inverse, f"{inverse}(a, b, c)", ("target",) * 3, name, rotate_left,
                               cotangents_of(rotate_right), call_name=inverse))


@pytest.fixture
def cycle():
    stand_ins = extend.register(*entries())
    yield stand_ins
    for name in ("cycle", "uncycle"):
        del INSTRUCTIONS[name]


def test_a_registered_instruction_runs_inverts_and_differentiates(cycle):
    forward, _ = cycle

    @revdiff.reversible
    def program(x, s):
        cycle(x[0], x[1], x[2])  # noqa: F821  (the parser reads the name; the stand-in is for linters)
        s += x[0] * 2.0 + x[1] * x[2]
        ~cycle(x[0], x[1], x[2])  # noqa: F821

    x = np.array([1.0, 2.0, 3.0])
    out = program(x.copy(), 0.0)
    assert out[1] == 2.0 * 3.0 + 1.0 * 2.0 and np.array_equal(out[0], x)
    back = (~program)(*out)
    assert np.array_equal(back[0], x) and back[1] == 0.0
    assert revdiff.check_grad(program, x, 0.5) < 1e-8
    assert "x[0], x[1], x[2] = x[2], x[0], x[1]" in program.source("forward", x, 0.0)  # its rule, printed
    assert "__device__" in program.source("adjoint", backend="cuda")
    with pytest.raises(RuntimeError, match="inside a function decorated"):
        forward(1, 2, 3)


def test_registration_refuses_what_the_table_cannot_take(cycle):
    with pytest.raises(ValueError, match="already in the table"):
        extend.register(*entries())
    a, b = entries("spin", "unspin")
    with pytest.raises(ValueError, match="names 'unspin' as its inverse, not 'cycle'"):
        extend.register(a, entries()[0])
    with pytest.raises(ValueError, match="needs a call_name"):
        extend.register(extend.Instruction("spin", "spin", ("target",), "spin", rotate_left, rotate_left),
                        extend.Instruction("spin", "spin", ("target",), "spin", rotate_left, rotate_left))
    with pytest.raises(ValueError, match="is a name of the language"):
        extend.register(*entries("range", "unrange"))
    same = extend.Instruction("spin", "spin(a)", ("target",), "unspin", rotate_left, rotate_left, call_name="spin")
    with pytest.raises(ValueError, match="need call names of their own"):
        extend.register(same, extend.Instruction("unspin", "spin(a)", ("target",), "spin", rotate_left, rotate_left,
                                                 call_name="spin"))
    with pytest.raises(TypeError, match="Instruction entries"):
        extend.register("spin", b)
    assert "spin" not in INSTRUCTIONS


def test_a_reversible_function_named_like_an_instruction_is_refused(cycle):
    """The parser matches instruction names first: a reversible function of the same name would never
    be called, so the call is refused rather than silently running the instruction."""

    @revdiff.reversible
    def cycle(a, b, c):
        a += b

    with pytest.raises(revdiff.ReversibilityError, match="both the instruction cycle") as info:
        @revdiff.reversible
        def caller(x):
            cycle(x[0], x[1], x[2])
    assert "test_extend.py" in str(info.value)


def test_the_lowerers_provide_every_member_of_the_rule_context():
    """``RuleContext`` is what rules may use: every member exists on the forward and adjoint
    lowerers, methods with the protocol's parameters."""
    import inspect

    from revdiff.passes.adjoint import AdjointLowerer
    from revdiff.passes.lower import Lowerer
    members = [m for m in vars(extend.RuleContext) if not m.startswith("_")] + list(extend.RuleContext.__annotations__)
    assert {"emit", "require", "loop", "push", "grad", "loc"} <= set(members)
    for cls in (Lowerer, AdjointLowerer):
        for name in members:
            wanted = getattr(extend.RuleContext, name, None)
            if callable(wanted):
                got = inspect.signature(getattr(cls, name)).parameters
                assert list(inspect.signature(wanted).parameters) == list(got), (cls.__name__, name)
