"""The wheels `make wheels` builds: abi3 (one wheel for Python 3.11 and later) and manylinux
(glibc 2.17, checked by auditwheel), and an sdist that builds a wheel by itself. Any other wheel
in dist/ (the aarch64 one from `make wheels-aarch64`) has its tags checked too."""

import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from packaging.utils import parse_wheel_filename

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def _tags(wheel: Path) -> set[str]:
    _, _, _, tags = parse_wheel_filename(wheel.name)
    return {str(tag) for tag in tags}


def _check_tags(wheel: Path, arch: str) -> None:
    tags = _tags(wheel)
    assert f"cp311-abi3-manylinux_2_17_{arch}" in tags, tags
    assert all(tag.startswith("cp311-abi3-") for tag in tags), tags


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_make_wheels_builds_abi3_manylinux_and_an_sdist_that_builds(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    env = {
        **os.environ,
        "PATH": f"{BIN}:{os.environ['PATH']}",
        "CARGO_TARGET_DIR": str(ROOT / "target" / "wheels"),
    }
    maturin = [str(BIN / "maturin")]
    subprocess.run(
        [*maturin, "build", "--release", "--zig", "--compatibility", "manylinux2014", "--out", str(dist)],
        cwd=ROOT, env=env, check=True, capture_output=True, timeout=600,
    )  # fmt: skip
    (wheel,) = dist.glob("*.whl")
    _check_tags(wheel, "x86_64")
    for other in sorted((ROOT / "dist").glob("pyqueue-*.whl")):  # e.g. from make wheels-aarch64
        _check_tags(other, "aarch64" if "aarch64" in other.name else "x86_64")
    shown = subprocess.run(
        [str(BIN / "auditwheel"), "show", str(wheel)], capture_output=True, text=True, check=True, timeout=120
    )
    assert 'consistent with the following platform tag:\n"manylinux_2_17_x86_64"' in shown.stdout, (
        shown.stdout
    )

    subprocess.run(
        [*maturin, "sdist", "--out", str(dist)], cwd=ROOT, env=env, check=True, capture_output=True
    )
    (sdist,) = dist.glob("*.tar.gz")
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    assert {"pyproject.toml", "native/Cargo.toml", "native/src/ready.rs", "pyqueue/__init__.py"} <= names
    rebuilt = tmp_path / "from-sdist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(sdist), "--no-deps", "-q", "-w", str(rebuilt)],
        env=env, check=True, capture_output=True, timeout=600,
    )  # fmt: skip
    (from_sdist,) = rebuilt.glob("*.whl")
    assert all(tag.startswith("cp311-abi3-") for tag in _tags(from_sdist))


@pytest.mark.timeout(300)
def test_the_sdist_carries_the_wire_contract_and_the_licence(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}"}
    subprocess.run(
        [str(BIN / "maturin"), "sdist", "--out", str(tmp_path)],
        cwd=ROOT, env=env, check=True, capture_output=True, timeout=240,
    )  # fmt: skip
    (sdist,) = tmp_path.glob("*.tar.gz")
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    assert {"proto/pyqueue/v1/queue.proto", "LICENSE", "README.md"} <= names
