"""revdiff.torch as PyTorch custom operations: torch.library.opcheck on every operation, and
torch.compile (fullgraph), torch.func.grad and vmap equal to eager calls."""
import numpy as np
import pytest

import revdiff
from helpers import scaled_norm

torch = pytest.importorskip("torch")
import revdiff.torch as rt  # noqa: E402  (after the importorskip)

rng = np.random.default_rng(5)


def tensor(*shape, grad=False):
    return torch.tensor(rng.standard_normal(shape), requires_grad=grad)


OPERATIONS = {  # operation: example arguments (tensors first, then the options)
    "qr": lambda: (tensor(3, 5, 3), "cgs2", None),
    "qr_vjp": lambda: (tensor(5, 3), tensor(5, 3), torch.triu(tensor(3, 3)), "householder", None),
    "project": lambda: (tensor(2, 6, 3), tensor(2, 6), "cgs2", None),
    "project_vjp": lambda: (tensor(6, 3), tensor(6), tensor(6), "mgs", 1e-10),
    "lstsq": lambda: (tensor(6, 3), tensor(6), "cgs2", None),
    "lstsq_vjp": lambda: (tensor(2, 6, 3), tensor(2, 6), tensor(2, 3), "cgs2", None),
    "rank": lambda: (tensor(2, 5, 3), None),
    "normalize": lambda: (tensor(4, 5),),
    "normalize_vjp": lambda: (tensor(4, 5), tensor(4, 5)),
    "tangent_project": lambda: (tensor(3, 4), tensor(3, 4)),
    "tangent_project_vjp": lambda: (tensor(3, 4), tensor(3, 4), tensor(3, 4)),
    "normalize_jvp": lambda: (tensor(4, 5), tensor(4, 5)),
    "normalize_vjp_jvp": lambda: (tensor(4, 5), tensor(4, 5), tensor(4, 5)),
    "tangent_project_jvp": lambda: (tensor(3, 4), tensor(3, 4), tensor(3, 4), tensor(3, 4)),
    "tangent_project_vjp_jvp": lambda: (tensor(3, 4), tensor(3, 4), tensor(3, 4), tensor(3, 4), tensor(3, 4)),
    "qr_jvp": lambda: (tensor(2, 5, 3), tensor(2, 5, 3), "cgs2", None),
    "qr_vjp_jvp": lambda: (tensor(5, 3), tensor(5, 3), torch.triu(tensor(3, 3)), tensor(5, 3), "householder", None),
    "project_jvp": lambda: (tensor(6, 3), tensor(6), tensor(6, 3), tensor(6), "cgs2", None),
    "project_vjp_jvp": lambda: (tensor(2, 6, 3), tensor(2, 6), tensor(2, 6), tensor(2, 6, 3), tensor(2, 6), "cgs2",
                                None),
    "lstsq_jvp": lambda: (tensor(6, 3), tensor(6), tensor(6, 3), tensor(6), "cgs2", None),
    "lstsq_vjp_jvp": lambda: (tensor(2, 6, 3), tensor(2, 6), tensor(2, 3), tensor(2, 6, 3), tensor(2, 6), "cgs2",
                              None),
}
#: operations whose gradient is another operation's business (they register none of their own)
_NO_GRADIENT = ("_vjp", "_jvp")


@pytest.mark.parametrize("name", sorted(OPERATIONS))
def test_every_operation_passes_opcheck(name):
    args = OPERATIONS[name]()
    if not name.endswith(_NO_GRADIENT):  # the forward operations register their gradient
        args = tuple(a.requires_grad_(True) if isinstance(a, torch.Tensor) else a for a in args)
    torch.library.opcheck(getattr(torch.ops.revdiff, name).default, args)


def projection_loss(A, y):
    Q, R = rt.qr(A)
    return (rt.project(A, y) ** 2).sum() + (Q.sum(-1) * y).sum() + (R ** 2).sum()


def eager_gradient(A, y):
    A, y = A.detach().requires_grad_(True), y.detach().requires_grad_(True)
    projection_loss(A, y).backward()
    return A.grad, y.grad


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_torch_compile_fullgraph_equals_eager(backend):
    A, y = tensor(4, 6, 3, grad=True), tensor(4, 6, grad=True)
    compiled = torch.compile(projection_loss, fullgraph=True, backend=backend)
    loss = compiled(A, y)
    loss.backward()
    gA, gy = eager_gradient(A, y)
    torch.testing.assert_close(loss, projection_loss(A, y), rtol=1e-13, atol=0)
    torch.testing.assert_close(A.grad, gA, rtol=1e-13, atol=1e-14)
    torch.testing.assert_close(y.grad, gy, rtol=1e-13, atol=1e-14)


