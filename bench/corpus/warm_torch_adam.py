"""A PyTorch MLP with Adam: the first step allocates the optimizer's two
moment buffers (2 x 4 MiB) and the allocator settles over a few steps;
then every step frees what it takes. Steps are printed."""
import torch
import corpus_truth as truth

torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 512))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for it in range(truth.scale(50)):
    x = torch.randn(32, 512)
    loss = (model(x) - x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    print("train step %d loss %.4f" % (it + 1, loss.item()), flush=True)
    truth.step()
