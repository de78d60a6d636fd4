"""A measuring worker that fails on purpose: once "compiled", it crashes on a schedule that unrolls and
hangs on one that runs a loop in parallel; it measures anything else as the real worker does."""

import os
import pickle
import sys
import time

from ragsched.autosched.measure import Duplex, compare_side_by_side, measure_one, on_compiled, request

conn = Duplex(int(sys.argv[1]), int(sys.argv[2]))
program, inputs, expected, threads, repeats, check, target, tolerance = pickle.loads(conn.recv())
conn.send("ready")
while True:
    message = conn.recv()
    if isinstance(message, tuple) and message[0] == "compare":  # the finalists, timed side by side
        conn.send(compare_side_by_side(program, inputs, expected, threads, repeats, *message[1:], check=check,
                                       target=target, tolerance=tolerance))
        continue
    text, cutoff, hold, best = request(message)
    compiled = on_compiled(conn, hold)
    if '"op": "unroll"' in text:  # as generated code that corrupts memory would
        compiled("compiled")
        os.abort()
    if '"op": "parallel"' in text:  # as generated code that never ends would
        compiled("compiled")
        time.sleep(3600)
    conn.send(measure_one(program, inputs, expected, threads, repeats, text, compiled, cutoff, check, target,
                          tolerance, best, checked=lambda: conn.send("checked")))
