"""Seed 003 in a PyTorch training loop: the network's outputs are normalised onto the unit sphere
(revdiff.torch.normalize), so the gradients reaching the network are tangent to the sphere without
hooks. The loss pulls each output towards a target direction.

    python examples/torch_hypersphere.py [cuda]    (the device: cpu by default)"""
import sys

import torch

import revdiff.torch as rt

DIM, BATCH, STEPS = 8, 32, 80

if __name__ == "__main__":
    device = sys.argv[1] if len(sys.argv) > 1 else "cpu"
    torch.manual_seed(3)
    net = torch.nn.Sequential(torch.nn.Linear(4, 32), torch.nn.Tanh(), torch.nn.Linear(32, DIM)).double().to(device)
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    inputs = torch.randn(BATCH, 4, dtype=torch.float64).to(device)
    targets = rt.normalize(torch.randn(BATCH, DIM, dtype=torch.float64).to(device)).detach()
    first = None
    for step in range(STEPS):
        z = net(inputs)
        z.retain_grad()
        u = rt.normalize(z)  # on the sphere
        loss = ((u - targets) ** 2).sum(dim=1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        tangent = (z.grad * u.detach()).sum(dim=1).abs().max().item()  # 0: the gradient is tangent
        first = first if first is not None else loss.item()
        if step % 20 == 0 or step == STEPS - 1:
            print(f"step {step:3d}  loss {loss.item():.4f}  max |<dL/dz, z_hat>| {tangent:.1e}")
    assert loss.item() < 0.5 * first, "the loss should go down"
    assert tangent < 1e-12
