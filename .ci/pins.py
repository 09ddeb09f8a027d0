"""The pins, upgraded on purpose: constraints.txt and .ci/crewai-constraints.txt.

    python .ci/pins.py --upgrade [main | crewai]

Every package that can fail the build (ruff, mypy, pytest and its plugins,
Hypothesis, the frameworks) is pinned to the version last seen green:
``constraints.txt`` for the main environment (README's commands and .ci/run
install with ``-c constraints.txt``), ``.ci/crewai-constraints.txt`` for
CrewAI's own (tests/crewai_env.py). A new release of any of them changes
nothing until this command is run.

``--upgrade`` makes each environment again from scratch in a temporary
folder: a virtual environment of this Python, pip upgraded, the install
without constraints (the newest versions pyproject.toml allows; a
machine-wide pip constraint file, ``PIP_CONSTRAINT`` or pip.conf's
``constraint``, is ignored, so that it does not become the project's),
``pip check``, ``pip freeze``; then it writes the file with its header.
Nothing else is written. Then run ``.ci/run``: commit the new pins if it
passes; if not, fix what the new versions broke (or keep the old file:
``git checkout constraints.txt``). Without ``--upgrade`` it only says this.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: What each environment installs (as .ci/run and tests/crewai_env.py do), and its file.
ENVIRONMENTS = {
    # bench: DBOS and what it needs, pinned for benchmarks/queue_vs_dbos.py (not installed by CI).
    "main": (ROOT / "constraints.txt", ["-e", ".[dev,bench]"]),
    "crewai": (
        ROOT / ".ci" / "crewai-constraints.txt",
        ["-e", ".[crewai]", "pytest", "pytest-timeout", "pytest-xdist"],
    ),
}

#: What each file's header says about its environment.
ABOUT = {
    "main": [
        "The main environment (the dev extra: the test extra, ruff and mypy), last seen green",
        "by .ci/run. README's commands and .ci/run install with -c constraints.txt, and",
        "tests/test_pins.py fails if pyproject.toml's extras and these pins disagree.",
    ],
    "crewai": [
        "CrewAI's test environment: tests/crewai_env.py installs '.[crewai]' with pytest under",
        "these constraints, and tests/test_crewai.py fails if crewai, openai, mcp or pydantic",
        "is not the version here.",
    ],
}

#: Packages no extra of ours needs; one in a freeze means a framework started to pull
#: PyTorch (gigabytes, and a machine's own cap on its version would become ours).
SURPRISES = ("torch", "torchvision", "triton", "nvidia-")


def freeze(name: str, folder: Path) -> list[str]:
    """``name``'s environment made from scratch in ``folder``: its ``pip freeze``, pip first."""
    python = folder / "bin" / "python"
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
    # /dev/null, not "": an empty value does not override pip.conf's constraint.
    env = {**os.environ, "PIP_CONSTRAINT": "/dev/null", "PIP_BUILD_CONSTRAINT": "/dev/null"}
    pip = [str(python), "-m", "pip", "--disable-pip-version-check"]
    subprocess.run([*pip, "install", "--quiet", "--upgrade", "pip"], check=True, env=env)
    install = ENVIRONMENTS[name][1]
    subprocess.run([*pip, "install", "--quiet", *install], check=True, env=env, cwd=ROOT)
    subprocess.run([*pip, "check"], check=True, env=env, cwd=ROOT)
    frozen = subprocess.run(
        [*pip, "freeze", "--all", "--exclude-editable"],
        check=True, env=env, cwd=ROOT, capture_output=True, text=True,
    ).stdout.splitlines()  # fmt: skip
    # pip itself (.ci/run installs the pinned pip first); not setuptools or wheel, which
    # only a fresh venv of some Pythons brings and nothing of ours uses.
    pins = [ln for ln in frozen if "==" in ln and not ln.startswith(("setuptools==", "wheel=="))]
    surprises = [ln for ln in pins if ln.lower().startswith(SURPRISES)]
    if surprises:
        raise SystemExit(
            f"pins: {name}'s environment pulled {surprises}: find which package wants it"
        )
    requires = subprocess.run(
        [str(python), "-c", REQUIRES], check=True, capture_output=True, text=True
    ).stdout
    return sorted(with_markers(pins, json.loads(requires)), key=str.lower)


#: Prints each installed distribution's Requires-Python, by name (in the new environment).
REQUIRES = (
    "import importlib.metadata as m, json\n"
    "print(json.dumps({d.metadata['Name']: d.metadata.get('Requires-Python') or ''"
    " for d in m.distributions()}))"
)


def with_markers(pins: list[str], requires: dict[str, str]) -> list[str]:
    """``pins``, each pin that cannot install on the oldest Python pyproject.toml supports
    (filelock 4.3 needs 3.11) restricted by a marker to the Pythons it can: there pip picks
    what installs (the pin holds on the Python the file was made on, which its header names)."""
    from packaging.specifiers import SpecifierSet
    from packaging.utils import canonicalize_name

    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    supported = re.search(r'^requires-python = "([^"]+)"', text, re.MULTILINE)
    assert supported is not None, "pyproject.toml names no requires-python"
    oldest = min(s.version for s in SpecifierSet(supported.group(1)) if ">" in s.operator)
    needs = {canonicalize_name(name): spec for name, spec in requires.items() if spec}
    out = []
    for pin in pins:
        spec = SpecifierSet(needs.get(canonicalize_name(pin.split("==")[0]), ""))
        if spec.contains(oldest):
            out.append(pin)
        else:
            clauses = sorted(f'python_full_version {s.operator} "{s.version}"' for s in spec)
            out.append(f"{pin}; {' and '.join(clauses)}")
    return out


def write(name: str, pins: list[str]) -> None:
    path = ENVIRONMENTS[name][0]
    today = datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    python = f"Python {platform.python_version()}, {platform.system()} {platform.machine()}"
    install = shlex.join(ENVIRONMENTS[name][1])
    header = [
        f"As it resolved on {today} ({python}) from: pip install {install}",
        *ABOUT[name],
        "Upgrade on purpose, never by hand: python .ci/pins.py --upgrade (docs/testing.md).",
    ]
    text = "".join(f"# {line}\n" for line in header) + "".join(f"{pin}\n" for pin in pins)
    path.write_text(text, encoding="utf-8")
    print(f"pins: wrote {len(pins)} pins to {path.relative_to(ROOT)}", flush=True)


def main(argv: list[str]) -> int:
    names = [a for a in argv if a != "--upgrade"]
    if "--upgrade" not in argv or any(n not in ENVIRONMENTS for n in names):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    for name in names or list(ENVIRONMENTS):
        with tempfile.TemporaryDirectory(prefix=f"letitloop-pins-{name}-") as folder:
            print(f"pins: making {name}'s environment without constraints", flush=True)
            pins = freeze(name, Path(folder) / "venv")
        write(name, pins)
    print("pins: now run .ci/run, and commit the files if it passes", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
