"""A job that runs a short subprocess at every step (a shell tool on each
batch) and waits for it: processes come and go, none stays. Not a leak."""
import subprocess
import time
import leakproof
import corpus_truth as truth

for i in range(truth.scale(80)):
    subprocess.run(["/bin/sh", "-c", "sleep 0.05; echo $$ > /dev/null"], check=True)
    time.sleep(0.05)
    leakproof.step()
    truth.step()
