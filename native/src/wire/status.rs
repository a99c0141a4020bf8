//! A call's end as gRPC says it: `grpc-status` (a number) and `grpc-message` (percent-encoded),
//! in the trailers, or in the only headers of a trailers-only answer.

use http::{HeaderMap, HeaderValue};

pub const OK: u32 = 0;
pub const CANCELLED: u32 = 1;
pub const UNKNOWN: u32 = 2;
pub const DEADLINE_EXCEEDED: u32 = 4;
pub const UNIMPLEMENTED: u32 = 12;
pub const INTERNAL: u32 = 13;
pub const RESOURCE_EXHAUSTED: u32 = 8;
pub const UNAVAILABLE: u32 = 14;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    pub code: u32,
    pub message: String,
}

impl Status {
    pub fn new(code: u32, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    /// The status the headers carry, if they carry one.
    pub fn from_headers(headers: &HeaderMap) -> Option<Status> {
        let code = headers.get("grpc-status")?;
        let code = code
            .to_str()
            .ok()
            .and_then(|c| c.parse().ok())
            .unwrap_or(UNKNOWN);
        let message = headers
            .get("grpc-message")
            .map(|m| percent_decode(m.as_bytes()))
            .unwrap_or_default();
        Some(Status { code, message })
    }
}

impl Status {
    /// The headers that carry this status: trailers, or a trailers-only answer's headers.
    pub fn to_headers(&self, headers: &mut HeaderMap) {
        headers.insert("grpc-status", HeaderValue::from(self.code));
        if !self.message.is_empty() {
            let encoded = percent_encode(self.message.as_bytes());
            if let Ok(value) = HeaderValue::from_str(&encoded) {
                headers.insert("grpc-message", value);
            }
        }
    }
}

/// What gRPC asks of grpc-message: printable ASCII but `%` as it is, every other byte `%XX`.
fn percent_encode(raw: &[u8]) -> String {
    let mut out = String::with_capacity(raw.len());
    for &byte in raw {
        if (0x20..0x7f).contains(&byte) && byte != b'%' {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// grpc-message is percent-encoded UTF-8; a malformed escape is kept as it came.
fn percent_decode(raw: &[u8]) -> String {
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        if raw[i] == b'%' && i + 2 < raw.len() {
            if let (Some(high), Some(low)) = (hex(raw[i + 1]), hex(raw[i + 2])) {
                out.push(high << 4 | low);
                i += 3;
                continue;
            }
        }
        out.push(raw[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex(digit: u8) -> Option<u8> {
    (digit as char).to_digit(16).map(|d| d as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.insert(*k, v.parse().unwrap());
        }
        map
    }

    #[test]
    fn a_status_is_read_with_its_message_decoded() {
        let status = Status::from_headers(&headers(&[
            ("grpc-status", "3"),
            (
                "grpc-message",
                "queue name %22a%00b%22 has a NUL: caf%C3%A9",
            ),
        ]));
        assert_eq!(
            status,
            Some(Status::new(3, "queue name \"a\0b\" has a NUL: café"))
        );
    }

    #[test]
    fn a_status_written_to_headers_reads_back_the_same() {
        let status = Status::new(3, "queue \"a\0b\" is 100% wrong: café\n");
        let mut map = HeaderMap::new();
        status.to_headers(&mut map);
        assert_eq!(map["grpc-status"], "3");
        assert!(map["grpc-message"].to_str().unwrap().contains("100%25"));
        assert_eq!(Status::from_headers(&map), Some(status));
    }

    #[test]
    fn no_status_header_is_none_and_a_bad_one_is_unknown() {
        assert_eq!(
            Status::from_headers(&headers(&[("content-type", "application/grpc")])),
            None
        );
        let status =
            Status::from_headers(&headers(&[("grpc-status", "x"), ("grpc-message", "100%")]));
        assert_eq!(status, Some(Status::new(UNKNOWN, "100%")));
    }
}
