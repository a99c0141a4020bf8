"""Fuzzing every RPC of a real server: hypothesis builds messages from the protocol's own
descriptors (extreme numbers, NaN, long strings, any enum value, nested messages) and raw bytes.
Every call must end with a status, the server must never exit, and `pyqueue check` must find the
store consistent afterwards. The budget is fixed (PYQUEUE_FUZZ_EXAMPLES per RPC)."""

import os
from collections import Counter
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from harness import ServerProcess, check_store
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pyqueue.v1 import queue_pb2 as pb

EXAMPLES = int(os.environ.get("PYQUEUE_FUZZ_EXAMPLES", "100"))
SERVICE = pb.DESCRIPTOR.services_by_name["Queue"]
UNARY = [m for m in SERVICE.methods if not m.client_streaming]
CODES: Counter[str] = Counter()

_INTS = {
    FieldDescriptor.TYPE_INT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_SINT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_SFIXED32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_INT64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_SINT64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_SFIXED64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_UINT32: (0, 2**32 - 1),
    FieldDescriptor.TYPE_FIXED32: (0, 2**32 - 1),
    FieldDescriptor.TYPE_UINT64: (0, 2**64 - 1),
    FieldDescriptor.TYPE_FIXED64: (0, 2**64 - 1),
}


def _scalar(field: FieldDescriptor) -> st.SearchStrategy[Any]:
    if field.type in _INTS:
        low, high = _INTS[field.type]
        return st.one_of(st.sampled_from([low, high, 0, 1, -1 if low < 0 else 2]), st.integers(low, high))
    if field.type in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
        return st.floats(
            allow_nan=True, allow_infinity=True, width=64 if field.type == FieldDescriptor.TYPE_DOUBLE else 32
        )
    if field.type == FieldDescriptor.TYPE_BOOL:
        return st.booleans()
    if field.type == FieldDescriptor.TYPE_STRING:
        return st.one_of(st.text(max_size=20), st.sampled_from(["default", "q", "x" * 70_000, "a/b", "é"]))
    if field.type == FieldDescriptor.TYPE_BYTES:
        return st.one_of(st.binary(max_size=64), st.just(b"\0" * (2 << 20)))
    if field.type == FieldDescriptor.TYPE_ENUM:
        return st.integers(-1, 8)
    raise AssertionError(f"no strategy for {field.full_name}")


def messages(descriptor: Descriptor, depth: int = 0) -> st.SearchStrategy[Any]:
    """A message of this type, any subset of its fields set."""
    cls = _class(descriptor)
    fields: dict[str, st.SearchStrategy[Any]] = {}
    for field in descriptor.fields:
        if field.message_type is not None:
            if field.message_type.GetOptions().map_entry or depth > 2:
                continue
            value = messages(field.message_type, depth + 1)
        else:
            value = _scalar(field)
        if field.is_repeated:
            value = st.lists(value, max_size=4 if field.message_type is not None else 8)
        fields[field.name] = value

    @st.composite
    def build(draw: st.DrawFn) -> Any:
        message = cls()
        for name, strategy in fields.items():
            if draw(st.booleans()):
                value = draw(strategy)
                field = descriptor.fields_by_name[name]
                if field.is_repeated:
                    getattr(message, name).extend(value)
                elif field.message_type is not None:
                    getattr(message, name).CopyFrom(value)
                else:
                    setattr(message, name, value)
        return message

    return build()


def _class(descriptor: Descriptor) -> Any:
    return getattr(pb, descriptor.name)


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, grpc.Channel]]:
    server = ServerProcess(tmp_path_factory.mktemp("fuzz") / "data").start()
    options = [("grpc.max_send_message_length", 64 << 20), ("grpc.max_receive_message_length", 64 << 20)]
    channel = grpc.insecure_channel(server.address, options=options)
    yield server, channel
    channel.close()
    assert server.proc is not None and server.proc.poll() is None, "the server never exits"
    assert server.stop() == 0
    checked = check_store(server.data_dir)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    print(f"\nfuzz: {sum(CODES.values())} calls answered: {dict(sorted(CODES.items()))}")


