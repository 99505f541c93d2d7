"""PyTorch training for 4 epochs; from the third, a debugging hook keeps
each step's output (detached, cloned) in a dict by step: flat, then a
leak of 512 KiB a step. Steps are printed."""
import torch
import corpus_truth as truth

torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 2048))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
debug = {}
step = 0
per_epoch = truth.scale(25)
for epoch in range(4):
    for k in range(per_epoch):
        x = torch.randn(64, 256)
        out = model(x)
        loss = out.pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        if epoch >= 2:
            debug[step] = out.detach().clone()      # 64 x 2048 x 4 = 512 KiB
        print("epoch %d step %d loss %.4f" % (epoch, step, loss.item()), flush=True)
        truth.step()
