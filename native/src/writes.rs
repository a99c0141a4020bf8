//! A request's job writes, built in one pass: for each job it created or changed, the record's
//! bytes and the index entries that move with it.
//!
//! The engine hands a whole request's jobs across at once (`BatchView.flush`), each with its
//! final state and what its stored entries derive from, so a job changed twice in one request
//! is encoded once, and the boundary is crossed once per request, not once per job.

use crate::keys::{self, Indexed, JobKeys, NameTooLong};
use crate::record::{Record, RecordError};
use std::fmt;

/// A record or a key the formats cannot hold.
#[derive(Debug, PartialEq, Eq)]
pub enum WriteError {
    Record(RecordError),
    Key(NameTooLong),
}

impl fmt::Display for WriteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WriteError::Record(err) => err.fmt(f),
            WriteError::Key(err) => err.fmt(f),
        }
    }
}

impl std::error::Error for WriteError {}

impl From<RecordError> for WriteError {
    fn from(err: RecordError) -> Self {
        WriteError::Record(err)
    }
}

impl From<NameTooLong> for WriteError {
    fn from(err: NameTooLong) -> Self {
        WriteError::Key(err)
    }
}

pub type Put = (Vec<u8>, Vec<u8>);

/// The writes gathered so far: puts and deletes in each family. No key is both deleted and put
/// (a moved entry's old and new keys differ, and a job is created, changed or deleted, once).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct JobWrites {
    pub data: Vec<Put>,
    pub index: Vec<Put>,
    pub data_deletes: Vec<Vec<u8>>,
    pub deletes: Vec<Vec<u8>>,
}

fn job_keys<'a>(record: &Record<'a>) -> JobKeys<'a> {
    JobKeys {
        limit_key: record.limit_key,
        fair_key: record.fair_key,
    }
}

fn indexed<'a>(record: &Record<'a>) -> Indexed<'a> {
    Indexed {
        status: record.status,
        priority: record.priority,
        timer_ms: Indexed::timer(record.status, record.run_at_ms, record.expires_ms),
        queue: record.queue,
    }
}

impl JobWrites {
    /// A job new in this request: its record and its status, queue and type entries (its
    /// payload is the caller's to put: it never needs to cross).
    pub fn created(&mut self, job_id: u64, record: &Record<'_>) -> Result<(), WriteError> {
        let value = record.encode()?;
        let at = indexed(record);
        let status = keys::status_key(at.status, job_id, at.queue, at.priority)?;
        let queue = keys::queue_key(at.queue, at.status, job_id)?;
        let job_type = keys::type_key(record.job_type, job_id)?;
        self.data.push((keys::job_key(job_id), value));
        let status_value = keys::status_value(at.priority, at.timer_ms, at.queue, job_keys(record));
        self.index.push((status, status_value));
        self.index.push((queue, Vec::new()));
        self.index.push((job_type, Vec::new()));
        Ok(())
    }

    /// A stored job changed in this request: its record, and the entries that moved since
    /// `before` (what the stored ones derive from).
    pub fn saved(
        &mut self,
        job_id: u64,
        record: &Record<'_>,
        before: Indexed<'_>,
    ) -> Result<(), WriteError> {
        let value = record.encode()?;
        let moves = keys::moves(job_id, before, indexed(record), job_keys(record))?;
        self.data.push((keys::job_key(job_id), value));
        self.deletes.extend(moves.delete_status);
        if let Some(put) = moves.put_status {
            self.index.push(put);
        }
        if let Some((old, new)) = moves.queue {
            self.deletes.push(old);
            self.index.push((new, Vec::new()));
        }
        Ok(())
    }

