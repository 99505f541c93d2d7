"""PyTorch training that keeps each step's loss tensor in a list `losses`
to average at the end: every loss still holds its graph (grad_fn and the
activations it saved)."""
import time
import torch
import leakproof
import corpus_truth as truth

torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
losses = []
for i in range(truth.scale(260)):
    x = torch.randn(128, 256)
    y = torch.randint(0, 10, (128,))
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward(retain_graph=True)
    opt.step()
    losses.append(loss)
    time.sleep(0.07)
    leakproof.step()
    truth.step()
