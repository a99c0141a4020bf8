//! The server's front for the hot calls: Enqueue and EnqueueStream on a port of their own,
//! HTTP/2 and gRPC's framing done here, so a single enqueue costs the server no grpcio.
//!
//! Requests from every connection wait in one queue; a byte on a socket pair tells the server's
//! event loop there are some (it watches the other end), and the loop takes them all in one call
//! (`drain`): one GIL acquisition and one Python call per batch, not per request. The loop
//! answers each by its (call, seq); answers on a stream go out in the order of its requests
//! whatever order they come in. Messages are never decoded here: the protobuf, the limits and the
//! rights stay the server's, so the statuses and messages are those of the main port.
//!
//! `close` stops taking calls: a request not yet handed over is never read (its client sends it
//! again on a new stream), what was handed over is answered, then each stream ends with OK and
//! each connection with a GOAWAY.

use super::frame::{self, Deframer, FrameError};
use super::runtime;
use super::status::{self, Status};
use bytes::Bytes;
use h2::server::SendResponse;
use h2::{RecvStream, SendStream};
use http::{HeaderMap, Request, Response};
use std::collections::{BTreeMap, HashMap};
use std::io::{self, Read, Write};
use std::os::unix::io::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};

pub const ENQUEUE: &str = "/pyqueue.v1.Queue/Enqueue";
pub const ENQUEUE_STREAM: &str = "/pyqueue.v1.Queue/EnqueueStream";
/// Requests of one stream handed over and not yet answered; past it the stream is not read
/// (HTTP/2's flow control then holds its client).
const UNANSWERED_PER_CALL: u64 = 256;
/// How long a closed front keeps a connection's socket after its last call ended.
const LINGER: Duration = Duration::from_secs(2);

/// What a front allows, and how it finds a client that vanished.
#[derive(Debug, Clone, Copy)]
pub struct FrontConfig {
    /// Requests over it are refused RESOURCE_EXHAUSTED, as grpcio refuses them.
    pub max_message: usize,
    /// Past it, a new connection is answered UNAVAILABLE unread (its client stays on the main
    /// port) and closed.
    pub max_connections: usize,
    /// An HTTP/2 ping this often; a connection whose peer does not answer one within
    /// `ping_timeout` is closed (a client host that vanished holds nothing for long).
    pub ping_every: Duration,
    pub ping_timeout: Duration,
}

impl Default for FrontConfig {
    fn default() -> Self {
        Self {
            max_message: 64 << 20,
            max_connections: 10_000,
            ping_every: Duration::from_secs(5),
            ping_timeout: Duration::from_secs(10),
        }
    }
}

/// One request, handed to the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Incoming {
    pub call: u64,
    pub seq: u64,
    pub streaming: bool,
    pub authorization: Option<String>,
    pub peer: String,
    pub message: Bytes,
}

enum Answer {
    Message(u64, Bytes),
    End(Status),
}

struct Shared {
    queue: Mutex<Vec<Incoming>>,
    wake_tx: UnixStream,
    wake_rx: UnixStream,
    calls: Mutex<HashMap<u64, mpsc::UnboundedSender<Answer>>>,
    next_call: AtomicU64,
    closing: watch::Sender<bool>,
    config: FrontConfig,
    connections: AtomicUsize,
}

impl Shared {
    fn hand_over(&self, incoming: Incoming) {
        let mut queue = self.queue.lock().expect("the front's queue");
        queue.push(incoming);
        if queue.len() == 1 {
            // Full or broken only if the loop is gone or already has a wake-up to read.
            let _ = (&self.wake_tx).write(&[1]);
        }
    }
}

/// A listening front. Dropping it does not stop it: `close` does.
pub struct Front {
    shared: Arc<Shared>,
    port: u16,
}

