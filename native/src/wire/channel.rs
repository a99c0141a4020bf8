//! One HTTP/2 connection to a gRPC server, opened on first use and again after it breaks.
//!
//! A call is a future run on the transport's runtime; `unary` and `Stream::exchange` block the
//! calling thread until it is over (the Python edge releases the GIL around them). The connection
//! itself is driven by the runtime's worker, so many threads may call at once on one channel.

use super::frame::{self, Deframer, FrameError};
use super::runtime;
use super::status::{self, Status};
use bytes::Bytes;
use h2::client::{ResponseFuture, SendRequest};
use h2::{Reason, RecvStream, SendStream};
use http::header::{HeaderName, HeaderValue};
use http::{Method, Request, Response};
use std::fmt;
use std::sync::Mutex;
use std::time::Duration;
use tokio::net::TcpStream;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How a call ended when it did not end with an answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallError {
    /// The server ended the call with this status (never OK).
    Status(Status),
    /// No connection, or it broke. `sent`: the request may have reached the server (whether it
    /// acted on it cannot be told), as opposed to never having left.
    Unavailable { message: String, sent: bool },
    /// No answer within the call's time; the call was cancelled.
    DeadlineExceeded,
    /// The server ended the stream cleanly before answering: it never read the request.
    EndedUnanswered,
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallError::Status(s) => write!(f, "status {}: {}", s.code, s.message),
            CallError::Unavailable { message, .. } => write!(f, "unavailable: {message}"),
            CallError::DeadlineExceeded => write!(f, "no answer within the call's time"),
            CallError::EndedUnanswered => {
                write!(f, "the server ended the stream without an answer")
            }
        }
    }
}

impl From<FrameError> for CallError {
    fn from(err: FrameError) -> Self {
        CallError::Status(Status::new(status::INTERNAL, err.to_string()))
    }
}

pub struct Channel {
    address: String,
    metadata: Vec<(HeaderName, HeaderValue)>,
    max_message: usize,
    sender: Mutex<Option<SendRequest<Bytes>>>,
}

impl Channel {
    /// A channel to `address` (host:port), sending `metadata` with every call. Nothing is dialled
    /// until the first call. An invalid metadata name or value is refused here.
    pub fn new(
        address: &str,
        metadata: &[(String, String)],
        max_message: usize,
    ) -> Result<Self, String> {
        let metadata = metadata
            .iter()
            .map(|(k, v)| {
                let name = HeaderName::from_bytes(k.as_bytes())
                    .map_err(|_| format!("metadata name {k:?} is not a valid header name"))?;
                let value = HeaderValue::from_str(v).map_err(|_| {
                    format!("metadata {k:?} has a value that is not a valid header value")
                })?;
                Ok((name, value))
            })
            .collect::<Result<_, String>>()?;
        Ok(Self {
            address: address.to_string(),
            metadata,
            max_message,
            sender: Mutex::new(None),
        })
    }

    /// One request, one answer.
    pub fn unary(&self, path: &str, message: &[u8], timeout: Duration) -> Result<Bytes, CallError> {
        let framed = frame::encode(message);
        runtime().block_on(async {
            match tokio::time::timeout(timeout, self.unary_call(path, framed, timeout)).await {
                Ok(answer) => answer,
                Err(_) => Err(CallError::DeadlineExceeded),
            }
        })
    }

    async fn unary_call(
        &self,
        path: &str,
        framed: Bytes,
        timeout: Duration,
    ) -> Result<Bytes, CallError> {
        let (response, mut send) = self.start(path, Some(timeout)).await?;
        // A server that answers before the message arrived (a refusal: its connection limit,
        // a stop) has ended the stream, and h2 then takes no data: the message never left, and
        // the server's answer says why.
        let sent = send.send_data(framed, true);
        let response = match (response.await, sent) {
            (Ok(response), _) => response,
            (Err(e), Ok(())) => return Err(self.broken(e, true)),
            (Err(e), Err(_)) => return Err(self.broken(e, false)),
        };
        let mut reader = Reader::new(response, self.max_message)?;
        let answer = reader.next(self).await?;
        let end = reader.end(self).await?;
        match (answer, end) {
            (_, Some(ended)) if ended.code != status::OK => Err(CallError::Status(ended)),
            (Some(answer), _) => Ok(answer),
            (None, _) => Err(CallError::Status(Status::new(
                status::INTERNAL,
                "the server ended the call without an answer",
            ))),
        }
    }

    /// A bidi stream kept open: one message out, one answer back, as often as wanted.
    pub fn open_stream(&self, path: &str) -> Result<Stream, CallError> {
        let (response, send) = runtime().block_on(self.start(path, None))?;
        Ok(Stream {
            send,
            response: Some(response),
            reader: None,
            headers: None,
            broken: false,
        })
    }

