"""``python launch.py NOW PROGRAM ARGS...``: PROGRAM as ``python PROGRAM ARGS...`` runs it,
its journals' default clock (letitloop.testing) set back to NOW (seconds since the epoch),
from where it runs at the real rate (generate.py's resumes)."""

import os
import runpy
import sys
import time

from letitloop.testing import using_clock

behind = time.time() - float(sys.argv[1])
sys.argv = sys.argv[2:]
sys.path[0] = os.path.dirname(os.path.abspath(sys.argv[0]))
with using_clock(lambda: time.time() - behind):
    runpy.run_path(sys.argv[0], run_name="__main__")
