//! The job record's binary codec (format version 1), the one every enqueue, claim, start and ack
//! encodes or decodes. The layout is documented in `pyqueue/store/records.py`; this is its only
//! implementation, so the bytes on disk are the same as before it moved here.
//!
//! Decoding borrows from the input: strings and options are slices of the stored bytes, so the
//! edge copies each once, into the Python object it returns.

use std::fmt;

pub const VERSION: u8 = 1;
const HEAD: usize = 52; // version .. expires_ms
const COUNTER_MAX: u64 = 0xFFFF; // attempts, lost and errors saturate: a count is never worth a crash

/// A record's fields, the strings and options borrowed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Record<'a> {
    pub status: u8,
    pub priority: u16,
    pub attempts: u16,
    pub max_retries: i16,
    pub lost: u16,
    pub errors: u16,
    pub lease: u32,
    pub timeout_ms: u32,
    pub created_ms: i64,
    pub updated_ms: i64,
    pub run_at_ms: i64,
    pub expires_ms: i64,
    pub queue: &'a str,
    pub job_type: &'a str,
    pub content_type: &'a str,
    pub unique_key: &'a str,
    pub options: &'a [u8],
    pub started_ms: i64,
    pub limit_key: &'a str,
    pub fair_key: &'a str,
}

#[derive(Debug, PartialEq, Eq)]
pub enum RecordError {
    /// Written by a newer (or unknown) version of the format.
    Version(u8),
    /// The bytes end inside the named field.
    Truncated(&'static str),
    /// The named string is not UTF-8.
    NotUtf8(&'static str),
    /// The named field is longer than its length prefix can say.
    TooLong(&'static str, usize),
}

impl fmt::Display for RecordError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecordError::Version(v) => write!(f, "record version {v} is not {VERSION}"),
            RecordError::Truncated(field) => write!(f, "the record ends inside its {field}"),
            RecordError::NotUtf8(field) => write!(f, "its {field} is not UTF-8"),
            RecordError::TooLong(field, n) => {
                write!(f, "its {field} is {n} bytes, past the format's limit")
            }
        }
    }
}

impl std::error::Error for RecordError {}

/// Clamp a counter to what its u16 field holds.
pub fn saturate(count: u64) -> u16 {
    count.min(COUNTER_MAX) as u16
}

const TEXTS: [&str; 4] = ["queue", "type", "content type", "unique key"];

impl<'a> Record<'a> {
    /// The encoded length, to allocate once.
    pub fn encoded_len(&self) -> usize {
        let texts: usize = self.texts().iter().map(|t| 2 + t.len()).sum();
        let limit = if self.limit_key.is_empty() && self.fair_key.is_empty() {
            0
        } else {
            2 + self.limit_key.len()
        };
        let fair = if self.fair_key.is_empty() {
            0
        } else {
            2 + self.fair_key.len()
        };
        HEAD + texts + 4 + self.options.len() + 8 + limit + fair
    }

    fn texts(&self) -> [&'a str; 4] {
        [
            self.queue,
            self.job_type,
            self.content_type,
            self.unique_key,
        ]
    }

    /// Append the encoded record to `out`.
    pub fn encode_into(&self, out: &mut Vec<u8>) -> Result<(), RecordError> {
        out.reserve(self.encoded_len());
        out.push(VERSION);
        out.push(self.status);
        out.extend_from_slice(&self.priority.to_be_bytes());
        out.extend_from_slice(&self.attempts.to_be_bytes());
        out.extend_from_slice(&self.max_retries.to_be_bytes());
        out.extend_from_slice(&self.lost.to_be_bytes());
        out.extend_from_slice(&self.errors.to_be_bytes());
        out.extend_from_slice(&self.lease.to_be_bytes());
        out.extend_from_slice(&self.timeout_ms.to_be_bytes());
        for time in [
            self.created_ms,
            self.updated_ms,
            self.run_at_ms,
            self.expires_ms,
        ] {
            out.extend_from_slice(&time.to_be_bytes());
        }
        for (text, field) in self.texts().into_iter().zip(TEXTS) {
            put_u16_str(out, text, field)?;
        }
        let options = u32::try_from(self.options.len())
            .map_err(|_| RecordError::TooLong("options", self.options.len()))?;
        out.extend_from_slice(&options.to_be_bytes());
        out.extend_from_slice(self.options);
        out.extend_from_slice(&self.started_ms.to_be_bytes());
        // Trailing fields are written only when set, each with those before it (empty or not).
        if !self.limit_key.is_empty() || !self.fair_key.is_empty() {
            put_u16_str(out, self.limit_key, "limit key")?;
        }
        if !self.fair_key.is_empty() {
            put_u16_str(out, self.fair_key, "fair key")?;
        }
        Ok(())
    }

