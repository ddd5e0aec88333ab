"""GIL contention workload for bpf/gil's tests.

After a line on stdin, runs two CPU-bound threads and one thread that
sleeps 0.5 ms in a loop, for DURATION seconds, then prints one line per
thread:

    spin WALL_S CPU_S
    sleep WALL_S ITERATIONS

Each sleeper iteration returns from time.sleep through
PyEval_RestoreThread, which waits for the GIL held by a spinner.
"""
import sys
import threading
import time

DURATION = float(sys.argv[1])


def spin(out, i):
    t0, c0 = time.perf_counter(), time.thread_time()
    n = 0
    while time.perf_counter() - t0 < DURATION:
        n += 1
    out[i] = "spin %.6f %.6f" % (time.perf_counter() - t0, time.thread_time() - c0)


def sleeper(out, i):
    t0 = time.perf_counter()
    k = 0
    while time.perf_counter() - t0 < DURATION:
        time.sleep(0.0005)
        k += 1
    out[i] = "sleep %.6f %d" % (time.perf_counter() - t0, k)


print("ready", flush=True)
sys.stdin.readline()
out = [None] * 3
threads = [
    threading.Thread(target=spin, args=(out, 0)),
    threading.Thread(target=spin, args=(out, 1)),
    threading.Thread(target=sleeper, args=(out, 2)),
]
for t in threads:
    t.start()
for t in threads:
    t.join()
print("\n".join(out), flush=True)
