"""A training loop that starts a helper process (here a stand-in for a
metrics uploader) every 6 steps with subprocess.Popen and never waits for
it or stops it: the job's tree gains a process every 6 steps."""
import subprocess
import sys
import time
import leakproof
import corpus_truth as truth

helpers = []
for i in range(truth.scale(90)):
    if i % 6 == 0:
        helpers.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"]))
    time.sleep(0.1)
    leakproof.step()
    truth.step()
for h in helpers:        # the cleanup it should have done at each step
    h.kill()
    h.wait()
