"""A measuring worker that fails on purpose: once "compiled", it crashes on a schedule that unrolls and
hangs on one that runs a loop in parallel; it measures anything else as the real worker does."""

import os
import pickle
import sys
import time

from ragsched.autosched.measure import Duplex, measure_one

conn = Duplex(int(sys.argv[1]), int(sys.argv[2]))
program, inputs, expected, threads, repeats = pickle.loads(conn.recv())
conn.send("ready")
while True:
    text = conn.recv()
    if '"op": "unroll"' in text:  # as generated code that corrupts memory would
        conn.send("compiled")
        os.abort()
    if '"op": "parallel"' in text:  # as generated code that never ends would
        conn.send("compiled")
        time.sleep(3600)
    conn.send(measure_one(program, inputs, expected, threads, repeats, text, conn.send))
