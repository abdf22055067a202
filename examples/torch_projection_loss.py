"""Seed 000 in a PyTorch training loop: a small network maps an input to a 32x16 matrix A, and the
loss |y - P_A y|^2 asks the column space of A to contain the target y. The projection P_A y and its
gradient come from revdiff's reversible CGS2 program (revdiff.torch.project), not from a QR adjoint.

    python examples/torch_projection_loss.py [cuda]    (the device: cpu by default)"""
import sys

import torch

import revdiff.torch as rt

M, N, BATCH, STEPS = 32, 16, 16, 60

if __name__ == "__main__":
    device = sys.argv[1] if len(sys.argv) > 1 else "cpu"
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(8, 64), torch.nn.Tanh(), torch.nn.Linear(64, M * N)).double().to(device)
    opt = torch.optim.Adam(net.parameters(), lr=3e-3)
    inputs = torch.randn(BATCH, 8, dtype=torch.float64).to(device)
    targets = torch.randn(BATCH, M, dtype=torch.float64).to(device)  # each input has its own target vector
    first = None
    for step in range(STEPS):
        A = net(inputs).reshape(BATCH, M, N)
        residual = targets - rt.project(A, targets)  # y - Q Q^T y, batched over the 16 matrices
        loss = (residual ** 2).sum(dim=1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        first = first if first is not None else loss.item()
        if step % 10 == 0 or step == STEPS - 1:
            print(f"step {step:3d}  loss {loss.item():.4f}")
    assert loss.item() < 0.5 * first, "the loss should go down"
