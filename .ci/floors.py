"""Print a pip constraints file that pins every runtime dependency of pyproject.toml to its declared floor
(`name>=X` becomes `name==X`), so CI can test the oldest versions weightkit claims to work with, and every
other package to its pin in tests/constraints.txt (the test environment's; a runtime dependency's pin there
gives way to its floor).

Read from pyproject.toml itself, the floors tested are the floors declared: they cannot drift apart.
Usage (Python 3.11+, for tomllib): python .ci/floors.py > floors.txt
"""

from __future__ import annotations

import re
from pathlib import Path

import tomllib

#: One requirement with a floor: a name, optional extras, then `>=` and a version, e.g. `mlx[cpu]>=0.32`.
FLOOR = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*>=\s*([0-9][^,;\s]*)")


def floors(pyproject: Path) -> list[str]:
    """`name==floor` for each runtime dependency; one without a `>=` floor is an error, not a silent skip."""
    requirements = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    pins = []
    for requirement in requirements:
        match = FLOOR.match(requirement)
        if match is None:
            raise SystemExit(f"{pyproject}: dependency {requirement!r} declares no '>=' floor")
        pins.append(f"{match[1]}=={match[2]}")
    return pins


def test_pins(constraints: Path, skip: set[str]) -> list[str]:
    """The lines of the test environment's constraints file that pin a package not in `skip`."""
    pins = []
    for line in constraints.read_text().splitlines():
        requirement = line.split("#", 1)[0].strip()
        if requirement and _name(requirement.split("==", 1)[0]) not in skip:
            pins.append(requirement)
    return pins


def _name(text: str) -> str:
    """A package's name as pip compares names (PEP 503)."""
    return re.sub(r"[-_.]+", "-", text.strip()).lower()


if __name__ == "__main__":
    repo = Path(__file__).resolve().parents[1]
    pinned = floors(repo / "pyproject.toml")
    runtime = {_name(pin.split("==", 1)[0]) for pin in pinned}
    print("\n".join(pinned + test_pins(repo / "tests" / "constraints.txt", runtime)))
