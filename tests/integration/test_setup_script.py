"""`scripts/uv`, the README's set-up entry point: it runs an existing uv, else a cached pinned
one, else fetches the pinned wheel and refuses anything whose SHA-256 differs. The fetch from
PyPI itself is exercised on a stock Debian 12 (docs/setup.md); here no network is used."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "uv"


def fake_uv(path: Path, name: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'#!/bin/sh\necho "{name}" "$@"\n')
    path.chmod(0o755)
    return path


def run(
    tmp_path: Path, path_dirs: list[Path], *args: str, **env: str
) -> subprocess.CompletedProcess[str]:
    # sys.executable is the project's venv Python, which cannot import uv: only PATH, the
    # cache or a download can provide it.
    environment = {
        "PATH": ":".join(map(str, path_dirs)),
        "HOME": str(tmp_path / "home"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        **env,
    }
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        env=environment,
        timeout=60,
    )


def test_it_runs_the_uv_on_path_with_the_arguments(tmp_path: Path) -> None:
    fake_uv(tmp_path / "bin" / "uv", "path-uv")
    done = run(tmp_path, [tmp_path / "bin"], "run", "lockyard", "demo")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "path-uv run lockyard demo\n"
    assert not (tmp_path / "cache").exists()  # nothing fetched


def test_without_uv_it_runs_the_pinned_copy_in_the_cache(tmp_path: Path) -> None:
    source = SCRIPT.read_text()
    version = source.split('UV_VERSION = "', 1)[1].split('"', 1)[0]
    fake_uv(tmp_path / "cache" / "lockyard" / f"uv-{version}" / "uv", "cached-uv")
    done = run(tmp_path, [tmp_path / "empty"], "--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "cached-uv --version\n"


@pytest.mark.parametrize("content", [b"not a wheel", b"PK"], ids=["garbage", "truncated"])
def test_a_download_whose_sha256_differs_is_refused_and_nothing_is_installed(
    tmp_path: Path, content: bytes
) -> None:
    bogus = tmp_path / "uv.whl"
    bogus.write_bytes(content)
    done = run(tmp_path, [tmp_path / "empty"], "--version", LOCKYARD_UV_WHEEL_URL=bogus.as_uri())
    assert done.returncode != 0
    assert "SHA-256 mismatch" in done.stderr
    assert "nothing was installed" in done.stderr
    assert "Traceback" not in done.stderr
    assert not any((tmp_path / "cache").rglob("uv"))


def test_a_wheel_that_is_not_the_pinned_one_is_refused_even_if_it_holds_a_uv(
    tmp_path: Path,
) -> None:
    wheel = tmp_path / "uv.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("uv-0.13.9.data/scripts/uv", "#!/bin/sh\necho impostor\n")
    done = run(tmp_path, [tmp_path / "empty"], "--version", LOCKYARD_UV_WHEEL_URL=wheel.as_uri())
    assert done.returncode != 0
    assert "SHA-256 mismatch" in done.stderr
    assert "impostor" not in done.stdout


def test_an_unreachable_download_says_what_to_do(tmp_path: Path) -> None:
    missing = (tmp_path / "nowhere.whl").as_uri()
    done = run(tmp_path, [tmp_path / "empty"], "--version", LOCKYARD_UV_WHEEL_URL=missing)
    assert done.returncode != 0
    assert "cannot fetch" in done.stderr
    assert "install uv yourself" in done.stderr
    assert "Traceback" not in done.stderr
