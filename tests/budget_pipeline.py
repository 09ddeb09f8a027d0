"""A pipeline with a budget for tests/test_budgets.py, run as a child process.

``python tests/budget_pipeline.py DB SIDE KILL_AT TOKENS``: three steps
``a``, ``b``, ``c``, each reporting 100 input tokens and $0.01 through
``letitloop.usage``, under ``Journal("paid", budget=Budget(tokens=TOKENS))``.
Each step appends ``ran STEP`` to SIDE when it is called. ``KILL_AT``:
``in b`` SIGKILLs the process inside ``b`` after its usage was reported,
``after a`` between ``a`` and ``b``; ``""`` nowhere. Prints ``done`` at the
end, or the BudgetExceededError's attributes as JSON and exits 3.
"""

from __future__ import annotations

import json
import os
import signal
import sys

from letitloop import Budget, BudgetExceededError, Journal, usage

DB, SIDE, KILL_AT, TOKENS = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])


def paid(name: str) -> str:
    with open(SIDE, "a") as f:
        f.write(f"ran {name}\n")
    usage(input_tokens=100, cost=0.01, model="m")
    if f"in {name}" == KILL_AT:
        os.kill(os.getpid(), signal.SIGKILL)
    return name.upper()


try:
    with Journal("paid", path=DB, budget=Budget(tokens=TOKENS)) as j:
        for name in "abc":
            j.step(name, paid, name)
            if f"after {name}" == KILL_AT:
                os.kill(os.getpid(), signal.SIGKILL)
except BudgetExceededError as exc:
    print(json.dumps({"key": exc.key, "tokens": exc.tokens, "steps": exc.steps, "msg": str(exc)}))
    sys.exit(3)
print("done")