    /// A stored job deleted in this request: its record and payload, and the status, queue and
    /// type entries that `stored` (what they derive from) names. Its error and result records,
    /// and its unique key, are the caller's: only it knows whether there are any.
    pub fn deleted(
        &mut self,
        job_id: u64,
        job_type: &str,
        stored: Indexed<'_>,
    ) -> Result<(), WriteError> {
        let status = keys::status_key(stored.status, job_id, stored.queue, stored.priority)?;
        let queue = keys::queue_key(stored.queue, stored.status, job_id)?;
        let job_type = keys::type_key(job_type, job_id)?;
        self.data_deletes.push(keys::job_key(job_id));
        self.data_deletes.push(keys::payload_key(job_id));
        self.deletes.extend([status, queue, job_type]);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::JobKeys;
    use crate::keys::READY;

    const IN_FLIGHT: u8 = 3;

    fn ready(queue: &str) -> Record<'_> {
        Record {
            status: READY,
            priority: 3,
            queue,
            job_type: "send",
            created_ms: 1,
            updated_ms: 1,
            ..Record::default()
        }
    }

    #[test]
    fn a_new_job_puts_its_record_and_three_index_entries() {
        let mut writes = JobWrites::default();
        let record = ready("mail");
        writes.created(7, &record).unwrap();
        assert_eq!(
            writes.data,
            vec![(keys::job_key(7), record.encode().unwrap())]
        );
        assert_eq!(
            writes.index,
            vec![
                (
                    keys::status_key(READY, 7, "mail", 3).unwrap(),
                    keys::status_value(3, 0, "mail", JobKeys::default())
                ),
                (keys::queue_key("mail", READY, 7).unwrap(), vec![]),
                (keys::type_key("send", 7).unwrap(), vec![]),
            ]
        );
        assert!(writes.deletes.is_empty());
    }

    #[test]
    fn a_claim_moves_both_entries_and_rewrites_the_record() {
        let mut writes = JobWrites::default();
        let before = ready("mail");
        let claimed = Record {
            status: IN_FLIGHT,
            attempts: 1,
            expires_ms: 90,
            ..before.clone()
        };
        writes.saved(7, &claimed, indexed(&before)).unwrap();
        assert_eq!(
            writes.data,
            vec![(keys::job_key(7), claimed.encode().unwrap())]
        );
        assert_eq!(
            writes.deletes,
            vec![
                keys::status_key(READY, 7, "mail", 3).unwrap(),
                keys::queue_key("mail", READY, 7).unwrap(),
            ]
        );
        assert_eq!(
            writes.index,
            vec![
                (
                    keys::status_key(IN_FLIGHT, 7, "mail", 3).unwrap(),
                    keys::status_value(3, 90, "mail", JobKeys::default())
                ),
                (keys::queue_key("mail", IN_FLIGHT, 7).unwrap(), vec![]),
            ]
        );
    }

    #[test]
    fn a_change_of_the_record_alone_moves_no_entry() {
        let mut writes = JobWrites::default();
        let before = ready("mail");
        let started = Record {
            started_ms: 5,
            ..before.clone()
        };
        writes.saved(7, &started, indexed(&before)).unwrap();
        assert_eq!(writes.data.len(), 1);
        assert!(writes.index.is_empty() && writes.deletes.is_empty());
    }

    #[test]
    fn a_deleted_job_loses_the_entries_its_stored_state_names() {
        let mut writes = JobWrites::default();
        let stored = ready("mail");
        writes.deleted(7, "send", indexed(&stored)).unwrap();
        assert_eq!(
            writes.data_deletes,
            vec![keys::job_key(7), keys::payload_key(7)]
        );
        assert_eq!(
            writes.deletes,
            vec![
                keys::status_key(READY, 7, "mail", 3).unwrap(),
                keys::queue_key("mail", READY, 7).unwrap(),
                keys::type_key("send", 7).unwrap(),
            ]
        );
        assert!(writes.data.is_empty() && writes.index.is_empty());
    }

    #[test]
    fn what_the_formats_cannot_hold_is_an_error() {
        let mut writes = JobWrites::default();
        let long = "q".repeat(256);
        assert_eq!(
            writes.created(7, &ready(&long)),
            Err(WriteError::Key(NameTooLong(256)))
        );
        let options = vec![0u8; 0];
        let huge = "u".repeat(70_000);
        let record = Record {
            unique_key: &huge,
            options: &options,
            ..ready("mail")
        };
        assert!(matches!(
            writes.created(7, &record),
            Err(WriteError::Record(RecordError::TooLong(..)))
        ));
    }
}
