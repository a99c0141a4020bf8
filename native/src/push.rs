//! A push's bytes: a `TakeResponse` holding a `JobBatch` of jobs (proto/pyqueue/v1/queue.proto),
//! encoded straight from the records, so that a delivery builds no protobuf objects per job.
//!
//! Only the fields of a plain job are written here. A job with a unique key or options (headers,
//! retention, results) goes through the Python path (`pyqueue/server/convert.py`), which knows
//! how to show them.

use crate::record::Record;

const IN_FLIGHT: u8 = 3;
const VARINT: u32 = 0;
const LEN: u32 = 2;

pub(crate) fn varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

pub(crate) fn tag(out: &mut Vec<u8>, field: u32, wire: u32) {
    varint(out, u64::from((field << 3) | wire));
}

/// A proto3 scalar: nothing when it is 0 (the default), as protobuf's own encoder does.
pub(crate) fn int(out: &mut Vec<u8>, field: u32, value: i64) {
    if value != 0 {
        tag(out, field, VARINT);
        varint(out, value as u64); // negative int32 and int64 take ten bytes, sign-extended
    }
}

pub(crate) fn bytes(out: &mut Vec<u8>, field: u32, value: &[u8]) {
    if !value.is_empty() {
        tag(out, field, LEN);
        varint(out, value.len() as u64);
        out.extend_from_slice(value);
    }
}

/// One `Job` message, its fields in number order.
pub fn job(out: &mut Vec<u8>, job_id: u64, r: &Record<'_>, payload: &[u8]) {
    int(out, 1, job_id as i64);
    bytes(out, 2, r.job_type.as_bytes());
    bytes(out, 3, r.queue.as_bytes());
    int(out, 4, i64::from(r.priority));
    bytes(out, 5, payload);
    bytes(out, 6, r.content_type.as_bytes());
    int(out, 7, i64::from(r.status));
    int(out, 8, i64::from(r.attempts));
    int(out, 9, r.created_ms);
    int(out, 10, r.updated_ms);
    int(out, 11, r.run_at_ms);
    int(out, 12, i64::from(r.lease));
    int(out, 13, i64::from(r.max_retries));
    int(out, 14, i64::from(r.timeout_ms));
    int(out, 15, r.expires_ms);
    int(out, 16, i64::from(r.errors));
    int(out, 17, i64::from(r.lost));
    if r.status == IN_FLIGHT {
        int(out, 19, r.started_ms);
    }
    bytes(out, 23, r.limit_key.as_bytes());
    bytes(out, 32, r.fair_key.as_bytes());
}

/// `TakeResponse { jobs: JobBatch { jobs: <each of `jobs`>, ack_result: <ack_result> } }`, from
/// jobs already encoded one by one and an `AckResult` already serialised (empty: none).
pub fn take_response(jobs: &[Vec<u8>], ack_result: &[u8]) -> Vec<u8> {
    let mut batch =
        Vec::with_capacity(jobs.iter().map(|j| j.len() + 3).sum::<usize>() + ack_result.len() + 3);
    for encoded in jobs {
        tag(&mut batch, 1, LEN);
        varint(&mut batch, encoded.len() as u64);
        batch.extend_from_slice(encoded);
    }
    if !ack_result.is_empty() {
        tag(&mut batch, 2, LEN);
        varint(&mut batch, ack_result.len() as u64);
        batch.extend_from_slice(ack_result);
    }
    let mut out = Vec::with_capacity(batch.len() + 6);
    tag(&mut out, 1, LEN);
    varint(&mut out, batch.len() as u64);
    out.extend_from_slice(&batch);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_are_little_endian_groups_of_seven() {
        let mut out = Vec::new();
        varint(&mut out, 300);
        assert_eq!(out, [0xAC, 0x02]);
        let mut negative = Vec::new();
        int(&mut negative, 13, -1);
        assert_eq!(negative.len(), 11); // the tag, then ten bytes
    }

    #[test]
    fn defaults_are_left_out() {
        let r = Record {
            queue: "q",
            job_type: "t",
            ..Record::default()
        };
        let mut out = Vec::new();
        job(&mut out, 5, &r, b"");
        assert_eq!(out, [0x08, 5, 0x12, 1, b't', 0x1A, 1, b'q']);
    }

    #[test]
    fn the_start_is_sent_only_in_flight() {
        let ready = Record {
            status: 2,
            started_ms: 9,
            ..Record::default()
        };
        let (mut a, mut b) = (Vec::new(), Vec::new());
        job(&mut a, 1, &ready, b"");
        job(
            &mut b,
            1,
            &Record {
                status: IN_FLIGHT,
                ..ready.clone()
            },
            b"",
        );
        assert!(!a.ends_with(&[0x98, 0x01, 9])); // field 19, varint
        assert!(b.ends_with(&[0x98, 0x01, 9]));
    }

    #[test]
    fn a_response_nests_the_batch_and_its_answers() {
        let out = take_response(&[vec![0x08, 1], vec![0x08, 2]], &[0x08, 7]);
        assert_eq!(
            out,
            [0x0A, 12, 0x0A, 2, 0x08, 1, 0x0A, 2, 0x08, 2, 0x12, 2, 0x08, 7]
        );
        assert_eq!(take_response(&[], &[]), [0x0A, 0]);
    }
}
