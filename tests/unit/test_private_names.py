"""No lockyard module reaches into another module's private names.

A name with a leading underscore belongs to the module that defines it: importing it
(`from .utilities import _helper`) or reading it through an imported module
(`store_module._helper`) ties two modules together behind their backs. Private *modules* of a
package (`cli/_errors.py`) are the package's to import, and other libraries' private names
(`os._exit`) are theirs to judge, so both are left alone here.
"""

from __future__ import annotations

import ast
from pathlib import Path

import lockyard

PACKAGE = Path(lockyard.__file__).parent


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _imported_module(path: Path, node: ast.ImportFrom) -> Path | None:
    """The folder or file of lockyard that `node` imports from; None outside lockyard."""
    if node.level:
        base = path.parent
        for _ in range(node.level - 1):
            base = base.parent
    elif node.module is not None and node.module.split(".")[0] == "lockyard":
        base = PACKAGE
        node = ast.ImportFrom(module=".".join(node.module.split(".")[1:]), names=node.names)
    else:
        return None
    for part in (node.module or "").split("."):
        if part:
            base = base / part
    return base


def _is_module(place: Path, name: str) -> bool:
    return (place / f"{name}.py").exists() or (place / name / "__init__.py").exists()


def private_names_used_across_modules(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    found: list[str] = []
    modules: set[str] = set()  # local names bound to lockyard modules
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        place = _imported_module(path, node)
        if place is None:
            continue
        for alias in node.names:
            if _is_module(place, alias.name):
                modules.add(alias.asname or alias.name)
            elif _private(alias.name):
                found.append(f"line {node.lineno} imports {alias.name}")
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and _private(node.attr)
            and isinstance(node.value, ast.Name)
            and node.value.id in modules
        ):
            found.append(f"line {node.lineno} reads {node.value.id}.{node.attr}")
    return found


def test_no_module_uses_another_modules_private_names() -> None:
    found = [
        f"{path.relative_to(PACKAGE)}: {use}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for use in private_names_used_across_modules(path)
    ]
    assert found == [], "make the name public in the module that owns it:\n" + "\n".join(found)


def test_the_check_sees_an_imported_private_name_and_one_read_through_a_module(
    tmp_path: Path,
) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "owner.py").write_text("def _helper() -> None: ...\n")
    (package / "_private_module.py").write_text("")
    (package / "user.py").write_text(
        "from . import owner, _private_module\n"
        "from .owner import _helper\n"
        "owner._helper()\n"
        "import os\n"
        "os._exit\n"
    )
    assert private_names_used_across_modules(package / "user.py") == [
        "line 2 imports _helper",
        "line 3 reads owner._helper",
    ]