impl Front {
    /// Listen on `address` (host:port, port 0 for any).
    pub fn bind(address: &str, config: FrontConfig) -> io::Result<Front> {
        let listener = runtime().block_on(TcpListener::bind(address))?;
        let port = listener.local_addr()?.port();
        let (wake_tx, wake_rx) = UnixStream::pair()?;
        wake_tx.set_nonblocking(true)?;
        wake_rx.set_nonblocking(true)?;
        let shared = Arc::new(Shared {
            queue: Mutex::new(Vec::new()),
            wake_tx,
            wake_rx,
            calls: Mutex::new(HashMap::new()),
            next_call: AtomicU64::new(1),
            closing: watch::Sender::new(false),
            config,
            connections: AtomicUsize::new(0),
        });
        runtime().spawn(accept(shared.clone(), listener));
        Ok(Front { shared, port })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Readable when requests wait (`drain` takes them and empties it).
    pub fn wake_fd(&self) -> RawFd {
        self.shared.wake_rx.as_raw_fd()
    }

    /// Every request waiting, in the order they came.
    pub fn drain(&self) -> Vec<Incoming> {
        let mut sink = [0u8; 256];
        while matches!((&self.shared.wake_rx).read(&mut sink), Ok(n) if n > 0) {}
        std::mem::take(&mut *self.shared.queue.lock().expect("the front's queue"))
    }

    /// The answer to request `seq` of `call` (a call already over drops it).
    pub fn answer(&self, call: u64, seq: u64, message: Bytes) {
        self.send(call, Answer::Message(seq, message));
    }

    /// End `call` with `status` now (answers still held for it are dropped).
    pub fn end(&self, call: u64, status: Status) {
        self.send(call, Answer::End(status));
    }

    fn send(&self, call: u64, answer: Answer) {
        let calls = self.shared.calls.lock().expect("the front's calls");
        if let Some(sender) = calls.get(&call) {
            let _ = sender.send(answer);
        }
    }

    /// Connections open.
    pub fn connections(&self) -> usize {
        self.shared.connections.load(Ordering::Relaxed)
    }

    /// Calls open (a stream counts from its first byte to its end).
    pub fn open_calls(&self) -> usize {
        self.shared.calls.lock().expect("the front's calls").len()
    }

    /// Take no more calls; see the module's doc.
    pub fn close(&self) {
        self.shared.closing.send_replace(true);
    }
}

async fn accept(shared: Arc<Shared>, listener: TcpListener) {
    let mut closing = shared.closing.subscribe();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                if let Ok((socket, peer)) = accepted {
                    if shared.connections.load(Ordering::Relaxed) >= shared.config.max_connections {
                        tokio::spawn(refuse(socket, AT_LIMIT));
                        continue;
                    }
                    let _ = socket.set_nodelay(true);
                    let peer = match peer {
                        std::net::SocketAddr::V4(a) => format!("ipv4:{a}"),
                        std::net::SocketAddr::V6(a) => format!("ipv6:{a}"),
                    };
                    tokio::spawn(connection(shared.clone(), socket, peer));
                }
            }
            _ = closing.wait_for(|c| *c) => break,
        }
    }
    // Closing: for a while a connection that comes is answered UNAVAILABLE unread, which its
    // client takes as unsent and sends elsewhere; a listener dropped at once would reset the
    // connections still in its backlog, whose clients cannot tell whether a request was read.
    let until = tokio::time::Instant::now() + LINGER;
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                if let Ok((socket, _)) = accepted {
                    tokio::spawn(refuse(socket, STOPPING));
                }
            }
            _ = tokio::time::sleep_until(until) => return, // the listener goes with this task
        }
    }
}

const STOPPING: &str = "the server is stopping: nothing was read";
const AT_LIMIT: &str =
    "this server's native front is at its connection limit (--max-connections): \
                        nothing was read, call the main port";

/// Returns once a ping goes unanswered for `ping_timeout` (or the connection is gone).
async fn keepalive(mut pings: h2::PingPong, config: FrontConfig) {
    loop {
        tokio::time::sleep(config.ping_every).await;
        match tokio::time::timeout(config.ping_timeout, pings.ping(h2::Ping::opaque())).await {
            Ok(Ok(_)) => continue,
            _ => return,
        }
    }
}

/// A connection past the bound, or come while closing: its calls are answered UNAVAILABLE
/// unread (the client takes it as unsent and goes elsewhere), and it is closed within a few
/// seconds whatever it does.
async fn refuse(socket: TcpStream, why: &'static str) {
    let refusing = async {
        if let Ok(connection) = h2::server::handshake(socket).await {
            refuse_calls(connection, why).await;
        }
    };
    let _ = tokio::time::timeout(LINGER * 2, refusing).await;
}

