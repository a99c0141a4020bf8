"""The gRPC transport pyqueue asks for (pyqueue/_grpc_env.py): only where it was measured, never over
the user's own choice, and with flags the installed grpcio knows."""

import os
import subprocess
import sys

from pyqueue._grpc_env import LEGACY_ENDPOINTS, choose


def test_the_legacy_endpoints_are_asked_for_only_on_the_measured_grpcio_versions() -> None:
    assert choose({}, grpc_imported=False, grpcio_version="1.85.3") == LEGACY_ENDPOINTS
    assert choose({}, grpc_imported=False, grpcio_version="1.80.0") == LEGACY_ENDPOINTS
    assert choose({}, grpc_imported=False, grpcio_version="1.79.1") is None  # before EventEngine
    assert choose({}, grpc_imported=False, grpcio_version="1.86.0") is None  # not measured
    assert choose({}, grpc_imported=False, grpcio_version="2.0.0") is None
    assert choose({}, grpc_imported=False, grpcio_version="nonsense") is None
    assert choose({}, grpc_imported=False, grpcio_version=None) is None


def test_the_users_own_setting_and_an_imported_grpc_are_left_alone() -> None:
    assert choose({"GRPC_EXPERIMENTS": ""}, grpc_imported=False, grpcio_version="1.85.3") is None
    assert choose({"GRPC_EXPERIMENTS": "x"}, grpc_imported=False, grpcio_version="1.85.3") is None
    assert choose({}, grpc_imported=True, grpcio_version="1.85.3") is None


def _fresh(script: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k != "GRPC_EXPERIMENTS"} | env
    return subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env=environ
    )


def test_importing_pyqueue_sets_it_before_grpc_and_grpc_knows_every_flag() -> None:
    script = (
        "import os, pyqueue, grpc\n"
        "grpc.insecure_channel('127.0.0.1:1').close()\n"
        "print(os.environ.get('GRPC_EXPERIMENTS', '<unset>'))\n"
    )
    out = _fresh(script)
    assert out.returncode == 0, out.stderr
    chosen = out.stdout.strip()
    assert chosen in (LEGACY_ENDPOINTS, "<unset>")  # unset: a grpcio outside the measured range
    assert "Unknown experiment" not in out.stderr, out.stderr


def test_grpc_imported_first_or_an_explicit_setting_wins() -> None:
    out = _fresh("import grpc, os, pyqueue\nprint(os.environ.get('GRPC_EXPERIMENTS', '<unset>'))\n")
    assert out.stdout.strip() == "<unset>", out.stderr
    out = _fresh("import os, pyqueue\nprint(repr(os.environ['GRPC_EXPERIMENTS']))\n", GRPC_EXPERIMENTS="")
    assert out.stdout.strip() == "''", out.stderr


def test_grpc_core_info_lines_are_off_unless_asked_for() -> None:
    script = "import os, pyqueue\nprint(os.environ['GRPC_VERBOSITY'])\n"
    environ = {k: v for k, v in os.environ.items() if k != "GRPC_VERBOSITY"}
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env=environ
    )
    assert out.stdout.strip() == "ERROR", out.stderr
    assert _fresh(script, GRPC_VERBOSITY="INFO").stdout.strip() == "INFO"
