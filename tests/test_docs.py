"""Every Python snippet in docs/ runs as written (except configuration fragments), and says
nothing on stderr: a traceback after the right answer is a broken snippet too."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"
BLOCK = re.compile(r"```python\n(.*?)```", re.S)
SNIPPETS = [
    (page.name, i, code)
    for page in sorted(DOCS.glob("*.md"))
    for i, code in enumerate(BLOCK.findall(page.read_text()))
    if "import pyqueue" in code
]


@pytest.mark.parametrize(("page", "index", "code"), SNIPPETS, ids=[f"{p}-{i}" for p, i, _ in SNIPPETS])
def test_snippet_runs(page: str, index: int, code: str, tmp_path: Path) -> None:
    script = tmp_path / "snippet.py"
    script.write_text(code)
    out = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert out.returncode == 0, f"{page} snippet {index}:\n{out.stderr}"
    assert out.stderr == "", f"{page} snippet {index} wrote to stderr:\n{out.stderr}"