    async fn start(
        &self,
        path: &str,
        timeout: Option<Duration>,
    ) -> Result<(ResponseFuture, SendStream<Bytes>), CallError> {
        let mut sender = self.ready_sender().await?;
        let mut request = Request::builder()
            .method(Method::POST)
            .uri(format!("http://{}{}", self.address, path))
            .header("content-type", "application/grpc")
            .header("te", "trailers");
        if let Some(timeout) = timeout {
            request = request.header("grpc-timeout", format!("{}m", timeout.as_millis().max(1)));
        }
        for (name, value) in &self.metadata {
            request = request.header(name, value);
        }
        let request = request
            .body(())
            .map_err(|e| CallError::Status(Status::new(status::INTERNAL, e.to_string())))?;
        sender
            .send_request(request, false)
            .map_err(|e| self.broken(e, false))
    }

    async fn ready_sender(&self) -> Result<SendRequest<Bytes>, CallError> {
        let kept = self.sender.lock().expect("the sender lock").clone();
        if let Some(sender) = kept {
            if let Ok(ready) = sender.ready().await {
                return Ok(ready);
            }
        }
        let unsent = |message: String| CallError::Unavailable {
            message,
            sent: false,
        };
        let tcp =
            match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(&self.address)).await {
                Ok(Ok(tcp)) => tcp,
                Ok(Err(e)) => {
                    return Err(unsent(format!(
                        "failed to connect to {}: {e}",
                        self.address
                    )))
                }
                Err(_) => {
                    return Err(unsent(format!(
                        "failed to connect to {} within {CONNECT_TIMEOUT:?}",
                        self.address
                    )))
                }
            };
        let _ = tcp.set_nodelay(true);
        let (sender, connection) = h2::client::Builder::new()
            .initial_window_size(1 << 20)
            .initial_connection_window_size(1 << 24)
            .handshake(tcp)
            .await
            .map_err(|e| {
                unsent(format!(
                    "the HTTP/2 handshake with {} failed: {e}",
                    self.address
                ))
            })?;
        tokio::spawn(async move {
            let _ = connection.await; // it ends when the peer goes; the next call dials again
        });
        *self.sender.lock().expect("the sender lock") = Some(sender.clone());
        sender
            .ready()
            .await
            .map_err(|e| unsent(format!("the connection to {} closed: {e}", self.address)))
    }

    /// What an h2 error means for the call; a connection that broke is dialled again next time.
    fn broken(&self, err: h2::Error, sent: bool) -> CallError {
        if err.is_io() || err.is_go_away() {
            *self.sender.lock().expect("the sender lock") = None;
        }
        match err.reason() {
            Some(Reason::CANCEL) if err.is_reset() => CallError::Status(Status::new(
                status::CANCELLED,
                "the server cancelled the call",
            )),
            Some(Reason::REFUSED_STREAM) => CallError::Unavailable {
                message: "the server refused the stream before reading it".into(),
                sent: false,
            },
            _ => CallError::Unavailable {
                message: format!("the connection to {} broke: {err}", self.address),
                sent,
            },
        }
    }
}

/// A kept-open bidi stream. After any error it is over: open another.
pub struct Stream {
    send: SendStream<Bytes>,
    response: Option<ResponseFuture>,
    reader: Option<Reader>,
    headers: Option<http::HeaderMap>,
    broken: bool,
}

impl Stream {
    /// A header of the server's response (known once the first answer came), as text.
    pub fn header(&self, name: &str) -> Option<String> {
        let value = self.headers.as_ref()?.get(name)?;
        value.to_str().ok().map(str::to_owned)
    }

    pub fn exchange(
        &mut self,
        channel: &Channel,
        message: &[u8],
        timeout: Duration,
    ) -> Result<Bytes, CallError> {
        if self.broken {
            return Err(CallError::Unavailable {
                message: "the stream is over".into(),
                sent: false,
            });
        }
        let framed = frame::encode(message);
        let outcome = runtime().block_on(async {
            match tokio::time::timeout(timeout, self.exchange_call(channel, framed)).await {
                Ok(outcome) => outcome,
                Err(_) => Err(CallError::DeadlineExceeded),
            }
        });
        if outcome.is_err() {
            self.close();
        }
        outcome
    }

    async fn exchange_call(
        &mut self,
        channel: &Channel,
        framed: Bytes,
    ) -> Result<Bytes, CallError> {
        // A stream the server already ended (it stopped while this one sat idle) takes no more:
        // the request never left.
        self.send
            .send_data(framed, false)
            .map_err(|_| CallError::EndedUnanswered)?;
        if let Some(response) = self.response.take() {
            let response = response.await.map_err(|e| channel.broken(e, true))?;
            self.headers = Some(response.headers().clone());
            self.reader = Some(Reader::new(response, channel.max_message)?);
        }
        let reader = self
            .reader
            .as_mut()
            .expect("the answers are read once the response came");
        if let Some(answer) = reader.next(channel).await? {
            return Ok(answer);
        }
        match reader.end(channel).await? {
            Some(ended) if ended.code != status::OK => Err(CallError::Status(ended)),
            _ => Err(CallError::EndedUnanswered),
        }
    }