    pub fn encode(&self) -> Result<Vec<u8>, RecordError> {
        let mut out = Vec::new();
        self.encode_into(&mut out)?;
        Ok(out)
    }

    /// Decode a record. Records written before a trailing field (started_ms, limit_key, fair_key) end
    /// before it, and decode with 0 or "".
    pub fn decode(raw: &'a [u8]) -> Result<Record<'a>, RecordError> {
        let mut r = Reader { raw, at: 0 };
        let version = r.u8("version")?;
        if version != VERSION {
            return Err(RecordError::Version(version));
        }
        let mut record = Record {
            status: r.u8("status")?,
            priority: u16::from_be_bytes(r.array("priority")?),
            attempts: u16::from_be_bytes(r.array("attempts")?),
            max_retries: i16::from_be_bytes(r.array("max retries")?),
            lost: u16::from_be_bytes(r.array("lost count")?),
            errors: u16::from_be_bytes(r.array("error count")?),
            lease: u32::from_be_bytes(r.array("lease")?),
            timeout_ms: u32::from_be_bytes(r.array("timeout")?),
            created_ms: i64::from_be_bytes(r.array("created time")?),
            updated_ms: i64::from_be_bytes(r.array("updated time")?),
            run_at_ms: i64::from_be_bytes(r.array("run-at time")?),
            expires_ms: i64::from_be_bytes(r.array("expiry time")?),
            ..Record::default()
        };
        record.queue = r.u16_str(TEXTS[0])?;
        record.job_type = r.u16_str(TEXTS[1])?;
        record.content_type = r.u16_str(TEXTS[2])?;
        record.unique_key = r.u16_str(TEXTS[3])?;
        let options = u32::from_be_bytes(r.array("options length")?) as usize;
        record.options = r.take(options, "options")?;
        if r.left() > 0 {
            record.started_ms = i64::from_be_bytes(r.array("start time")?);
        }
        if r.left() > 0 {
            record.limit_key = r.u16_str("limit key")?;
        }
        if r.left() > 0 {
            record.fair_key = r.u16_str("fair key")?;
        }
        Ok(record)
    }
}

fn put_u16_str(out: &mut Vec<u8>, text: &str, field: &'static str) -> Result<(), RecordError> {
    let n = u16::try_from(text.len()).map_err(|_| RecordError::TooLong(field, text.len()))?;
    out.extend_from_slice(&n.to_be_bytes());
    out.extend_from_slice(text.as_bytes());
    Ok(())
}

struct Reader<'a> {
    raw: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn left(&self) -> usize {
        self.raw.len() - self.at
    }

    fn take(&mut self, n: usize, field: &'static str) -> Result<&'a [u8], RecordError> {
        if self.left() < n {
            return Err(RecordError::Truncated(field));
        }
        let slice = &self.raw[self.at..self.at + n];
        self.at += n;
        Ok(slice)
    }

    fn array<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], RecordError> {
        let slice = self.take(N, field)?;
        Ok(slice.try_into().expect("take returned N bytes"))
    }

    fn u8(&mut self, field: &'static str) -> Result<u8, RecordError> {
        Ok(self.array::<1>(field)?[0])
    }

