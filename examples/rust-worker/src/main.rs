//! A pyqueue worker in Rust, written from docs/protocol.md alone: the messages below are declared
//! by hand from the field numbers on that page (no code generated from the .proto).
//!
//!     rust-worker ADDRESS QUEUE[,QUEUE...] COUNT
//!
//! It runs jobs of type "add" enqueued by Python (`{"args": [a, b], "kwargs": {}}`): the result
//! is a + b. Any other payload fails the job for good (kill). It stops after COUNT answers that
//! the server confirmed. PYQUEUE_TOKEN, if set, is sent as `authorization: Bearer TOKEN`.

use std::collections::HashMap;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::codec::ProstCodec;
use tonic::codegen::http::uri::PathAndQuery;
use tonic::transport::Channel;

// What the worker sends.
#[derive(Clone, PartialEq, prost::Message)]
struct Subscribe {
    #[prost(string, repeated, tag = "1")]
    queues: Vec<String>,
    #[prost(uint32, tag = "2")]
    prefetch: u32,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Ack {
    #[prost(uint64, repeated, tag = "1")]
    ids: Vec<u64>,
    #[prost(uint32, repeated, tag = "2")]
    leases: Vec<u32>,
    #[prost(map = "uint64, bytes", tag = "3")]
    results: HashMap<u64, Vec<u8>>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Failure {
    #[prost(uint64, tag = "1")]
    id: u64,
    #[prost(string, tag = "2")]
    message: String,
    #[prost(string, tag = "3")]
    error_type: String,
    #[prost(bool, tag = "5")]
    kill: bool,
    #[prost(uint32, tag = "7")]
    lease: u32,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Fail {
    #[prost(message, repeated, tag = "1")]
    failures: Vec<Failure>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct TakeRequest {
    #[prost(message, optional, tag = "1")]
    subscribe: Option<Subscribe>,
    #[prost(message, optional, tag = "2")]
    ack: Option<Ack>,
    #[prost(message, optional, tag = "3")]
    fail: Option<Fail>,
    #[prost(bool, tag = "7")]
    closing: bool,
}

// What the server sends.
#[derive(Clone, PartialEq, prost::Message)]
struct Job {
    #[prost(uint64, tag = "1")]
    id: u64,
    #[prost(string, tag = "2")]
    r#type: String,
    #[prost(bytes = "vec", tag = "5")]
    payload: Vec<u8>,
    #[prost(string, tag = "6")]
    content_type: String,
    #[prost(uint32, tag = "12")]
    lease: u32,
    #[prost(bool, tag = "21")]
    wants_result: bool,
}

#[derive(Clone, PartialEq, prost::Message)]
struct JobBatch {
    #[prost(message, repeated, tag = "1")]
    jobs: Vec<Job>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Rejection {
    #[prost(uint64, tag = "1")]
    id: u64,
    #[prost(string, tag = "2")]
    code: String,
    #[prost(string, tag = "3")]
    message: String,
}

#[derive(Clone, PartialEq, prost::Message)]
struct AckResult {
    #[prost(uint64, repeated, tag = "1")]
    acked: Vec<u64>,
    #[prost(message, repeated, tag = "2")]
    rejected: Vec<Rejection>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct FailOutcome {
    #[prost(uint64, tag = "1")]
    id: u64,
    #[prost(int32, tag = "2")]
    status: i32,
}

#[derive(Clone, PartialEq, prost::Message)]
struct FailResult {
    #[prost(message, repeated, tag = "1")]
    failed: Vec<FailOutcome>,
    #[prost(message, repeated, tag = "2")]
    rejected: Vec<Rejection>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Empty {}

#[derive(Clone, PartialEq, prost::Message)]
struct Cancel {
    #[prost(uint64, repeated, tag = "1")]
    ids: Vec<u64>,
}

#[derive(Clone, PartialEq, prost::Oneof)]
enum Kind {
    #[prost(message, tag = "1")]
    Jobs(JobBatch),
    #[prost(message, tag = "2")]
    Heartbeat(Empty), // its server_time_ms (1) is skipped as an unknown field: we ignore it
    #[prost(message, tag = "3")]
    AckResult(AckResult),
    #[prost(message, tag = "4")]
    FailResult(FailResult),
    #[prost(message, tag = "5")]
    Stopping(Empty),
    #[prost(message, tag = "6")]
    Cancel(Cancel),
}

#[derive(Clone, PartialEq, prost::Message)]
struct TakeResponse {
    #[prost(oneof = "Kind", tags = "1, 2, 3, 4, 5, 6")]
    kind: Option<Kind>,
}

/// The handler: "add" with the Python envelope {"args": [a, b], "kwargs": {}}.
fn run(job: &Job) -> Result<serde_json::Value, String> {
    if job.r#type != "add" || job.content_type != "application/json" {
        return Err(format!(
            "no handler for type {:?} ({})",
            job.r#type, job.content_type
        ));
    }
    let envelope: serde_json::Value =
        serde_json::from_slice(&job.payload).map_err(|e| e.to_string())?;
    let args = envelope["args"].as_array().ok_or("args must be a list")?;
    match args.as_slice() {
        [a, b] => match (a.as_f64(), b.as_f64()) {
            (Some(a), Some(b)) => Ok(serde_json::json!(a + b)),
            _ => Err(format!("add needs two numbers, got {a} and {b}")),
        },
        _ => Err(format!("add takes 2 arguments, got {}", args.len())),
    }
}

fn answer(job: &Job) -> TakeRequest {
    match run(job) {
        Ok(value) => {
            let mut results = HashMap::new();
            if job.wants_result {
                results.insert(job.id, value.to_string().into_bytes());
            }
            TakeRequest {
                ack: Some(Ack {
                    ids: vec![job.id],
                    leases: vec![job.lease],
                    results,
                }),
                ..Default::default()
            }
        }
        Err(message) => TakeRequest {
            fail: Some(Fail {
                failures: vec![Failure {
                    id: job.id,
                    message,
                    error_type: "TypeError".into(),
                    kill: true,
                    lease: job.lease,
                }],
            }),
            ..Default::default()
        },
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, address, queues, count] = args.as_slice() else {
        return Err("usage: rust-worker ADDRESS QUEUE[,QUEUE...] COUNT".into());
    };
    let count: usize = count.parse()?;
    let channel = Channel::from_shared(format!("http://{address}"))?
        .connect()
        .await?;
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await?;

    let (outbox, requests) = mpsc::channel::<TakeRequest>(64);
    outbox
        .send(TakeRequest {
            subscribe: Some(Subscribe {
                queues: queues.split(',').map(String::from).collect(),
                prefetch: 4,
            }),
            ..Default::default()
        })
        .await?;
    let mut request = tonic::Request::new(ReceiverStream::new(requests));
    if let Ok(token) = std::env::var("PYQUEUE_TOKEN") {
        request
            .metadata_mut()
            .insert("authorization", format!("Bearer {token}").parse()?);
    }
    let codec: ProstCodec<TakeRequest, TakeResponse> = ProstCodec::default();
    let path = PathAndQuery::from_static("/pyqueue.v1.Queue/Take");
    let mut responses = grpc.streaming(request, path, codec).await?.into_inner();

    let (mut acked, mut failed) = (0, 0);
    while acked + failed < count {
        let Some(response) = responses.message().await? else {
            return Err("the server ended the stream".into());
        };
        match response.kind {
            Some(Kind::Jobs(batch)) => {
                for job in &batch.jobs {
                    outbox.send(answer(job)).await?;
                }
            }
            Some(Kind::AckResult(result)) => {
                acked += result.acked.len();
                for r in result.rejected {
                    eprintln!("ack of {} refused: {} {}", r.id, r.code, r.message);
                }
            }
            Some(Kind::FailResult(result)) => {
                failed += result.failed.len();
                for r in result.rejected {
                    eprintln!("failure of {} refused: {} {}", r.id, r.code, r.message);
                }
            }
            Some(Kind::Stopping(_)) => return Err("the server is stopping".into()),
            Some(Kind::Heartbeat(_)) | Some(Kind::Cancel(_)) | None => {}
        }
    }
    outbox
        .send(TakeRequest {
            closing: true,
            ..Default::default()
        })
        .await?;
    drop(outbox); // the half-close: a clean end
    while responses.message().await?.is_some() {}
    println!("done: {acked} acked, {failed} failed");
    Ok(())
}
