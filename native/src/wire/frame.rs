//! gRPC's message framing: a flag byte (compressed or not), a big-endian u32 length, the message.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use std::fmt;

pub const PREFIX: usize = 5;

/// One message, framed.
pub fn encode(message: &[u8]) -> Bytes {
    let mut framed = BytesMut::with_capacity(PREFIX + message.len());
    framed.put_u8(0);
    framed.put_u32(message.len() as u32);
    framed.extend_from_slice(message);
    framed.freeze()
}

#[derive(Debug, PartialEq, Eq)]
pub enum FrameError {
    /// The peer compressed a message; this transport asks for none (no grpc-accept-encoding).
    Compressed,
    /// A message longer than the limit the channel was given.
    TooLarge { length: usize, limit: usize },
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::Compressed => write!(
                f,
                "the peer sent a compressed message, which was not asked for"
            ),
            FrameError::TooLarge { length, limit } => {
                write!(
                    f,
                    "a message of {length} bytes is over the limit of {limit} bytes"
                )
            }
        }
    }
}

/// Messages out of a body that arrives in chunks of any size.
pub struct Deframer {
    buffer: BytesMut,
    limit: usize,
}

impl Deframer {
    pub fn new(limit: usize) -> Self {
        Self {
            buffer: BytesMut::new(),
            limit,
        }
    }

    pub fn push(&mut self, chunk: &[u8]) {
        self.buffer.extend_from_slice(chunk);
    }

    /// The next whole message, if one has arrived.
    pub fn next_message(&mut self) -> Result<Option<Bytes>, FrameError> {
        if self.buffer.len() < PREFIX {
            return Ok(None);
        }
        if self.buffer[0] != 0 {
            return Err(FrameError::Compressed);
        }
        let length = u32::from_be_bytes([
            self.buffer[1],
            self.buffer[2],
            self.buffer[3],
            self.buffer[4],
        ]) as usize;
        if length > self.limit {
            return Err(FrameError::TooLarge {
                length,
                limit: self.limit,
            });
        }
        if self.buffer.len() < PREFIX + length {
            return Ok(None);
        }
        self.buffer.advance(PREFIX);
        Ok(Some(self.buffer.split_to(length).freeze()))
    }

    /// Bytes that began a message that never ended.
    pub fn is_empty(&self) -> bool {
        self.buffer.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_come_out_whole_however_the_chunks_fall() {
        let mut wire = Vec::new();
        for message in [&b"first"[..], b"", b"third one"] {
            wire.extend_from_slice(&encode(message));
        }
        for chunk_size in 1..wire.len() {
            let mut deframer = Deframer::new(1024);
            let mut got = Vec::new();
            for chunk in wire.chunks(chunk_size) {
                deframer.push(chunk);
                while let Some(message) = deframer.next_message().unwrap() {
                    got.push(message);
                }
            }
            assert_eq!(
                got,
                vec![&b"first"[..], b"", b"third one"],
                "chunks of {chunk_size}"
            );
            assert!(deframer.is_empty());
        }
    }

    #[test]
    fn compressed_and_oversized_messages_are_refused() {
        let mut deframer = Deframer::new(4);
        deframer.push(&[1, 0, 0, 0, 1, b'x']);
        assert_eq!(deframer.next_message(), Err(FrameError::Compressed));
        let mut deframer = Deframer::new(4);
        deframer.push(&encode(b"12345"));
        assert_eq!(
            deframer.next_message(),
            Err(FrameError::TooLarge {
                length: 5,
                limit: 4
            })
        );
    }
}
