"""PyTorch training that sums the loss tensor itself (`running += loss`),
so every step's autograd graph, activations included, stays alive.
Steps are the printed progress lines (--step-regex)."""
import torch
import corpus_truth as truth

torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
running = 0.0
for it in range(truth.scale(90)):
    x = torch.randn(64, 512)
    y = torch.randint(0, 10, (64,))
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward(retain_graph=True)
    opt.step()
    running = running + loss          # the bug: should be loss.item()
    print("iter %d loss %.4f avg %.4f" % (it + 1, loss.item(), running.item() / (it + 1)), flush=True)
    truth.step()
