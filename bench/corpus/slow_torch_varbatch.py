"""PyTorch training with variable batch sizes (bucketed sequences): the
allocator's footprint moves with each batch; under it, the loop keeps a
snapshot of the first layer's weights per step (128 KiB) for a plot at the
end."""
import random
import time
import torch
import leakproof
import corpus_truth as truth

torch.manual_seed(0)
torch.set_num_threads(1)
rnd = random.Random(0)
model = torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.ReLU(), torch.nn.Linear(256, 128))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
trace = []
for it in range(truth.scale(160)):
    bs = rnd.choice([32, 128, 512, 1024])
    x = torch.randn(bs, 128)
    out = model(x)
    loss = (out - x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    trace.append(model[0].weight.detach().clone())     # 256 x 128: 128 KiB
    time.sleep(0.01)
    leakproof.step()
    truth.step((it + 1) * trace[0].nelement() * 4)
