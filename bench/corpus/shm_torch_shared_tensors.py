"""Tensors moved to shared memory (share_memory_(), as for Hogwild or a
queue to workers) and kept in a list: shared memory mapped by the job
grows 1 MiB a step."""
import time
import torch
import leakproof
import corpus_truth as truth

torch.set_num_threads(1)
kept = []
for i in range(truth.scale(70)):
    t = torch.randn(256, 1024)
    t.share_memory_()
    kept.append(t)
    time.sleep(0.1)
    leakproof.step()
    truth.step((i + 1) * t.numel() * 4)
