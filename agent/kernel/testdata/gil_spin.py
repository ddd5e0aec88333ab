"""Two CPU-bound threads and one sleeping 1 ms in a loop, for DURATION
seconds after a line on stdin; prints the sleeper's iterations. Every
sleeper iteration takes the GIL back from a spinner."""
import sys
import threading
import time

DURATION = float(sys.argv[1])


def spin():
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < DURATION:
        pass


def sleeper(out):
    t0 = time.perf_counter()
    k = 0
    while time.perf_counter() - t0 < DURATION:
        time.sleep(0.001)
        k += 1
    out.append(k)


print("ready", flush=True)
sys.stdin.readline()
out = []
ts = [threading.Thread(target=spin), threading.Thread(target=spin), threading.Thread(target=sleeper, args=(out,))]
for t in ts:
    t.start()
for t in ts:
    t.join()
print(out[0], flush=True)
