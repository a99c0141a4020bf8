"""A Backup asks before it writes: a token without `admin:*` is refused PERMISSION_DENIED and no
directory is made; a path the server cannot use is INVALID_ARGUMENT (saying why), and nothing is
made either. Two shards (the router prepares the layout) and one (the shard does)."""

from pathlib import Path

import pytest
from auth_files import write_auth_file
from harness import ServerProcess

import pyqueue


@pytest.mark.parametrize("shards", ["2", "1"])
def test_backup_checks_the_right_then_the_path_then_writes(tmp_path: Path, shards: str) -> None:
    tokens = write_auth_file(tmp_path / "auth.toml")
    server = ServerProcess(tmp_path / "data", "--shards", shards, "--auth-file", str(tmp_path / "auth.toml"))
    server.start()
    try:
        target = tmp_path / "copy"
        for name in ("reader", "producer", "worker", "admin"):  # admin of one queue only
            with (
                pyqueue.Client(server.address, token=tokens[name]) as client,
                pytest.raises(pyqueue.PermissionDenied, match="admin"),
            ):
                client.backup(str(target))
            assert not target.exists(), name
        bad = {
            str(tmp_path / "a\0b"): "NUL",
            "/" + "d" * 100_000: "bytes",
            str(tmp_path / ("n" * 5000)): "over 255 bytes",
            "/proc/self/pyqueue-copy": "kernel filesystem",
            "relative/copy": "absolute",
        }
        with pyqueue.Client(server.address, token=tokens["root"]) as root:
            for path, says in bad.items():
                with pytest.raises(pyqueue.InvalidArgument, match=says):
                    root.backup(path)
            assert sorted(p.name for p in tmp_path.iterdir()) == ["auth.toml", "data"]
            assert len(root.backup(str(target))) == int(shards)  # and the right holder's backup is made
        assert target.is_dir()
    finally:
        server.close()
