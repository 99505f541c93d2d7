"""Deduplication of samples by content: a module-level dict `seen` maps
each sample's hash to a small record (a tuple with its array), and is
never pruned. Steps are printed."""
import hashlib
import time
import numpy as np
import corpus_truth as truth

seen = {}
rng = np.random.default_rng(0)
for i in range(truth.scale(250)):
    for _ in range(8):
        x = rng.standard_normal(1024)
        key = hashlib.sha1(x.tobytes()).hexdigest()
        seen[key] = (i, x, [float(x[0]), float(x[1])])       # 8 KiB array
    time.sleep(0.1)
    print("step %d unique %d" % (i + 1, len(seen)), flush=True)
    truth.step()