/// Answer a connection's calls UNAVAILABLE, unread, and end it.
async fn refuse_calls(mut connection: h2::server::Connection<TcpStream, Bytes>, why: &str) {
    if let Some(Ok((_, mut respond))) = connection.accept().await {
        end_call(&mut respond, None, Status::new(status::UNAVAILABLE, why));
    }
    connection.graceful_shutdown();
    while let Some(Ok((_, mut respond))) = connection.accept().await {
        end_call(&mut respond, None, Status::new(status::UNAVAILABLE, why));
    }
    tokio::time::sleep(LINGER).await; // as in `connection`: the client reads the answer
}

/// Counts a connection while it is open.
struct Open(Arc<Shared>);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.connections.fetch_sub(1, Ordering::Relaxed);
    }
}

async fn connection(shared: Arc<Shared>, socket: TcpStream, peer: String) {
    shared.connections.fetch_add(1, Ordering::Relaxed);
    let _open = Open(shared.clone());
    let handshake = h2::server::Builder::new()
        .initial_window_size(1 << 20)
        .initial_connection_window_size(1 << 24)
        .handshake::<_, Bytes>(socket)
        .await;
    let Ok(mut connection) = handshake else {
        return;
    };
    if *shared.closing.borrow() {
        // Accepted as the close came: refused unread, so its client sends the request again.
        let refusing = refuse_calls(connection, STOPPING);
        let _ = tokio::time::timeout(LINGER * 2, refusing).await;
        return;
    }
    let mut closing = shared.closing.subscribe();
    let mut going = false;
    let silent = connection
        .ping_pong()
        .map(|pings| tokio::spawn(keepalive(pings, shared.config)));
    let mut silent = std::pin::pin!(async move {
        match silent {
            Some(watch) => {
                let _ = watch.await;
            }
            None => std::future::pending().await,
        }
    });
    loop {
        tokio::select! {
            _ = &mut silent => return, // the peer stopped answering pings: drop the connection
            next = connection.accept() => match next {
                Some(Ok((request, respond))) => {
                    tokio::spawn(call(shared.clone(), request, respond, peer.clone()));
                }
                _ => break,
            },
            _ = closing.wait_for(|c| *c), if !going => {
                going = true;
                connection.graceful_shutdown(); // accept() drives the open calls to their end
            }
        }
    }
    if going {
        // Every call ended. The socket stays open a moment, unread: a client that sent on a
        // stream just ended reads its end (nothing was read: it sends again) instead of a
        // broken pipe, which would leave it not knowing whether its request was taken.
        tokio::time::sleep(LINGER).await;
    }
    drop(connection);
}

async fn call(
    shared: Arc<Shared>,
    request: Request<RecvStream>,
    mut respond: SendResponse<Bytes>,
    peer: String,
) {
    let streaming = match request.uri().path() {
        ENQUEUE => false,
        ENQUEUE_STREAM => true,
        other => {
            let why = format!(
                "{other} is not served on this port, which takes only Enqueue and \
                 EnqueueStream: call the server's main port"
            );
            end_call(&mut respond, None, Status::new(status::UNIMPLEMENTED, why));
            return;
        }
    };
    let authorization = request
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let id = shared.next_call.fetch_add(1, Ordering::Relaxed);
    let (sender, answers) = mpsc::unbounded_channel();
    shared
        .calls
        .lock()
        .expect("the front's calls")
        .insert(id, sender);
    let mut served = Call {
        shared: shared.clone(),
        id,
        streaming,
        authorization,
        peer,
        body: request.into_body(),
        answers,
        respond,
        send: None,
    };
    served.serve().await;
    shared.calls.lock().expect("the front's calls").remove(&id);
}

struct Call {
    shared: Arc<Shared>,
    id: u64,
    streaming: bool,
    authorization: Option<String>,
    peer: String,
    body: RecvStream,
    answers: mpsc::UnboundedReceiver<Answer>,
    respond: SendResponse<Bytes>,
    send: Option<SendStream<Bytes>>,
}

