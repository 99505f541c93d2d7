"""A producer thread that prepares batches faster than the training loop
consumes them, into an unbounded queue.Queue: the backlog grows about
1 MiB a step."""
import queue
import threading
import time
import numpy as np
import leakproof
import corpus_truth as truth

q = queue.Queue()
stop = threading.Event()


def produce():
    rng = np.random.default_rng(0)
    while not stop.is_set():
        q.put(rng.standard_normal((128, 1024)).astype(np.float32))   # 512 KiB
        time.sleep(0.025)


threading.Thread(target=produce, daemon=True).start()
for i in range(truth.scale(100)):
    b = q.get()
    float((b * b).sum())
    time.sleep(0.1)          # consumer: ~4 batches produced per consumed
    leakproof.step()
    truth.step()
stop.set()