def test_torch_compile_without_gradients_equals_eager():
    """Inference: nothing requires a gradient, so the operations run without their autograd wrapper."""
    A, y = tensor(4, 6, 3), tensor(4, 6)
    compiled = torch.compile(projection_loss, fullgraph=True, backend="aot_eager")
    torch.testing.assert_close(compiled(A, y), projection_loss(A, y), rtol=0, atol=0)
    with torch.no_grad():
        torch.testing.assert_close(compiled(A.requires_grad_(True), y), projection_loss(A, y), rtol=0, atol=0)
    f = rt.function(scaled_norm, "out")
    compiled = torch.compile(lambda x: f(0.0, x, 2.0), fullgraph=True, backend="aot_eager")
    torch.testing.assert_close(compiled(y[0]), 2.0 * torch.linalg.norm(y[0]), rtol=1e-15, atol=0)


def test_shapes_traced_without_data_are_refused_as_the_data_would_be():
    with pytest.raises(ValueError, match="lstsq needs a tall or square A"):
        rt.lstsq(torch.empty((3, 5), dtype=torch.float64, device="meta"), torch.empty(3, device="meta"))
    for outputs in ((), ("out", "out")):
        with pytest.raises(ValueError, match="one or more distinct parameters"):
            rt.function(scaled_norm, outputs)


def test_func_grad_and_vmap_equal_eager():
    A, y = tensor(4, 6, 3), tensor(4, 6)
    gA, gy = eager_gradient(A, y)
    grads = torch.func.grad(projection_loss, argnums=(0, 1))(A, y)
    torch.testing.assert_close(grads, (gA, gy), rtol=1e-13, atol=1e-14)
    # vmap over each matrix, with the batch axis in another position, and over a shared y
    per_matrix = torch.func.vmap(torch.func.grad(projection_loss, argnums=(0, 1)), in_dims=(2, 0))(
        A.permute(1, 2, 0), y)
    torch.testing.assert_close(per_matrix, (gA, gy), rtol=1e-13, atol=1e-14)
    shared = torch.func.vmap(lambda a: rt.project(a, y[0]))(A)
    torch.testing.assert_close(shared, rt.project(A, y[0].expand(4, 6)), rtol=0, atol=0)
    nested = torch.func.vmap(torch.func.vmap(rt.normalize))(A)
    torch.testing.assert_close(nested, rt.normalize(A), rtol=0, atol=0)


def test_the_operations_differentiate_when_called_directly():
    A = tensor(5, 3, grad=True)
    Q, R = torch.ops.revdiff.qr(A, "cgs2", None)
    (Q.sum() + R.sum()).backward()
    expected = torch.func.grad(lambda a: sum(t.sum() for t in rt.qr(a)))(A.detach())
    torch.testing.assert_close(A.grad, expected, rtol=0, atol=0)


def torch_normalize(x):
    return x / x.norm(dim=-1, keepdim=True)


def torch_tangent_project(g, z):
    zh = torch_normalize(z)
    return g - (zh.conj() * g).sum(-1, keepdim=True) * zh


