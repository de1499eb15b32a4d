"""What a wheel of lockyard carries: every package folder and every data file under src/
(setuptools is given an explicit list, since src/ is installed as `lockyard`)."""

from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"


def _setuptools() -> dict[str, object]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    section: dict[str, object] = config["tool"]["setuptools"]
    return section


def _package_name(folder: Path) -> str:
    return ".".join(["lockyard", *folder.relative_to(SRC).parts])


def test_every_package_folder_under_src_is_in_the_wheel() -> None:
    folders = {_package_name(init.parent) for init in SRC.rglob("__init__.py")}
    listed = set(_setuptools()["packages"])  # type: ignore[call-overload]
    assert folders - listed == set(), "add these to [tool.setuptools] packages in pyproject.toml"
    assert listed - folders == set(), "these packages in pyproject.toml have no folder"


def test_every_data_file_under_src_is_in_the_wheel() -> None:
    patterns: dict[str, list[str]] = _setuptools()["package-data"]  # type: ignore[assignment]
    missing = []
    for path in SRC.rglob("*"):
        if not path.is_file() or path.suffix in {".py", ".pyc"} or "__pycache__" in path.parts:
            continue
        package = path.parent
        while not (package / "__init__.py").exists():
            package = package.parent
        relative = path.relative_to(package).as_posix()
        if not any(
            fnmatch.fnmatchcase(relative, pattern)
            for pattern in patterns.get(_package_name(package), [])
        ):
            missing.append(str(path.relative_to(ROOT)))
    assert missing == [], "add these to [tool.setuptools.package-data] in pyproject.toml"
