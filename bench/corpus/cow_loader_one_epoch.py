"""One long epoch over a dataset of numpy rows held in a Python list
(one small array object per sample), 3 workers without persistent
workers: the copies are still rising when the run ends, bounded by the
dataset's size times the workers. Not a leak."""
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset
import corpus_truth as truth


class Rows(Dataset):
    def __init__(self, n):
        rng = np.random.default_rng(0)
        self.rows = [rng.standard_normal(16).astype(np.float32) for _ in range(n)]

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        return torch.from_numpy(self.rows[i])


torch.set_num_threads(1)
ds = Rows(truth.scale(200000, 20000))
loader = DataLoader(ds, batch_size=256, num_workers=3, shuffle=True)
lin = torch.nn.Linear(16, 4)
for i, b in enumerate(loader):
    with torch.no_grad():
        lin(b).sum()
    if i % 5 == 4:
        print("batch %d" % (i + 1), flush=True)
        truth.step()
