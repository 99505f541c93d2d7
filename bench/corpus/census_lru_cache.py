"""Tokenisation behind functools.lru_cache(maxsize=None): every input text
is new, so the cache never hits and never evicts; each entry is a list of
token ids. Steps are printed."""
import functools
import time
import corpus_truth as truth


@functools.lru_cache(maxsize=None)
def tokenize(text):
    return [hash(w) & 0xffff for w in text.split()]


for i in range(truth.scale(250)):
    for k in range(40):
        tokenize(" ".join("w%d_%d" % (i, j) for j in range(k, k + 200)))
    time.sleep(0.08)
    print("step %d" % (i + 1), flush=True)
    truth.step()
