"""The pins: constraints.txt (and .ci/crewai-constraints.txt) agree with pyproject.toml.

Every package that can fail the build resolves to the version last seen green:
README's commands and .ci/run install with ``-c constraints.txt``, the dev
extra pins ruff and mypy exactly, and ``python .ci/pins.py --upgrade`` is the
one way the pins move. These tests fail when an extra names a package the
file does not pin, or pins outside the extra's range.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
CONSTRAINTS = ROOT / "constraints.txt"
CREWAI_CONSTRAINTS = ROOT / ".ci" / "crewai-constraints.txt"

#: Extras whose packages live elsewhere than constraints.txt, and why.
ELSEWHERE = {
    # CrewAI pins openai<3 and mcp<2: an environment of its own (tests/crewai_env.py).
    "crewai": CREWAI_CONSTRAINTS,
}


def pins_in(path: Path) -> dict[str, str]:
    """The file's ``name==version`` lines (a marker may follow): canonical name to version."""
    found: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            name, version = line.split(";")[0].split("==")
            found[canonicalize_name(name)] = version
    return found


def pyproject() -> dict[str, Any]:
    tomllib = pytest.importorskip("tomllib")
    meta: dict[str, Any] = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))
    return meta


def disagreements(
    project: dict[str, Any], pins: dict[str, str], crewai_pins: dict[str, str]
) -> list[str]:
    """What pyproject's ``project`` table asks for that the pins do not give: one line each."""
    found = []
    extras: dict[str, list[str]] = project["optional-dependencies"]
    wanted = [("dependencies", r, pins) for r in project["dependencies"]]
    wanted += [("dependencies", r, crewai_pins) for r in project["dependencies"]]
    for extra, requirements in extras.items():
        home = ELSEWHERE.get(extra, CONSTRAINTS)
        if home is not None:
            file_pins = crewai_pins if home == CREWAI_CONSTRAINTS else pins
            wanted += [(f"[{extra}]", r, file_pins) for r in requirements]
    for where, text, file_pins in wanted:
        requirement = Requirement(text)
        name = canonicalize_name(requirement.name)
        if name == "letitloop":  # another extra of ours: checked as itself
            continue
        file = "crewai-constraints.txt" if file_pins is crewai_pins else "constraints.txt"
        if name not in file_pins:
            found.append(f"{where} {text}: no pin in {file}")
        elif not requirement.specifier.contains(file_pins[name], prereleases=True):
            found.append(f"{where} {text}: {file} pins {name}=={file_pins[name]}")
    for tool in ("ruff", "mypy"):
        exact = [r for r in extras["dev"] if canonicalize_name(Requirement(r).name) == tool]
        if exact != [f"{tool}=={pins.get(tool)}"]:
            found.append(f"[dev] {exact}: constraints.txt pins {tool}=={pins.get(tool)}")
    return found


class TestThePins:
    def test_every_package_of_every_extra_is_pinned_inside_its_range(self) -> None:
        project = pyproject()["project"]
        found = disagreements(project, pins_in(CONSTRAINTS), pins_in(CREWAI_CONSTRAINTS))
        assert not found, (
            "pyproject.toml and the pins disagree (python .ci/pins.py --upgrade):\n"
            + ("\n".join(found))
        )

    def test_the_check_finds_each_kind_of_disagreement(self) -> None:
        project = pyproject()["project"]
        pins, crewai_pins = pins_in(CONSTRAINTS), pins_in(CREWAI_CONSTRAINTS)
        extras = project["optional-dependencies"]
        unpinned = {**project, "optional-dependencies": {**extras, "ui": ["not-a-pin>=1"]}}
        assert disagreements(unpinned, pins, crewai_pins) == [
            "[ui] not-a-pin>=1: no pin in constraints.txt"
        ]
        outside = {**project, "dependencies": ["msgspec>=99"]}
        assert disagreements(outside, pins, crewai_pins) == [
            f"dependencies msgspec>=99: constraints.txt pins msgspec=={pins['msgspec']}",
            "dependencies msgspec>=99: crewai-constraints.txt pins "
            f"msgspec=={crewai_pins['msgspec']}",
        ]
        loose = ["letitloop[test]", "ruff>=0.8", f"mypy=={pins['mypy']}"]
        assert disagreements(
            {**project, "optional-dependencies": {**extras, "dev": loose}}, pins, crewai_pins
        ) == [f"[dev] ['ruff>=0.8']: constraints.txt pins ruff=={pins['ruff']}"]
        crewai = {**project, "optional-dependencies": {**extras, "crewai": ["crewai>=99"]}}
        assert disagreements(crewai, pins, crewai_pins) == [
            f"[crewai] crewai>=99: crewai-constraints.txt pins crewai=={crewai_pins['crewai']}"
        ]

    @pytest.mark.parametrize("path", [CONSTRAINTS, CREWAI_CONSTRAINTS], ids=lambda p: p.name)
    def test_each_line_is_a_comment_or_one_exact_pin(self, path: Path) -> None:
        lines = [ln for ln in path.read_text("utf-8").splitlines() if not ln.startswith("#")]
        for line in lines:
            pin, _, marker = line.partition("; ")
            assert re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*==[A-Za-z0-9.+!-]+", pin), line
            # Only a pin that cannot install on Python 3.10 has a marker: the Pythons it can.
            clauses = marker.split(" and ") if marker else []
            assert all(c.startswith("python_full_version ") for c in clauses), line
        names = [canonicalize_name(ln.split("==")[0]) for ln in lines]
        assert len(names) == len(set(names)), "a package pinned twice"
        assert "python .ci/pins.py --upgrade" in path.read_text("utf-8"), "how to upgrade it"

    @pytest.mark.parametrize("path", [CONSTRAINTS, CREWAI_CONSTRAINTS], ids=lambda p: p.name)
    def test_no_pytorch_came_in(self, path: Path) -> None:
        """No extra of ours needs it: a pin would mean gigabytes of CUDA a framework
        started to pull, and a machine's own cap on torch would become the project's."""
        surprises = [
            n for n in pins_in(path) if n in ("torch", "triton") or n.startswith("nvidia-")
        ]
        assert not surprises

    def test_the_main_environment_pins_pip_and_the_gates(self) -> None:
        pins = pins_in(CONSTRAINTS)
        for name in ("pip", "ruff", "mypy", "pytest", "pytest-xdist", "pytest-timeout",
                     "hypothesis", "hatchling"):  # fmt: skip
            assert name in pins, name


