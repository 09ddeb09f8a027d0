"""``python -m pytest ARGS`` as a script, for a pytest run in a child forked from an
interpreter that imported pytest (tests/test_pytest_plugin.py): the current folder first on
the path, as ``-m`` puts it."""

import os
import sys

sys.path[0] = os.getcwd()

import pytest  # noqa: E402 (after the path is set, as python -m pytest imports it)

raise SystemExit(pytest.console_main())