    fn u16_str(&mut self, field: &'static str) -> Result<&'a str, RecordError> {
        let n = u16::from_be_bytes(self.array(field)?) as usize;
        let bytes = self.take(n, field)?;
        std::str::from_utf8(bytes).map_err(|_| RecordError::NotUtf8(field))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes the earlier, pure-Python codec wrote for these two records: data directories written
    /// before the codec moved here must decode to the same fields, and re-encode to the same bytes.
    const EVERY_FIELD: &str = "010300030004ffff000200010000004d000013880000018bcfe568010000018bcfe5680200\
        0000000000007b00000000000001c80005c3bc6ec3af0003742e7800106170706c69636174696f6e2f6a736f6e0003\
        752d31000000077b2278223a317d0000018bcfe568030006637573742d39";
    const BARE: &str =
        "010200000000ffff0000000000000000000000000000000000000005000000000000000600000000\
        00000000000000000000000000046d61696c000473656e6400000000000000000000000000000000";

    fn unhex(text: &str) -> Vec<u8> {
        (0..text.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
            .collect()
    }

    fn every_field() -> Record<'static> {
        Record {
            status: 3,
            priority: 3,
            attempts: 4,
            max_retries: -1,
            lost: 2,
            errors: 1,
            lease: 77,
            timeout_ms: 5000,
            created_ms: 1_700_000_000_001,
            updated_ms: 1_700_000_000_002,
            run_at_ms: 123,
            expires_ms: 456,
            queue: "ünï",
            job_type: "t.x",
            content_type: "application/json",
            unique_key: "u-1",
            options: br#"{"x":1}"#,
            started_ms: 1_700_000_000_003,
            limit_key: "cust-9",
            fair_key: "",
        }
    }

    #[test]
    fn a_fair_key_follows_the_limit_key_even_when_that_is_empty() {
        let record = Record {
            fair_key: "tenant-4",
            queue: "q",
            ..Record::default()
        };
        let raw = record.encode().unwrap();
        assert_eq!(raw.len(), record.encoded_len());
        assert!(raw.ends_with(b"\x00\x00\x00\x08tenant-4"));
        assert_eq!(Record::decode(&raw).unwrap(), record);
        let both = Record {
            limit_key: "l",
            ..record
        };
        assert_eq!(Record::decode(&both.encode().unwrap()).unwrap(), both);
    }

    #[test]
    fn the_bytes_on_disk_are_unchanged() {
        let raw = unhex(EVERY_FIELD);
        assert_eq!(Record::decode(&raw).unwrap(), every_field());
        assert_eq!(every_field().encode().unwrap(), raw);
        let bare = Record {
            status: 2,
            max_retries: -1,
            created_ms: 5,
            updated_ms: 6,
            queue: "mail",
            job_type: "send",
            ..Record::default()
        };
        assert_eq!(bare.encode().unwrap(), unhex(BARE));
        assert_eq!(bare.encoded_len(), unhex(BARE).len());
        assert_eq!(every_field().encoded_len(), unhex(EVERY_FIELD).len());
    }

    #[test]
    fn records_from_before_the_trailing_fields_decode_with_defaults() {
        let full = every_field();
        let raw = full.encode().unwrap();
        // Before limit_key: it ends after started_ms. Before started_ms: after the options.
        let without_limit = &raw[..raw.len() - 2 - "cust-9".len()];
        let decoded = Record::decode(without_limit).unwrap();
        assert_eq!(
            (decoded.started_ms, decoded.limit_key),
            (full.started_ms, "")
        );
        let without_start = &without_limit[..without_limit.len() - 8];
        let decoded = Record::decode(without_start).unwrap();
        assert_eq!((decoded.started_ms, decoded.limit_key), (0, ""));
        assert_eq!(decoded.options, full.options);
    }

    #[test]
    fn damage_is_an_error_that_names_the_field() {
        let raw = every_field().encode().unwrap();
        assert_eq!(Record::decode(&[]), Err(RecordError::Truncated("version")));
        assert_eq!(
            Record::decode(&raw[..10]),
            Err(RecordError::Truncated("error count"))
        );
        let mut newer = raw.clone();
        newer[0] = 9;
        assert_eq!(Record::decode(&newer), Err(RecordError::Version(9)));
        assert_eq!(
            Record::decode(&raw[..HEAD + 3]),
            Err(RecordError::Truncated("queue"))
        );
        let mut bad_utf8 = raw.clone();
        bad_utf8[HEAD + 2] = 0xFF;
        assert_eq!(
            Record::decode(&bad_utf8),
            Err(RecordError::NotUtf8("queue"))
        );
        // A length that runs past the end is damage, not a shorter string.
        let mut long_options = raw.clone();
        let at = raw.len() - 6 - 2 - 8 - 7 - 4; // the options' length prefix
        long_options[at] = 0xFF;
        assert_eq!(
            Record::decode(&long_options),
            Err(RecordError::Truncated("options"))
        );
        // A torn limit key (its prefix promises more than is there).
        assert_eq!(
            Record::decode(&raw[..raw.len() - 1]),
            Err(RecordError::Truncated("limit key"))
        );
    }

    #[test]
    fn oversized_fields_are_refused_not_cut() {
        let long = "q".repeat(70_000);
        let record = Record {
            queue: &long,
            ..every_field()
        };
        assert_eq!(record.encode(), Err(RecordError::TooLong("queue", 70_000)));
    }

    #[test]
    fn counters_saturate() {
        assert_eq!(saturate(3), 3);
        assert_eq!(saturate(70_000), 0xFFFF);
    }
}