#: README's fenced commands that install this checkout and run something.
def readme_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    return [b.strip() for b in re.findall(r"```\n(pip install[^`]*?)```", readme)]


class TestEveryInstallUsesThem:
    def test_readmes_two_opening_commands_install_under_the_constraints(self) -> None:
        demo, tests = readme_commands()[:2]
        assert demo == "pip install -e . -c constraints.txt && lil demo"
        assert tests.startswith("pip install -e '.[test]' -c constraints.txt && ")
        assert "\n" not in demo and "\n" not in tests

    def test_every_pip_install_of_ci_run_is_constrained(self) -> None:
        run = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
        installs = [ln for ln in run.splitlines() if "pip install" in ln and ln[:1] != "#"]
        assert len(installs) >= 3  # pip itself, the dev extra, README's test command
        for line in installs:
            assert "-c constraints.txt" in line, line

    def test_crewais_environment_installs_under_its_file(self) -> None:
        source = (ROOT / "tests" / "crewai_env.py").read_text(encoding="utf-8")
        assert 'CONSTRAINTS = ROOT / ".ci" / "crewai-constraints.txt"' in source
        assert '"-c", str(CONSTRAINTS)' in source


def documented_quick_check() -> str:
    """docs/testing.md's quick check: the one command of its section's fenced block."""
    page = (ROOT / "docs" / "testing.md").read_text(encoding="utf-8")
    section = page[page.index("### Before a commit: the quick check") :]
    found: list[str] = re.findall(r"```\n(python -m pytest[^\n]*)\n```", section)
    return found[0]


class TestTheQuickCheck:
    """``python -m pytest -m "not slow"``: the core before a commit; .ci/run runs everything."""

    def test_ci_runs_the_documented_command_before_readmes_test_command_last(self) -> None:
        run = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
        commands = [ln.strip() for ln in run if ln.strip() and not ln.lstrip().startswith("#")]
        quick = documented_quick_check()
        assert quick == 'python -m pytest -m "not slow"'
        (at,) = [i for i, ln in enumerate(commands) if ln.startswith(quick)]
        readme = (ROOT / "README.md").read_text(encoding="utf-8")
        (test_command,) = re.findall(r"```\n(pip install -e '\.\[test\]'[^\n]*)\n```", readme)
        assert commands[-1] == test_command, "README's test command is not .ci/run's last"
        assert at < len(commands) - 1

    def test_the_slow_marker_is_registered_and_every_slow_file_exists(self) -> None:
        import conftest

        markers = pyproject()["tool"]["pytest"]["ini_options"]["markers"]
        assert [m.split(":")[0] for m in markers] == ["slow"]
        missing = sorted(n for n in conftest.SLOW_FILES if not (ROOT / "tests" / n).exists())
        assert not missing, f"SLOW_FILES names files that are gone: {missing}"

    def test_the_frameworks_postgresql_and_the_browser_are_all_slow(self) -> None:
        import conftest

        heavy = [
            p.name
            for p in (ROOT / "tests").glob("test_*.py")
            if p.name.startswith(
                ("test_langgraph", "test_pydantic_ai", "test_postgres", "test_mcp", "test_web")
            )
            or p.name.endswith("_benchmark.py")
        ]
        assert heavy and not sorted(set(heavy) - conftest.SLOW_FILES)
