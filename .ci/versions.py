"""Print the versions this environment resolved for the dependencies that matter most.

.ci/run prints them for the newest-versions venv and for the lower-bounds one, so a CI
log says which SDK releases the suite passed with (issue 37).
"""

from __future__ import annotations

import sys
from importlib.metadata import PackageNotFoundError, version

NAMES = (
    "anthropic",
    "openai",
    "mcp",
    "httpx2",
    "pydantic",
    "typer",
    "rich",
    "numpy",
    "scipy",
    "statsmodels",
    "matplotlib",
    "msgspec",
    "inspect_ai",
    "pyarrow",
    "psycopg",
)


def main() -> None:
    label = sys.argv[1] if len(sys.argv) > 1 else "resolved"
    found = []
    for name in NAMES:
        try:
            found.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            found.append(f"{name} (not installed)")
    print(f"{label} versions: " + ", ".join(found), flush=True)


if __name__ == "__main__":
    main()