    /// End the stream; a server still reading sees it cancelled.
    pub fn close(&mut self) {
        if !self.broken {
            self.broken = true;
            self.send.send_reset(Reason::CANCEL);
        }
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        self.close();
    }
}

/// The answers of one call and, once it is over, its status.
struct Reader {
    body: RecvStream,
    deframer: Deframer,
    ended: Option<Status>,
}

impl Reader {
    fn new(response: Response<RecvStream>, limit: usize) -> Result<Self, CallError> {
        let (parts, body) = response.into_parts();
        if parts.status != http::StatusCode::OK {
            let code = if parts.status == http::StatusCode::SERVICE_UNAVAILABLE {
                status::UNAVAILABLE
            } else {
                status::UNKNOWN
            };
            return Err(CallError::Status(Status::new(
                code,
                format!("the server answered HTTP {}", parts.status),
            )));
        }
        // A trailers-only answer (a refusal before any message) carries its status here.
        let ended = Status::from_headers(&parts.headers);
        Ok(Self {
            body,
            deframer: Deframer::new(limit),
            ended,
        })
    }

    /// The next answer, or None once the call is over.
    async fn next(&mut self, channel: &Channel) -> Result<Option<Bytes>, CallError> {
        loop {
            if let Some(message) = self.deframer.next_message()? {
                return Ok(Some(message));
            }
            if self.ended.is_some() || self.body.is_end_stream() {
                return Ok(None);
            }
            match self.body.data().await {
                Some(Ok(chunk)) => {
                    let _ = self.body.flow_control().release_capacity(chunk.len());
                    self.deframer.push(&chunk);
                }
                Some(Err(e)) => return Err(channel.broken(e, true)),
                None => return Ok(None),
            }
        }
    }

    /// The call's status, read from the trailers once the answers are over.
    async fn end(&mut self, channel: &Channel) -> Result<Option<Status>, CallError> {
        if self.ended.is_none() {
            while self.next(channel).await?.is_some() {} // answers past the one expected are dropped
            let trailers = self
                .body
                .trailers()
                .await
                .map_err(|e| channel.broken(e, true))?;
            self.ended = Some(
                trailers
                    .as_ref()
                    .and_then(Status::from_headers)
                    .unwrap_or_else(|| {
                        Status::new(
                            status::INTERNAL,
                            "the server ended the call without a status",
                        )
                    }),
            );
        }
        Ok(self.ended.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::echo;

    const SECOND: Duration = Duration::from_secs(1);

    fn echo_channel() -> Channel {
        let port = echo::serve("127.0.0.1:0").unwrap();
        Channel::new(
            &format!("127.0.0.1:{port}"),
            &[("authorization".into(), "Bearer t".into())],
            1 << 20,
        )
        .unwrap()
    }

    #[test]
    fn unary_calls_and_a_kept_open_stream_are_answered() {
        let channel = echo_channel();
        for _ in 0..3 {
            assert_eq!(&channel.unary("/b.B/M", b"x", SECOND).unwrap()[..], b"ok");
        }
        let mut stream = channel.open_stream("/b.B/S").unwrap();
        for _ in 0..3 {
            assert_eq!(&stream.exchange(&channel, b"x", SECOND).unwrap()[..], b"ok");
        }
        stream.close();
        let after = stream.exchange(&channel, b"x", SECOND);
        assert!(
            matches!(after, Err(CallError::Unavailable { sent: false, .. })),
            "{after:?}"
        );
    }

    #[test]
    fn nobody_listening_is_unavailable_and_unsent() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let channel = Channel::new(&format!("127.0.0.1:{port}"), &[], 1 << 20).unwrap();
        let refused = channel.unary("/b.B/M", b"x", SECOND);
        assert!(
            matches!(refused, Err(CallError::Unavailable { sent: false, .. })),
            "{refused:?}"
        );
    }

    #[test]
    fn a_server_that_does_not_answer_is_a_deadline() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        // Accepts the connection and says nothing: not even the HTTP/2 handshake.
        let held = std::thread::spawn(move || listener.accept().map(|(s, _)| s));
        let channel = Channel::new(&format!("127.0.0.1:{port}"), &[], 1 << 20).unwrap();
        let silent = channel.unary("/b.B/M", b"x", Duration::from_millis(300));
        assert!(
            matches!(
                silent,
                Err(CallError::DeadlineExceeded) | Err(CallError::Unavailable { sent: false, .. })
            ),
            "{silent:?}"
        );
        drop(held);
    }

    #[test]
    fn a_bad_metadata_value_is_refused_when_the_channel_is_made() {
        let made = Channel::new("127.0.0.1:1", &[("x-token".into(), "a\nb".into())], 1 << 20);
        assert!(made.err().unwrap().contains("x-token"));
    }
}
