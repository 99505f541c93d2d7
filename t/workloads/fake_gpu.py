"""
fake_gpu.py — a job whose "GPU memory" is whatever it writes into the fake
NVML's file ($FAKE_NVML_FILE, read by t/fake-nvml on every call): it stands
in for a CUDA job on machines without a GPU.

    fake_gpu.py STEPS BASE_MIB MIB_PER_STEP

Each step: this process holds BASE_MIB + step * MIB_PER_STEP of GPU memory
(the file is replaced atomically), marks the step, sleeps 20 ms. Prints
EXPECTED_GROWTH_BYTES_PER_STEP on stderr.
"""
import os
import sys
import time

import leakproof

MIB = 1 << 20


def hold(path, nbytes):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write("device 0 total %d\n" % (80 << 30))
        f.write("process 0 %d %d\n" % (os.getpid(), nbytes))
    os.replace(tmp, path)


def main():
    steps, base, per = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
    path = os.environ["FAKE_NVML_FILE"]
    print("EXPECTED_GROWTH_BYTES_PER_STEP=%d" % int(per * MIB), file=sys.stderr, flush=True)
    for step in range(1, steps + 1):
        hold(path, int((base + step * per) * MIB))
        time.sleep(0.02)
        leakproof.step()


if __name__ == "__main__":
    main()
