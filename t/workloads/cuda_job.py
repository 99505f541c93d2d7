"""
cuda_job.py — real CUDA workloads for checking leakproof on a GPU machine
(bench/gpu-check runs them; the test suite does not, these machines have
no GPU).

    cuda_job.py leak  STEPS MIB     keeps MIB MiB of new tensors every step
    cuda_job.py flat  STEPS MIB     allocates and frees MIB MiB every step
    cuda_job.py oom   GIB           keeps GIB GiB a step until CUDA is out of memory
    cuda_job.py tree  MIB           this process and a child each hold MIB MiB

Marks steps with the leakproof client when it is importable; prints, at the
end, what PyTorch itself says it holds (torch.cuda.memory_allocated and
memory_reserved), to set beside what leakproof measured through NVML.
"""
import subprocess
import sys
import time

import torch

try:
    import leakproof
except ImportError:
    leakproof = None

MIB = 1 << 20


def step():
    if leakproof:
        leakproof.step()


def say_torch():
    print("torch allocated=%d reserved=%d" % (torch.cuda.memory_allocated(), torch.cuda.memory_reserved()),
          flush=True)


def leak(steps, mib, keep):
    held = []
    for _ in range(steps):
        t = torch.ones(int(mib * MIB) // 4, device="cuda")
        torch.cuda.synchronize()
        if keep:
            held.append(t)
        del t
        step()
        time.sleep(0.05)
    say_torch()


def oom(gib):
    held = []
    while True:
        held.append(torch.empty(int(gib * (1 << 30)) // 4, device="cuda"))
        step()
        time.sleep(0.02)


def tree(mib):
    if len(sys.argv) > 3:                      # the child
        t = torch.ones(int(mib * MIB) // 4, device="cuda")
        torch.cuda.synchronize()
        print("child holds", t.numel() * 4, flush=True)
        time.sleep(4)
        return
    t = torch.ones(int(mib * MIB) // 4, device="cuda")
    torch.cuda.synchronize()
    child = subprocess.Popen([sys.executable, __file__, "tree", str(mib), "child"])
    for _ in range(60):
        step()
        time.sleep(0.1)
    child.wait()
    say_torch()


def main():
    mode = sys.argv[1]
    if mode in ("leak", "flat"):
        leak(int(sys.argv[2]), float(sys.argv[3]), keep=(mode == "leak"))
    elif mode == "oom":
        oom(float(sys.argv[2]))
    elif mode == "tree":
        tree(float(sys.argv[2]))
    else:
        sys.exit("cuda_job.py: unknown mode " + mode)


if __name__ == "__main__":
    main()
