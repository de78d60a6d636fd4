"""A measuring worker process: ``python -m ragsched.autosched.worker READ_FD WRITE_FD`` (started by
``measure.Measurer``, which talks to it over those two pipes)."""

import sys

from .measure import Duplex, serve

serve(Duplex(int(sys.argv[1]), int(sys.argv[2])))