def test_second_derivatives_through_func_grad_equal_torch_and_stop_at_the_third():
    A = tensor(5, 3)
    ones = torch.ones(5, dtype=A.dtype)

    def twice(project):
        return torch.func.grad(lambda a: (torch.func.grad(lambda b: (project(b, ones) ** 2).sum())(a) ** 2).sum())(A)

    def torch_project(b, y):
        Q = torch.linalg.qr(b)[0]
        return Q @ (Q.T @ y)

    torch.testing.assert_close(twice(rt.project), twice(torch_project), rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(twice(rt.lstsq), twice(lambda b, y: torch.linalg.lstsq(b, y[:, None]).solution[:, 0]),
                               rtol=1e-10, atol=1e-12)
    weights = tensor(5, 3)
    torch.testing.assert_close(twice(lambda b, y: rt.normalize(b.T).T), twice(lambda b, y: torch_normalize(b.T).T),
                               rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(twice(lambda b, y: rt.tangent_project(weights * b, b)),
                               twice(lambda b, y: torch_tangent_project(weights * b, b)), rtol=1e-10, atol=1e-12)
    third = torch.func.grad(lambda a: torch.func.grad(lambda b: torch.func.grad(
        lambda c: (rt.project(c, ones) ** 2).sum())(b).pow(2).sum())(a).sum())
    with pytest.raises(RuntimeError, match="third derivatives are not supported"):
        third(A)


def test_a_reversible_function_as_an_operation_compiles_and_vmaps():
    f = rt.function(scaled_norm, "out")
    assert rt.function(scaled_norm, "out") is not None  # a second wrapper reuses the registered operations
    x, c = tensor(4), torch.tensor(2.5, dtype=torch.float64)

    def loss(x, c):
        return f(0.0, x, c) ** 2

    grads = torch.func.grad(loss, argnums=(0, 1))(x, c)
    norm = torch.linalg.norm(x)
    torch.testing.assert_close(grads, (2 * 2.5 * norm * 2.5 * x / norm, 2 * 2.5 * norm * norm), rtol=1e-14, atol=0)
    compiled = torch.compile(loss, fullgraph=True, backend="aot_eager")
    xs = x.detach().requires_grad_(True)
    compiled(xs, c).backward()
    torch.testing.assert_close(xs.grad, grads[0], rtol=1e-14, atol=0)
    # vmap runs the function as revdiff.batched over the mapped axis, gradients too
    X = tensor(3, 4)
    per_row = torch.func.vmap(torch.func.grad(loss), in_dims=(0, None))(X, c)
    expected = torch.stack([torch.func.grad(loss)(X[k], c) for k in range(3)])
    torch.testing.assert_close(per_row, expected, rtol=1e-14, atol=0)
    nested = torch.func.vmap(torch.func.vmap(lambda x: f(0.0, x, c)))(tensor(2, 3, 4))
    assert nested.shape == (2, 3)
    name = [n for n in dir(torch.ops.revdiff) if n.startswith("function_scaled_norm")][0]
    torch.library.opcheck(getattr(torch.ops.revdiff, name).default,
                          ([torch.tensor(0.0, dtype=torch.float64), x.requires_grad_(True), c], 0))


# ----------------------------------------------------------------------------- second derivatives, forward mode


def torch_projection(A, y):
    Q = torch.linalg.qr(A)[0]
    return (Q @ (Q.transpose(-1, -2).conj() @ y[..., None]))[..., 0]


def test_gradgradcheck_and_hessians_equal_torch():
    A, y = tensor(2, 5, 3, grad=True), tensor(2, 5, grad=True)
    assert torch.autograd.gradgradcheck(lambda a, b: rt.project(a, b), (A, y))
    assert torch.autograd.gradgradcheck(lambda a, b: rt.lstsq(a, b), (A, y))
    assert torch.autograd.gradgradcheck(lambda a: rt.qr(a, "householder"), (tensor(4, 3, grad=True),))
    assert torch.autograd.gradgradcheck(rt.normalize, (tensor(3, 4, grad=True),))
    g, z = (torch.complex(tensor(2, 4), tensor(2, 4)).requires_grad_(True) for _ in range(2))
    assert torch.autograd.gradgradcheck(rt.tangent_project, (g, z))
    f = rt.function(scaled_norm, "out")
    c = torch.tensor(1.5, dtype=torch.float64)
    assert torch.autograd.gradgradcheck(lambda x: f(0.0, x, c), (tensor(4, grad=True),))

    def loss(project):
        return lambda a, b: (project(a, b) ** 2 * torch.arange(1.0, 6.0, dtype=a.dtype)).sum()

    W1, W2 = tensor(5, 3), tensor(3, 3)

    def qr_loss(qr):
        def f(a):
            Q, R = qr(a)
            s = torch.sign(torch.diagonal(R))  # LAPACK's signs to diag(R) >= 0 (constant nearby)
            return ((Q * s) ** 2 * W1).sum() + ((R * s[:, None]) ** 2 * W2).sum()
        return f

    torch.testing.assert_close(torch.func.hessian(qr_loss(rt.qr))(A[0].detach()),
                               torch.func.hessian(qr_loss(torch.linalg.qr))(A[0].detach()), rtol=1e-9, atol=1e-10)
    mine = torch.func.hessian(loss(rt.project), argnums=(0, 1))(A.detach(), y.detach())
    theirs = torch.func.hessian(loss(torch_projection), argnums=(0, 1))(A.detach(), y.detach())
    for row_mine, row_theirs in zip(mine, theirs):
        for a, b in zip(row_mine, row_theirs):
            torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-11)


def test_complex_double_backward_equals_torch():
    A = torch.complex(tensor(5, 2), tensor(5, 2)).requires_grad_(True)
    y = torch.complex(tensor(5), tensor(5)).requires_grad_(True)

    def gradient_norm(project):
        (gA,) = torch.autograd.grad(project(A, y).abs().pow(2).sum(), A, create_graph=True)
        return torch.autograd.grad(gA.abs().pow(2).sum(), (A, y))

    for mine, theirs in zip(gradient_norm(rt.project), gradient_norm(torch_projection)):
        torch.testing.assert_close(mine, theirs, rtol=1e-10, atol=1e-11)


def test_forward_mode_equals_torch():
    A, dA = tensor(3, 6, 4), tensor(3, 6, 4)
    y, dy = tensor(3, 6), tensor(3, 6)
    z, dz = torch.func.jvp(rt.project, (A, y), (dA, dy))
    tz, tdz = torch.func.jvp(torch_projection, (A, y), (dA, dy))
    torch.testing.assert_close(dz, tdz, rtol=1e-11, atol=1e-12)
    (Q, R), (dQ, dR) = torch.func.jvp(lambda a: rt.qr(a, "cgs2", None, "r"), (A,), (dA,))
    assert Q.shape == dQ.shape == (0,)
    with torch.autograd.forward_ad.dual_level():  # dual tensors, as well as torch.func
        dual = rt.project(torch.autograd.forward_ad.make_dual(A, dA), y)
        along_A = dz - rt.project(A, dy)  # z is linear in y
        torch.testing.assert_close(torch.autograd.forward_ad.unpack_dual(dual).tangent, along_A, rtol=1e-10, atol=1e-12)
    Z, dZ = (torch.complex(tensor(3, 4), tensor(3, 4)) for _ in range(2))  # complex: the real derivative
    for mine, theirs, primals, tangents in ((rt.normalize, torch_normalize, (A,), (dA,)),
                                            (rt.normalize, torch_normalize, (Z,), (dZ,)),
                                            (rt.tangent_project, torch_tangent_project, (A, dA), (dA, A)),
                                            (rt.tangent_project, torch_tangent_project, (Z, dZ), (dZ, Z))):
        torch.testing.assert_close(torch.func.jvp(mine, primals, tangents), torch.func.jvp(theirs, primals, tangents),
                                   rtol=1e-11, atol=1e-12)


def test_cuda_tensors_run_on_torchs_current_device_and_stream(monkeypatch):
    """On CUDA tensors an operation runs with CuPy's current device and stream those of PyTorch
    (checked with stand-ins: no GPU here); CPU tensors never reach CuPy."""
    from types import SimpleNamespace

    from revdiff.torch import operations

    seen = []

    class Context:
        def __init__(self, what):
            self.what = what

        def __enter__(self):
            seen.append(("enter", self.what))

        def __exit__(self, *exc):
            seen.append(("exit", self.what))

    cuda = SimpleNamespace(Device=lambda i: Context(("device", i)), ExternalStream=lambda p: Context(("stream", p)),
                           Stream=SimpleNamespace(null=Context(("stream", "null"))))
    monkeypatch.setattr(operations, "cupy_module", lambda: SimpleNamespace(cuda=cuda))
    run = operations._on_torch_stream(lambda *args: seen.append(("impl", len(args))) or "done")
    assert run(torch.ones(2), [torch.ones(1)]) == "done" and seen == [("impl", 2)]
    assert operations._cuda_device((torch.ones(1), [torch.ones(1, device="meta")], 3)) is None
    seen.clear()
    monkeypatch.setattr(operations, "_cuda_device", lambda args: torch.device("cuda", 1))
    for pointer, stream in ((1234, ("stream", 1234)), (0, ("stream", "null"))):
        monkeypatch.setattr(torch.cuda, "current_stream", lambda index, p=pointer: SimpleNamespace(cuda_stream=p))
        assert run(torch.ones(2)) == "done"
        assert seen == [("enter", ("device", 1)), ("enter", stream), ("impl", 1), ("exit", stream),
                        ("exit", ("device", 1))]
        seen.clear()


@revdiff.reversible
def maßstab(out, x, c):
    """A function whose name Python allows and torch.library's ASCII op names do not."""
    for i in range(len(x)):
        out += c * x[i] * x[i]


def test_a_function_with_a_non_ascii_name_becomes_an_operation():
    """The operation's name keeps ASCII letters only (torch.library decodes op names as ASCII), so it
    registers; it runs and differentiates like any other."""
    f = rt.function(maßstab, "out")
    x = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64, requires_grad=True)
    value = f(0.0, x, 2.0)
    value.backward()
    assert value.item() == 28.0
    torch.testing.assert_close(x.grad, 4.0 * x.detach(), rtol=0, atol=0)
    names = [n for n in dir(torch.ops.revdiff) if n.startswith("function_ma")]
    assert names and all(n.isascii() for n in names), names


@revdiff.reversible
def underscored(_out, u_out, x):
    for i in range(len(x)):
        _out += 2.0 * x[i]
        u_out += 3.0 * x[i]


def test_outputs_and_vmap_take_parameter_names_as_written():
    """``_out`` compiles as ``u_out`` (and ``u_out`` as ``uu_out``): the operation's outputs, and vmap's
    batched parameters, are named as the user wrote them."""
    x = torch.tensor([1.0, 2.0], dtype=torch.float64)
    assert rt.function(underscored, "_out")(0.0, 0.0, x).item() == 6.0
    assert rt.function(underscored, "u_out")(0.0, 0.0, x).item() == 9.0
    rows = torch.func.vmap(lambda x: rt.function(underscored, "_out")(0.0, 0.0, x))(torch.ones(3, 2, dtype=torch.float64))
    assert rows.tolist() == [4.0, 4.0, 4.0]
