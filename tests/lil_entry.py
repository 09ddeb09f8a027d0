"""``python -m letitloop ARGS`` as a script (helpers.lil_forked runs it in a forked child).

What ``python -m`` does: the current folder first on ``sys.path``, then the package's
``__main__`` run as ``__main__`` with ``sys.argv[0]`` its path.
"""

import os
import runpy
import sys

sys.path[0] = os.getcwd()
runpy.run_module("letitloop", run_name="__main__", alter_sys=True)
