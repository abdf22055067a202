"""The README's recipes for PyTorch users, run and checked: a projection loss, thin and complete Q,
the sphere, rank-deficient input, and the sign convention of R against torch.linalg.qr."""
import torch

import revdiff
import revdiff.torch as rt

if __name__ == "__main__":
    torch.manual_seed(0)
    A = torch.randn(8, 6, 4, dtype=torch.float64, requires_grad=True)   # a batch of 8 tall matrices
    y = torch.randn(8, 6, dtype=torch.float64)

    loss = (rt.project(A, y) ** 2).sum()        # ||P_A y||², P_A = Q Qᵀ
    loss.backward()
    A0 = A.detach().requires_grad_(True)        # the same loss through torch's own QR
    Qt = torch.linalg.qr(A0)[0]
    ((Qt @ (Qt.mT @ y[..., None])) ** 2).sum().backward()
    assert torch.allclose(A.grad, A0.grad, rtol=1e-10, atol=1e-12)
    print("projection loss gradient: equal to torch.linalg.qr's on well-conditioned A")

    Q, R = rt.qr(A)                             # thin
    Qc, Rc = rt.qr(A, mode="complete")          # the default runs householder, which completes Q
    assert Q.shape == (8, 6, 4) and R.shape == (8, 4, 4) and Qc.shape == (8, 6, 6) and Rc.shape == (8, 6, 4)
    A.grad = None
    Qc.sum().backward()                         # complete Q has a gradient of its own shape
    assert A.grad.shape == A.shape and torch.isfinite(A.grad).all()
    print("thin Q", tuple(Q.shape), "complete Q", tuple(Qc.shape))

    x = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    u = rt.normalize(x)
    g = rt.tangent_project(torch.randn(5, 3, dtype=torch.float64), u)
    assert torch.allclose(u.norm(dim=-1), torch.ones(5, dtype=torch.float64)) and (g * u).sum(-1).abs().max() < 1e-14
    print("on the sphere: |u| = 1, g tangent to it")

    B = torch.cat([A[..., :2], A[..., :2]], dim=-1).detach().requires_grad_(True)   # rank 2 of 4
    z, rank = rt.project(B, y, rank_deficient="truncate")
    z.sum().backward()
    assert rank.tolist() == [2] * 8 and torch.isfinite(B.grad).all()
    try:
        rt.qr(B)
        raise AssertionError("qr of a rank-deficient matrix returned")
    except revdiff.RankDeficientError as exc:
        print("qr refuses rank deficiency:", str(exc).split(";")[0][:90])
    print("truncated projection: rank", rank.tolist()[0], "finite gradient")

    Qt, Rt = torch.linalg.qr(A.detach())        # pitfall: LAPACK's signs against R's nonnegative diagonal
    s = torch.sign(torch.diagonal(Rt, dim1=-2, dim2=-1))
    assert torch.allclose(Q.detach(), Qt * s[..., None, :]) and torch.allclose(R.detach(), Rt * s[..., :, None])
    assert (torch.diagonal(R, dim1=-2, dim2=-1) >= 0).all()
    print("R's diagonal is nonnegative; torch.linalg.qr's, times its signs, equals it")
