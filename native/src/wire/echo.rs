//! A gRPC server with nothing in it: every message on any path is answered with `ok`, on the
//! transport's runtime. `bench/grpc_floor.py` measures against it what the wire alone costs, and
//! the channel's tests call it.

use super::frame::{self, Deframer};
use super::runtime;
use bytes::Bytes;
use h2::server::SendResponse;
use h2::RecvStream;
use http::{HeaderMap, Request, Response};
use std::io;
use tokio::net::{TcpListener, TcpStream};

const LIMIT: usize = 4 << 20;

/// Listen on `address` (host:port, port 0 for any) and answer there from now on; the port.
pub fn serve(address: &str) -> io::Result<u16> {
    let listener = runtime().block_on(TcpListener::bind(address))?;
    let port = listener.local_addr()?.port();
    runtime().spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let _ = socket.set_nodelay(true);
            tokio::spawn(connection(socket));
        }
    });
    Ok(port)
}

async fn connection(socket: TcpStream) {
    let Ok(mut connection) = h2::server::handshake(socket).await else {
        return;
    };
    while let Some(Ok((request, respond))) = connection.accept().await {
        tokio::spawn(answer(request, respond));
    }
}

async fn answer(request: Request<RecvStream>, mut respond: SendResponse<Bytes>) {
    let mut body = request.into_body();
    let head = Response::builder()
        .status(200)
        .header("content-type", "application/grpc")
        .body(())
        .expect("a fixed response head");
    let Ok(mut send) = respond.send_response(head, false) else {
        return;
    };
    let mut deframer = Deframer::new(LIMIT);
    while let Some(Ok(chunk)) = body.data().await {
        let _ = body.flow_control().release_capacity(chunk.len());
        deframer.push(&chunk);
        while let Ok(Some(_)) = deframer.next_message() {
            if send.send_data(frame::encode(b"ok"), false).is_err() {
                return;
            }
        }
    }
    let mut trailers = HeaderMap::new();
    trailers.insert("grpc-status", "0".parse().expect("a fixed status"));
    let _ = send.send_trailers(trailers);
}
