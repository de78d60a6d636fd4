"""A measuring worker that writes when it compiles and when it runs a candidate (to the file named by
RAGSCHED_TEST_EVENTS: lines "pid event seconds"), and otherwise measures as the real worker does."""

import os
import pickle
import sys
import time

from ragsched.autosched.measure import Duplex, compare_side_by_side, measure_one, on_compiled, request


def log(event: str) -> None:
    with open(os.environ["RAGSCHED_TEST_EVENTS"], "a") as f:
        f.write(f"{os.getpid()} {event} {time.monotonic()}\n")


conn = Duplex(int(sys.argv[1]), int(sys.argv[2]))
program, inputs, expected, threads, repeats, check, target, tolerance = pickle.loads(conn.recv())
conn.send("ready")
while True:
    message = conn.recv()
    if isinstance(message, tuple) and message[0] == "compare":
        conn.send(compare_side_by_side(program, inputs, expected, threads, repeats, *message[1:], check=check,
                                       target=target, tolerance=tolerance))
        continue
    text, cutoff, hold, best = request(message)
    go = on_compiled(conn, hold)

    def compiled(msg: str, go=go):
        log("compiled")
        now = go(msg)
        log("runs")
        return now

    log("compiles")
    result = measure_one(program, inputs, expected, threads, repeats, text, compiled, cutoff, check, target,
                         tolerance, best, checked=lambda: conn.send("checked"))
    log("done")
    conn.send(result)
