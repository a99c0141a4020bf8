//! The job-scoped keys of the store's key codec, and the index entries a record's change moves.
//!
//! `pyqueue/store/keys.py` documents the layout and keeps the ranges and scans; the keys a job's
//! life writes (its record, payload, status, queue and type entries) are built here, so that one
//! write of a record costs one call across the boundary instead of a dozen small ones. The bytes
//! are the same as the Python codec's: the tests below and `tests/store/test_keys.py` hold both
//! to them.

use std::fmt;

pub const JOB: u8 = b'J';
pub const PAYLOAD: u8 = b'P';
pub const STATUS: u8 = b'S';
pub const QUEUE: u8 = b'Q';
pub const TYPE: u8 = b'T';
pub const SCHEDULED: u8 = 1;
pub const READY: u8 = 2;

/// A name longer than its one-byte length prefix can say (the server's name limit keeps them far
/// shorter; this is the codec refusing what it cannot write).
#[derive(Debug, PartialEq, Eq)]
pub struct NameTooLong(pub usize);

impl fmt::Display for NameTooLong {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a name of {} bytes is past the key format's 255", self.0)
    }
}

impl std::error::Error for NameTooLong {}

fn tagged_id(tag: u8, job_id: u64) -> Vec<u8> {
    let mut key = Vec::with_capacity(9);
    key.push(tag);
    key.extend_from_slice(&job_id.to_be_bytes());
    key
}

fn push_name(key: &mut Vec<u8>, name: &str) -> Result<(), NameTooLong> {
    let len = u8::try_from(name.len()).map_err(|_| NameTooLong(name.len()))?;
    key.push(len);
    key.extend_from_slice(name.as_bytes());
    Ok(())
}

pub fn job_key(job_id: u64) -> Vec<u8> {
    tagged_id(JOB, job_id)
}

pub fn payload_key(job_id: u64) -> Vec<u8> {
    tagged_id(PAYLOAD, job_id)
}

/// `S status id`, or for a ready job `S ready len queue priority id` (the order it runs in).
pub fn status_key(
    status: u8,
    job_id: u64,
    queue: &str,
    priority: u16,
) -> Result<Vec<u8>, NameTooLong> {
    let mut key = Vec::with_capacity(12 + queue.len());
    key.push(STATUS);
    key.push(status);
    if status == READY {
        push_name(&mut key, queue)?;
        key.extend_from_slice(&priority.to_be_bytes());
    }
    key.extend_from_slice(&job_id.to_be_bytes());
    Ok(key)
}

/// `Q len queue status id`.
pub fn queue_key(queue: &str, status: u8, job_id: u64) -> Result<Vec<u8>, NameTooLong> {
    let mut key = Vec::with_capacity(11 + queue.len());
    key.push(QUEUE);
    push_name(&mut key, queue)?;
    key.push(status);
    key.extend_from_slice(&job_id.to_be_bytes());
    Ok(key)
}

/// `T len type id`.
pub fn type_key(job_type: &str, job_id: u64) -> Result<Vec<u8>, NameTooLong> {
    let mut key = Vec::with_capacity(10 + job_type.len());
    key.push(TYPE);
    push_name(&mut key, job_type)?;
    key.extend_from_slice(&job_id.to_be_bytes());
    Ok(key)
}

/// The job's keys as its status entry keeps them: its limit key (after a NUL) and its fair key
/// (after a 0x01), each only when set; names never hold either byte.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JobKeys<'a> {
    pub limit_key: &'a str,
    pub fair_key: &'a str,
}

/// The status entry's value: priority, timer and queue (then the job's keys, if any), what the
/// start-up rebuild needs without reading the record.
pub fn status_value(priority: u16, timer_ms: i64, queue: &str, job_keys: JobKeys<'_>) -> Vec<u8> {
    let (limit_key, fair_key) = (job_keys.limit_key, job_keys.fair_key);
    let mut value = Vec::with_capacity(12 + queue.len() + limit_key.len() + fair_key.len());
    value.extend_from_slice(&priority.to_be_bytes());
    value.extend_from_slice(&timer_ms.to_be_bytes());
    value.extend_from_slice(queue.as_bytes());
    if !limit_key.is_empty() {
        value.push(0);
        value.extend_from_slice(limit_key.as_bytes());
    }
    if !fair_key.is_empty() {
        value.push(1);
        value.extend_from_slice(fair_key.as_bytes());
    }
    value
}

/// What the status and queue entries of a job are derived from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Indexed<'a> {
    pub status: u8,
    pub priority: u16,
    pub timer_ms: i64,
    pub queue: &'a str,
}

impl Indexed<'_> {
    /// The time that matters in a status: a scheduled job's due time, else its expiry.
    pub fn timer(status: u8, run_at_ms: i64, expires_ms: i64) -> i64 {
        if status == SCHEDULED {
            run_at_ms
        } else {
            expires_ms
        }
    }
}

/// The index writes of one change of a record, from `before` to `after`.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Moves {
    pub delete_status: Option<Vec<u8>>,
    /// With its value; None when nothing the entries derive from changed.
    pub put_status: Option<(Vec<u8>, Vec<u8>)>,
    /// (old, new) queue entries, when the queue or the status changed.
    pub queue: Option<(Vec<u8>, Vec<u8>)>,
}