impl Call {
    async fn serve(&mut self) {
        let mut deframer = Deframer::new(self.shared.config.max_message);
        let mut closing = self.shared.closing.subscribe();
        let mut stopping = *closing.borrow();
        let mut handed = 0u64;
        let mut order = InOrder::default();
        let mut body_open = true;
        loop {
            let unanswered = handed - order.released;
            if unanswered == 0 && (!body_open || stopping || (!self.streaming && handed == 1)) {
                if !self.streaming && handed == 0 {
                    return self.end(if stopping {
                        Status::new(status::UNAVAILABLE, "the server is stopping: call again")
                    } else {
                        let why = "the call ended without its request message";
                        Status::new(status::INTERNAL, why)
                    });
                }
                return self.end(Status::new(status::OK, ""));
            }
            let reading = body_open
                && !stopping
                && unanswered < UNANSWERED_PER_CALL
                && (self.streaming || handed == 0);
            tokio::select! {
                chunk = self.body.data(), if reading => match chunk {
                    Some(Ok(chunk)) => {
                        let _ = self.body.flow_control().release_capacity(chunk.len());
                        deframer.push(&chunk);
                        loop {
                            match deframer.next_message() {
                                Ok(Some(message)) => {
                                    self.hand_over(handed, message);
                                    handed += 1;
                                }
                                Ok(None) => break,
                                Err(err) => return self.end(refusal(err)),
                            }
                        }
                    }
                    Some(Err(_)) => return, // reset or broken: answers for it are dropped
                    None => {
                        body_open = false;
                        if !deframer.is_empty() {
                            let why = "the request ended in the middle of a message";
                            return self.end(Status::new(status::INTERNAL, why));
                        }
                    }
                },
                answer = self.answers.recv() => match answer {
                    Some(Answer::Message(seq, message)) => {
                        for message in order.put(seq, message) {
                            if !self.write(message) {
                                return;
                            }
                        }
                    }
                    Some(Answer::End(status)) => return self.end(status),
                    None => return,
                },
                changed = closing.changed(), if !stopping => {
                    stopping = changed.is_err() || *closing.borrow();
                }
            }
        }
    }

    fn hand_over(&self, seq: u64, message: Bytes) {
        self.shared.hand_over(Incoming {
            call: self.id,
            seq,
            streaming: self.streaming,
            authorization: self.authorization.clone(),
            peer: self.peer.clone(),
            message,
        });
    }

    fn write(&mut self, message: Bytes) -> bool {
        if self.send.is_none() {
            match self
                .respond
                .send_response(grpc_head(HeaderMap::new()), false)
            {
                Ok(send) => self.send = Some(send),
                Err(_) => return false,
            }
        }
        let send = self.send.as_mut().expect("the response was started");
        send.send_data(frame::encode(&message), false).is_ok()
    }

    fn end(&mut self, status: Status) {
        end_call(&mut self.respond, self.send.as_mut(), status);
    }
}

/// A stream's answers, released in the order of its requests whatever order they come in.
#[derive(Default)]
struct InOrder {
    released: u64,
    held: BTreeMap<u64, Bytes>,
}

impl InOrder {
    fn put(&mut self, seq: u64, message: Bytes) -> Vec<Bytes> {
        self.held.insert(seq, message);
        let mut ready = Vec::new();
        while let Some(message) = self.held.remove(&self.released) {
            ready.push(message);
            self.released += 1;
        }
        ready
    }
}

/// End a call with `status`: in the trailers, or as a trailers-only answer before any message.
fn end_call(
    respond: &mut SendResponse<Bytes>,
    send: Option<&mut SendStream<Bytes>>,
    status: Status,
) {
    let mut headers = HeaderMap::new();
    status.to_headers(&mut headers);
    match send {
        Some(send) => {
            let _ = send.send_trailers(headers);
        }
        None => {
            let _ = respond.send_response(grpc_head(headers), true);
        }
    }
}

fn grpc_head(mut headers: HeaderMap) -> Response<()> {
    headers.insert(
        "content-type",
        "application/grpc".parse().expect("a fixed header"),
    );
    let mut head = Response::new(());
    *head.headers_mut() = headers;
    head
}

