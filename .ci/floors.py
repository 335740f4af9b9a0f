"""Print a pip constraints file that pins every runtime dependency of pyproject.toml to its declared floor
(`name>=X` becomes `name==X`), so CI can test the oldest versions weightkit claims to work with.

Read from pyproject.toml itself, the floors tested are the floors declared: they cannot drift apart.
Usage (Python 3.11+, for tomllib): python .ci/floors.py [pyproject.toml] > floors.txt
"""

from __future__ import annotations

import re
import sys
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


if __name__ == "__main__":
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1] / "pyproject.toml"
    print("\n".join(floors(path)))
