"""Test-wide settings: a private kernel cache, and passive OpenMP waiting on small CI machines."""

import os
import tempfile

os.environ.setdefault("RAGSCHED_CACHE_DIR", tempfile.mkdtemp(prefix="ragsched-test-cache-"))
os.environ.setdefault("OMP_WAIT_POLICY", "passive")
