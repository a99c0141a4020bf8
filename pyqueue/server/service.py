"""The Queue servicer: protobuf in, engine calls, protobuf out."""

from pyqueue.engine import Engine, EngineError
from pyqueue.server.config import ServerConfig
from pyqueue.server.convert import job_to_pb
from pyqueue.server.status import Context, abort
from pyqueue.server.take import TakeStream
from pyqueue.v1 import queue_pb2 as pb
from pyqueue.v1 import queue_pb2_grpc as pb_grpc


class QueueService(pb_grpc.QueueServicer):
    def __init__(self, engine: Engine, config: ServerConfig) -> None:
        self.engine = engine
        self.config = config
        self.streams: set[TakeStream] = set()

    async def Enqueue(self, request: pb.EnqueueRequest, context: Context) -> pb.EnqueueResponse:
        engine = self.engine
        try:
            engine.config.limits.check_batch_size(len(request.jobs))
            jobs = [
                engine.new_job(
                    i,
                    j.type,
                    j.queue,
                    j.priority if j.HasField("priority") else None,
                    j.payload,
                    j.content_type,
                )
                for i, j in enumerate(request.jobs)
            ]
            ids = await engine.enqueue(jobs)
        except EngineError as exc:
            await abort(context, exc)
        return pb.EnqueueResponse(jobs=[pb.Enqueued(id=job_id) for job_id in ids])

    async def GetJob(self, request: pb.GetJobRequest, context: Context) -> pb.Job:
        try:
            return job_to_pb(self.engine.get_job(request.id))
        except EngineError as exc:
            await abort(context, exc)

    async def Take(self, request_iterator: object, context: Context) -> None:  # type: ignore[override]
        stream = TakeStream(self.engine, context, self.config.heartbeat_s)
        self.streams.add(stream)
        try:
            await stream.run()
        finally:
            self.streams.discard(stream)

    def end_streams(self) -> None:
        for stream in tuple(self.streams):
            stream.end()
