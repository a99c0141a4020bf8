"""The defaults that more than one part of pyqueue shows or uses, written once. It imports nothing,
so the CLI, the client and the server read them without loading the server (or rocksdict).
Everything else has its default on its own config (ServerConfig, Limits, RetryPolicy,
WorkerConfig), and tests/cli/test_defaults.py holds every CLI option's default to it."""

ADDRESS = "127.0.0.1:7411"  # where clients dial, and where `pyqueue serve` listens
HTTP_LISTEN = "127.0.0.1:7412"  # /metrics, /healthz, the dashboard and the jobs API
DATA_DIR = "./pyqueue-data"
PRIORITY = 32768  # 0 runs first, 65535 last
