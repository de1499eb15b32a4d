"""No lockyard module reaches into another module's private names.

A name with a leading underscore belongs to the module that defines it: importing it
(`from .utilities import _helper`), reading it through an imported module
(`store_module._helper`), or reaching it on another module's object (`store._forget(...)`,
a `_name` this module never defines) ties two modules together behind their backs. Private
*modules* of a package (`cli/_errors.py`) are the package's to import, and other libraries'
private names (`os._exit`) are theirs to judge, so both are left alone here.
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


def private_attributes_from_elsewhere(path: Path) -> list[str]:
    """Each `x._name` whose `_name` this module never binds (defines, assigns or imports):
    the attribute of an object another module made. A read through a module of another
    library (`os._exit`) is that library's business."""
    tree = ast.parse(path.read_text(), str(path))
    bound: set[str] = set()
    other_libraries: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, (ast.Store, ast.Del)):
            bound.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound.add(node.id)
        elif isinstance(node, ast.keyword) and node.arg is not None:
            bound.add(node.arg)  # a field set by name: Record(_a=...)
        elif isinstance(node, ast.Import):
            other_libraries.update(
                (alias.asname or alias.name).split(".")[0]
                for alias in node.names
                if alias.name.split(".")[0] != "lockyard"
            )
        elif isinstance(node, ast.ImportFrom):
            names = {alias.asname or alias.name for alias in node.names}
            bound.update(names)
            if not node.level and (node.module or "").split(".")[0] != "lockyard":
                other_libraries.update(names)
    return [
        f"line {node.lineno} reads {ast.unparse(node)}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and _private(node.attr)
        and node.attr not in bound
        and not (isinstance(node.value, ast.Name) and node.value.id in other_libraries)
    ]


def test_no_module_uses_another_modules_private_names() -> None:
    found = [
        f"{path.relative_to(PACKAGE)}: {use}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for use in private_names_used_across_modules(path) + private_attributes_from_elsewhere(path)
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


def test_the_check_sees_another_modules_private_attribute_on_its_object(tmp_path: Path) -> None:
    user = tmp_path / "user.py"
    user.write_text(
        "import os\n"
        "from .store import LockStore\n"
        "class Cleaner:\n"
        "    def __init__(self, store: LockStore) -> None:\n"
        "        self._store = store\n"
        "    def _own(self) -> None: ...\n"
        "    def clean(self) -> None:\n"
        "        self._own()\n"
        "        self._store._forget('a.py')\n"
        "        os._exit(0)\n"
    )
    assert private_attributes_from_elsewhere(user) == ["line 9 reads self._store._forget"]
