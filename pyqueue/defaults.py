"""The defaults that more than one part of pyqueue shows or uses, written once. It imports nothing,
so the CLI, the client and the server read them without loading the server (or rocksdict).
Everything else has its default on its own config (ServerConfig, Limits, RetryPolicy,
WorkerConfig), and tests/cli/test_defaults.py holds every CLI option's default to it."""

ADDRESS = "127.0.0.1:7411"  # where clients dial, and where `pyqueue serve` listens
HTTP_LISTEN = "127.0.0.1:7412"  # /metrics, /healthz, the dashboard and the jobs API
DATA_DIR = "./pyqueue-data"
PRIORITY = 32768  # 0 runs first, 65535 last
# Of a shard's loop, for reads, while work comes in (`pyqueue serve --read-share`, server/read_share.py).
# A read holds the loop for its whole answer (grpc encodes it in one piece), and an enqueue that
# comes meanwhile waits: at a tenth, one in ten enqueues met a read and the producer's p99 doubled
# to tripled (bench/read_flood.py); at a fiftieth, one in fifty does, which a p99 hardly sees.
READ_SHARE = 0.02
