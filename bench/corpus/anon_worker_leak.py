"""A DataLoader whose dataset caches decoded samples in a module-level
dict inside each worker process (persistent workers): the workers grow,
the training process does not."""
import time
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset
import leakproof
import corpus_truth as truth

_decoded = {}


class Images(Dataset):
    def __len__(self):
        return 100000

    def __getitem__(self, i):
        img = _decoded.get(i)
        if img is None:
            img = np.random.default_rng(i).integers(0, 255, (32, 32, 3), dtype=np.uint8).astype(np.float32)
            _decoded[i] = img            # 12 KiB per sample, never evicted
        return torch.from_numpy(img).permute(2, 0, 1)


torch.set_num_threads(1)
loader = DataLoader(Images(), batch_size=32, num_workers=2, persistent_workers=True, shuffle=False)
conv = torch.nn.Conv2d(3, 8, 3)
n = truth.scale(110)
for i, batch in enumerate(loader):
    with torch.no_grad():
        conv(batch).mean()
    time.sleep(0.08)                 # the rest of the step
    leakproof.step()
    truth.step()
    if i + 1 >= n:
        break
