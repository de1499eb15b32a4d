"""The package says where it runs: Linux only (inotify, eventfd, pidfds, /proc)."""

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_package_metadata_says_linux_only() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    systems = [c for c in project["classifiers"] if c.startswith("Operating System ::")]
    assert systems == ["Operating System :: POSIX :: Linux"]


def test_the_readme_says_linux_only_and_why() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "**Linux only**" in readme
    for needed in ("inotify", "eventfd", "pidfd"):
        assert needed in readme
