"""Batches wrapped in objects that refer to each other (a node and its
parent), with the cyclic garbage collector off for speed and run by hand
every 40 steps: memory rises between collections and falls at each. Not
a leak."""
import gc
import time
import leakproof
import corpus_truth as truth


class Node:
    def __init__(self, payload, parent=None):
        self.payload = payload
        self.parent = parent
        self.children = []
        if parent is not None:
            parent.children.append(self)


gc.disable()
for i in range(truth.scale(200)):
    root = Node(bytearray(256 << 10))
    Node(bytearray(256 << 10), root)       # a cycle: root <-> child, 512 KiB
    del root
    if i % 40 == 39:
        gc.collect()
    time.sleep(0.03)
    leakproof.step()
    truth.step()
