"""``python tests/NAME.py ARGS`` as ``python tests/preloaded_main.py NAME ARGS``: for a child
forked from an interpreter that imported the program ``NAME`` once (a forker's ``warm``,
tests/preloaded.py), which calls its ``main(ARGS)`` without running the module's class,
tool and graph definitions again in every child (LangChain's pydantic models: about 10 ms
of CPU each time). Run without such a forker, it imports the program as usual."""

import importlib
import sys
from pathlib import Path

name, *args = sys.argv[1:]
sys.argv = [str(Path(__file__).with_name(f"{name}.py")), *args]
importlib.import_module(name).main(args)