def _answered(call: Any) -> None:
    try:
        call()
        CODES["OK"] += 1
    except grpc.RpcError as exc:
        code = exc.code()
        assert code not in (grpc.StatusCode.UNKNOWN, grpc.StatusCode.UNAVAILABLE), exc.details()
        CODES[code.name] += 1


FUZZ = settings(
    max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True
)


@pytest.mark.parametrize("method", UNARY, ids=[m.name for m in UNARY])
def test_every_unary_rpc_answers_any_message_with_a_status(fuzzed, method) -> None:  # type: ignore[no-untyped-def]
    _, channel = fuzzed
    call = channel.unary_unary(
        f"/{SERVICE.full_name}/{method.name}",
        request_serializer=lambda m: m.SerializeToString(),
        response_deserializer=_class(method.output_type).FromString,
    )

    @FUZZ
    @given(messages(method.input_type))
    def run(request: Any) -> None:
        _answered(lambda: call(request, timeout=30))

    run()


@pytest.mark.parametrize("method", UNARY, ids=[m.name for m in UNARY])
def test_every_unary_rpc_answers_raw_bytes_with_a_status(fuzzed, method) -> None:  # type: ignore[no-untyped-def]
    _, channel = fuzzed
    call = channel.unary_unary(f"/{SERVICE.full_name}/{method.name}")  # bytes in, bytes out

    @FUZZ
    @given(st.binary(max_size=256))
    def run(raw: bytes) -> None:
        try:
            call(raw, timeout=30)
            CODES["OK"] += 1
        except grpc.RpcError as exc:
            assert exc.code() not in (grpc.StatusCode.UNKNOWN, grpc.StatusCode.UNAVAILABLE), exc.details()
            CODES[exc.code().name] += 1

    run()


def test_take_answers_any_sequence_of_messages_with_a_status(fuzzed) -> None:  # type: ignore[no-untyped-def]
    _, channel = fuzzed
    take = channel.stream_stream(
        f"/{SERVICE.full_name}/Take",
        request_serializer=lambda m: m.SerializeToString(),
        response_deserializer=pb.TakeResponse.FromString,
    )
    subscribe = st.builds(
        lambda queues, prefetch, starts: pb.TakeRequest(
            subscribe=pb.Subscribe(queues=queues, prefetch=prefetch, reports_starts=starts)
        ),
        st.lists(st.sampled_from(["default", "q", "", "x" * 300]), max_size=3),
        st.integers(0, 20_000),
        st.booleans(),
    )

    @FUZZ
    @given(
        st.one_of(subscribe, messages(pb.TakeRequest.DESCRIPTOR)),
        st.lists(messages(pb.TakeRequest.DESCRIPTOR), max_size=4),
    )
    def run(first: pb.TakeRequest, rest: list[pb.TakeRequest]) -> None:
        def call() -> None:
            for _ in take(iter([first, *rest]), timeout=2):
                pass

        _answered(call)

    run()


def test_enqueue_stream_answers_any_sequence_with_a_status(fuzzed) -> None:  # type: ignore[no-untyped-def]
    _, channel = fuzzed
    stream = channel.stream_stream(f"/{SERVICE.full_name}/EnqueueStream")  # bytes in, bytes out
    request = st.one_of(
        st.binary(max_size=128), messages(pb.EnqueueRequest.DESCRIPTOR).map(lambda m: m.SerializeToString())
    )

    @FUZZ
    @given(st.lists(request, max_size=4))
    def run(raws: list[bytes]) -> None:
        def call() -> None:
            for raw in stream(iter(raws), timeout=10):
                answer = pb.EnqueueResponse.FromString(raw)
                if answer.HasField("error"):  # refused in-band: a code that names the fix
                    assert answer.error.code not in ("UNKNOWN", "UNAVAILABLE", ""), answer.error.message
                    CODES[answer.error.code] += 1

        _answered(call)

    run()