fn refusal(err: FrameError) -> Status {
    match err {
        FrameError::TooLarge { length, limit } => Status::new(
            status::RESOURCE_EXHAUSTED,
            format!(
                "a request of {length} bytes is over this server's limit of {limit} bytes \
                 for one message: send fewer jobs per request"
            ),
        ),
        FrameError::Compressed => Status::new(
            status::UNIMPLEMENTED,
            "this port takes no compressed messages: send them uncompressed",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::channel::{CallError, Channel};
    use std::time::Instant;

    fn small(max_connections: usize) -> FrontConfig {
        FrontConfig {
            max_message: 1024,
            max_connections,
            ..FrontConfig::default()
        }
    }

    const SECOND: Duration = Duration::from_secs(1);

    /// Answers what `front` is handed, on a thread: each message with itself reversed, "end"
    /// with a status, and "hold" not at all.
    fn answer_in_turn(front: Arc<Front>, until: Duration) -> std::thread::JoinHandle<usize> {
        std::thread::spawn(move || {
            let start = Instant::now();
            let mut seen = 0;
            while start.elapsed() < until {
                for incoming in front.drain() {
                    seen += 1;
                    match &incoming.message[..] {
                        b"end" => front.end(incoming.call, Status::new(9, "ended: 100%")),
                        b"hold" => {}
                        m => {
                            let reversed: Vec<u8> = m.iter().rev().copied().collect();
                            front.answer(incoming.call, incoming.seq, reversed.into());
                        }
                    }
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            seen
        })
    }

    fn front_and_channel(metadata: &[(String, String)]) -> (Arc<Front>, Channel) {
        let front = Arc::new(Front::bind("127.0.0.1:0", small(8)).unwrap());
        let channel =
            Channel::new(&format!("127.0.0.1:{}", front.port()), metadata, 1 << 20).unwrap();
        (front, channel)
    }

    #[test]
    fn unary_and_stream_requests_are_handed_over_and_answered() {
        let (front, channel) = front_and_channel(&[("authorization".into(), "Bearer t".into())]);
        let answering = answer_in_turn(front.clone(), Duration::from_secs(2));
        assert_eq!(&channel.unary(ENQUEUE, b"abc", SECOND).unwrap()[..], b"cba");
        let mut stream = channel.open_stream(ENQUEUE_STREAM).unwrap();
        for _ in 0..3 {
            assert_eq!(
                &stream.exchange(&channel, b"xy", SECOND).unwrap()[..],
                b"yx"
            );
        }
        let refused = stream.exchange(&channel, b"end", SECOND);
        assert_eq!(
            refused,
            Err(CallError::Status(Status::new(9, "ended: 100%")))
        );
        assert!(answering.join().unwrap() >= 5);
    }

    #[test]
    fn a_request_carries_its_token_and_peer() {
        let (front, channel) = front_and_channel(&[("authorization".into(), "Bearer t".into())]);
        let calling = std::thread::spawn(move || channel.unary(ENQUEUE, b"x", SECOND));
        let start = Instant::now();
        let incoming = loop {
            if let Some(first) = front.drain().pop() {
                break first;
            }
            assert!(
                start.elapsed() < Duration::from_secs(5),
                "nothing handed over"
            );
            std::thread::sleep(Duration::from_millis(1));
        };
        assert_eq!(incoming.authorization.as_deref(), Some("Bearer t"));
        assert!(
            incoming.peer.starts_with("ipv4:127.0.0.1:"),
            "{}",
            incoming.peer
        );
        assert!(!incoming.streaming);
        front.end(incoming.call, Status::new(7, "no"));
        assert_eq!(
            calling.join().unwrap(),
            Err(CallError::Status(Status::new(7, "no")))
        );
    }

    #[test]
    fn other_paths_and_oversized_requests_are_refused() {
        let (front, channel) = front_and_channel(&[]);
        let other = channel.unary("/pyqueue.v1.Queue/GetJob", b"x", SECOND);
        assert!(
            matches!(&other, Err(CallError::Status(s)) if s.code == status::UNIMPLEMENTED),
            "{other:?}"
        );
        let big = channel.unary(ENQUEUE, &[b'x'; 2000], SECOND);
        assert!(
            matches!(&big, Err(CallError::Status(s)) if s.code == status::RESOURCE_EXHAUSTED),
            "{big:?}"
        );
        assert!(front.drain().is_empty(), "nothing refused is handed over");
    }

    #[test]
    fn connections_past_the_bound_are_closed_unserved() {
        let front = Arc::new(Front::bind("127.0.0.1:0", small(1)).unwrap());
        let address = format!("127.0.0.1:{}", front.port());
        let answering = answer_in_turn(front.clone(), Duration::from_secs(2));
        let first = Channel::new(&address, &[], 1 << 20).unwrap();
        assert_eq!(&first.unary(ENQUEUE, b"ab", SECOND).unwrap()[..], b"ba");
        let second = Channel::new(&address, &[], 1 << 20).unwrap();
        let refused = second.unary(ENQUEUE, b"ab", SECOND);
        assert!(
            matches!(&refused, Err(CallError::Status(s)) if s.code == status::UNAVAILABLE
                && s.message.contains("nothing was read")),
            "{refused:?}"
        );
        assert!(
            front.drain().is_empty(),
            "the refused call was not handed over"
        );
        assert_eq!(&first.unary(ENQUEUE, b"cd", SECOND).unwrap()[..], b"dc");
        answering.join().unwrap();
    }

    #[test]
    fn a_peer_that_stops_answering_pings_is_dropped() {
        let config = FrontConfig {
            ping_every: Duration::from_millis(50),
            ping_timeout: Duration::from_millis(200),
            ..small(8)
        };
        let front = Front::bind("127.0.0.1:0", config).unwrap();
        // An HTTP/2 client that says hello and then reads nothing: no pong ever comes back.
        let mut silent = std::net::TcpStream::connect(("127.0.0.1", front.port())).unwrap();
        silent
            .write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0")
            .unwrap();
        let start = Instant::now();
        while front.connections() != 1 {
            assert!(start.elapsed() < Duration::from_secs(5), "never counted");
            std::thread::sleep(Duration::from_millis(5));
        }
        while front.connections() != 0 {
            assert!(
                start.elapsed() < Duration::from_secs(5),
                "a silent peer was kept"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        // One that answers its pings (the transport's own channel) is kept.
        let channel = Channel::new(&format!("127.0.0.1:{}", front.port()), &[], 1 << 20).unwrap();
        let mut stream = channel.open_stream(ENQUEUE_STREAM).unwrap();
        std::thread::sleep(Duration::from_millis(600));
        assert_eq!(front.connections(), 1, "a peer that answers pings is kept");
        stream.close();
    }

    #[test]
    fn answers_are_released_in_the_order_of_their_requests() {
        let mut order = InOrder::default();
        assert!(order.put(1, Bytes::from_static(b"two")).is_empty());
        assert!(order.put(2, Bytes::from_static(b"three")).is_empty());
        let released = order.put(0, Bytes::from_static(b"one"));
        assert_eq!(released, vec![&b"one"[..], b"two", b"three"]);
        assert_eq!(order.released, 3);
        assert_eq!(
            order.put(3, Bytes::from_static(b"four")),
            vec![&b"four"[..]]
        );
    }

    #[test]
    fn close_answers_what_was_handed_over_and_reads_nothing_more() {
        let (front, channel) = front_and_channel(&[]);
        let answering = answer_in_turn(front.clone(), Duration::from_secs(2));
        let mut stream = channel.open_stream(ENQUEUE_STREAM).unwrap();
        assert_eq!(
            &stream.exchange(&channel, b"ab", SECOND).unwrap()[..],
            b"ba"
        );
        front.close();
        let after = stream.exchange(&channel, b"cd", SECOND);
        assert!(
            matches!(
                after,
                Err(CallError::EndedUnanswered) | Err(CallError::Unavailable { sent: false, .. })
            ),
            "{after:?}"
        );
        let start = Instant::now();
        while front.open_calls() > 0 {
            assert!(
                start.elapsed() < Duration::from_secs(5),
                "a call stayed open"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        let again = Channel::new(&format!("127.0.0.1:{}", front.port()), &[], 1 << 20).unwrap();
        // Refused unread: the listener lingers after the close only to say UNAVAILABLE.
        let refused = again.unary(ENQUEUE, b"x", SECOND);
        assert!(
            matches!(&refused, Err(CallError::Status(s)) if s.code == status::UNAVAILABLE),
            "{refused:?}"
        );
        answering.join().unwrap();
    }
}
