"""A measuring worker whose checking runs are quick and whose timing is slow: it reports every candidate
compiled and checked at once, then takes 2 s before it answers 0.5 s."""

import pickle
import sys
import time

from ragsched.autosched.measure import Duplex, Result, on_compiled, request

conn = Duplex(int(sys.argv[1]), int(sys.argv[2]))
pickle.loads(conn.recv())
conn.send("ready")
while True:
    text, cutoff, hold, best = request(conn.recv())
    on_compiled(conn, hold)("compiled")
    conn.send("checked")
    time.sleep(2.0)
    conn.send(Result("ok", 0.5, 0.0))
