"""The classic DataLoader copy-on-write: the dataset keeps its samples as
a Python list of dicts (captions and boxes), read by 2 forked workers over
two epochs with persistent workers. Every read writes a reference count,
so the workers copy the parent's pages during the first epoch, then stop.
Not a leak."""
import torch
from torch.utils.data import DataLoader, Dataset
import leakproof
import corpus_truth as truth


class Captions(Dataset):
    def __init__(self, n):
        self.items = [{"id": i, "caption": "a photo of object %d on a table" % i,
                       "boxes": [(i % 7, i % 11, 20.0, 30.0)]} for i in range(n)]

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        it = self.items[i]
        return torch.tensor([len(it["caption"]), it["boxes"][0][2]])


torch.set_num_threads(1)
ds = Captions(truth.scale(150000, 20000))
loader = DataLoader(ds, batch_size=1000, num_workers=2, persistent_workers=True)
for epoch in range(2):
    for batch in loader:
        batch.float().mean()
        leakproof.step()
        truth.step()
    leakproof.epoch()
