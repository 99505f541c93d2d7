"""Gradient accumulation over 8 micro-batches: each micro-batch's graph
(activations) is held until the backward pass at the 8th, then freed.
Each micro-batch is a printed step. Not a leak."""
import torch
import corpus_truth as truth

torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
pending = []
for it in range(truth.scale(160)):
    x = torch.randn(128, 256)
    y = torch.randint(0, 10, (128,))
    pending.append(torch.nn.functional.cross_entropy(model(x), y) / 8)
    if len(pending) == 8:
        torch.stack(pending).sum().backward()
        opt.step()
        opt.zero_grad()
        pending = []
    print("micro-batch %d" % (it + 1), flush=True)
    truth.step()
