"""The checked-in generated protobuf code matches proto/: regenerate and compare."""

import filecmp
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_generated_code_is_current(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_proto.py"), str(tmp_path)],
        check=True,
        env={"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"},
    )
    fresh = sorted(p.name for p in (tmp_path / "pyqueue" / "v1").iterdir())
    assert fresh, "nothing was generated"
    for name in fresh:
        assert filecmp.cmp(
            tmp_path / "pyqueue" / "v1" / name, ROOT / "pyqueue" / "v1" / name, shallow=False
        ), f"pyqueue/v1/{name} is stale: run `make proto` and commit the result"
