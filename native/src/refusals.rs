//! Refusals sharing one reason, encoded in bulk: the `rejected` entries (field 2) of an
//! `AckResult` or `FailResult`, each a `Rejection { id = 1; code = 2; message = 3 }`.
//!
//! A worker that answers ids its stream does not hold (a bug, or a flood) is refused id by id, and
//! building 10,000 protobuf objects in Python held the event loop for 30 ms a message. These
//! bytes are merged into the answer as it is (`MergeFromString`), so the cost per id is a few
//! bytes written here.

use crate::push::{bytes, int, tag, varint};

const REJECTED: u32 = 2;
const LEN: u32 = 2;

/// The encoded entries, one per id, in the order given (repeats kept: each is answered).
pub fn encode(ids: &[u64], code: &str, message: &str) -> Vec<u8> {
    let mut tail = Vec::with_capacity(code.len() + message.len() + 8);
    bytes(&mut tail, 2, code.as_bytes());
    bytes(&mut tail, 3, message.as_bytes());
    let mut out = Vec::with_capacity(ids.len() * (tail.len() + 14));
    let mut entry = Vec::with_capacity(tail.len() + 11);
    for &id in ids {
        entry.clear();
        int(&mut entry, 1, id as i64);
        entry.extend_from_slice(&tail);
        tag(&mut out, REJECTED, LEN);
        varint(&mut out, entry.len() as u64);
        out.extend_from_slice(&entry);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_id_is_one_entry_with_the_shared_code_and_message() {
        let out = encode(&[1, 300], "FAILED_PRECONDITION", "gone");
        let mut expected = vec![0x12, 29, 0x08, 1, 0x12, 19];
        expected.extend_from_slice(b"FAILED_PRECONDITION");
        expected.extend_from_slice(&[0x1a, 4]);
        expected.extend_from_slice(b"gone");
        expected.extend_from_slice(&[0x12, 30, 0x08, 0xac, 0x02, 0x12, 19]);
        expected.extend_from_slice(b"FAILED_PRECONDITION");
        expected.extend_from_slice(&[0x1a, 4]);
        expected.extend_from_slice(b"gone");
        assert_eq!(out, expected);
    }

    #[test]
    fn no_ids_no_bytes_and_an_id_of_zero_is_left_to_its_default() {
        assert!(encode(&[], "X", "y").is_empty());
        assert_eq!(encode(&[0], "X", ""), vec![0x12, 3, 0x12, 1, b'X']);
    }
}