pub fn moves(
    job_id: u64,
    before: Indexed<'_>,
    after: Indexed<'_>,
    job_keys: JobKeys<'_>,
) -> Result<Moves, NameTooLong> {
    if before == after {
        return Ok(Moves::default());
    }
    let new_key = status_key(after.status, job_id, after.queue, after.priority)?;
    let keyed_alike = before.status == after.status
        && before.queue == after.queue
        && before.priority == after.priority;
    let delete_status = if keyed_alike {
        None
    } else {
        let old_key = status_key(before.status, job_id, before.queue, before.priority)?;
        (old_key != new_key).then_some(old_key)
    };
    let value = status_value(after.priority, after.timer_ms, after.queue, job_keys);
    let queue = if before.status != after.status || before.queue != after.queue {
        Some((
            queue_key(before.queue, before.status, job_id)?,
            queue_key(after.queue, after.status, job_id)?,
        ))
    } else {
        None
    };
    Ok(Moves {
        delete_status,
        put_status: Some((new_key, value)),
        queue,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limited(limit_key: &str) -> JobKeys<'_> {
        JobKeys {
            limit_key,
            fair_key: "",
        }
    }

    fn at(status: u8, priority: u16, timer_ms: i64, queue: &str) -> Indexed<'_> {
        Indexed {
            status,
            priority,
            timer_ms,
            queue,
        }
    }

    #[test]
    fn keys_are_tagged_and_big_endian() {
        assert_eq!(job_key(0x0102), b"J\0\0\0\0\0\0\x01\x02");
        assert_eq!(payload_key(1), b"P\0\0\0\0\0\0\0\x01");
        assert_eq!(
            status_key(3, 7, "mail", 5).unwrap(),
            b"S\x03\0\0\0\0\0\0\0\x07"
        );
        assert_eq!(
            status_key(READY, 7, "mail", 5).unwrap(),
            b"S\x02\x04mail\0\x05\0\0\0\0\0\0\0\x07"
        );
        assert_eq!(
            queue_key("mail", 3, 7).unwrap(),
            b"Q\x04mail\x03\0\0\0\0\0\0\0\x07"
        );
        assert_eq!(type_key("send", 7).unwrap(), b"T\x04send\0\0\0\0\0\0\0\x07");
    }

    #[test]
    fn a_status_value_carries_the_fair_key_after_a_0x01() {
        let keys = JobKeys {
            limit_key: "",
            fair_key: "t-1",
        };
        assert_eq!(
            status_value(1, 2, "q", keys),
            b"\0\x01\0\0\0\0\0\0\0\x02q\x01t-1"
        );
    }

    #[test]
    fn a_status_value_carries_the_limit_key_after_a_nul() {
        assert_eq!(
            status_value(1, 2, "q", JobKeys::default()),
            b"\0\x01\0\0\0\0\0\0\0\x02q"
        );
        assert_eq!(
            status_value(1, -1, "q", limited("acme")),
            b"\0\x01\xff\xff\xff\xff\xff\xff\xff\xffq\0acme"
        );
    }

    #[test]
    fn names_past_255_bytes_are_refused() {
        let long = "x".repeat(256);
        assert_eq!(queue_key(&long, 2, 1), Err(NameTooLong(256)));
        assert_eq!(status_key(READY, 1, &long, 0), Err(NameTooLong(256)));
        assert!(status_key(3, 1, &long, 0).is_ok()); // a status key names no queue but a ready one's
        assert!(type_key(&"é".repeat(127), 1).is_ok()); // bytes, not characters: 254
    }

    #[test]
    fn nothing_moves_when_nothing_the_entries_derive_from_changed() {
        let same = at(3, 5, 10, "q");
        assert_eq!(
            moves(1, same, same, JobKeys::default()).unwrap(),
            Moves::default()
        );
    }

    #[test]
    fn a_new_timer_rewrites_the_status_value_in_place() {
        let m = moves(1, at(3, 5, 10, "q"), at(3, 5, 20, "q"), JobKeys::default()).unwrap();
        assert_eq!(m.delete_status, None);
        assert_eq!(
            m.put_status,
            Some((
                status_key(3, 1, "q", 5).unwrap(),
                status_value(5, 20, "q", JobKeys::default())
            ))
        );
        assert_eq!(m.queue, None);
    }

    #[test]
    fn a_claim_moves_both_entries() {
        let m = moves(9, at(READY, 5, 0, "q"), at(3, 5, 0, "q"), limited("k")).unwrap();
        assert_eq!(m.delete_status, Some(status_key(READY, 9, "q", 5).unwrap()));
        assert_eq!(
            m.put_status,
            Some((
                status_key(3, 9, "q", 5).unwrap(),
                status_value(5, 0, "q", limited("k"))
            ))
        );
        assert_eq!(
            m.queue,
            Some((
                queue_key("q", READY, 9).unwrap(),
                queue_key("q", 3, 9).unwrap()
            ))
        );
    }

    #[test]
    fn a_new_priority_moves_only_a_ready_status_key() {
        let ready = moves(
            9,
            at(READY, 5, 0, "q"),
            at(READY, 6, 0, "q"),
            JobKeys::default(),
        )
        .unwrap();
        assert_eq!(
            ready.delete_status,
            Some(status_key(READY, 9, "q", 5).unwrap())
        );
        assert_eq!(ready.queue, None);
        let scheduled = moves(9, at(1, 5, 7, "q"), at(1, 6, 7, "q"), JobKeys::default()).unwrap();
        assert_eq!(scheduled.delete_status, None); // `S scheduled id` names no priority
        assert!(scheduled.put_status.is_some());
    }

    #[test]
    fn the_timer_is_the_due_time_only_when_scheduled() {
        assert_eq!(Indexed::timer(SCHEDULED, 5, 9), 5);
        assert_eq!(Indexed::timer(READY, 5, 9), 9);
    }
}
