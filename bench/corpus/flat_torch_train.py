"""A correct PyTorch training loop (a small CNN on random images, two
epochs, loss.item() for logging): nothing kept between steps. Steps are
printed. Not a leak."""
import torch
import corpus_truth as truth

torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(4),
                            torch.nn.Flatten(), torch.nn.Linear(256, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
losses = []
step = 0
for epoch in range(2):
    for k in range(truth.scale(40)):
        x = torch.randn(32, 3, 32, 32)
        y = torch.randint(0, 10, (32,))
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        print("epoch %d step %d loss %.4f" % (epoch, step, loss.item()), flush=True)
        truth.step()
