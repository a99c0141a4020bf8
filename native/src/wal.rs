//! RocksDB's write-ahead log format (db/log_format.h), read and written again to salvage a damaged
//! log: `pyqueue repair`.
//!
//! A log is a run of 32 KiB blocks. Each holds physical records: a 7-byte header (a masked CRC32C
//! of the type byte and the payload, the payload's length, its type) and the payload. A logical
//! record (one write batch) is one FULL record, or FIRST, MIDDLE..., LAST across blocks; fewer
//! than 7 bytes left in a block are zero padding.
//!
//! RocksDB's own salvage (skip any corrupted record) drops a damaged MIDDLE fragment but joins the
//! FIRST and LAST around it into one batch, whose content then fails to parse, and the store does
//! not open at all. Here a logical record is kept only when every fragment of it passes its
//! checksum; a damaged span costs the rest of its block, as in RocksDB. The records kept are
//! written out again in a fresh, well-formed layout, in their order.

pub const BLOCK: usize = 32 * 1024;
const HEADER: usize = 7;
const FULL: u8 = 1;
const FIRST: u8 = 2;
const MIDDLE: u8 = 3;
const LAST: u8 = 4;
const MASK_DELTA: u32 = 0xa282_ead8;

const TABLE: [u32; 256] = {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = i as u32;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0x82F6_3B78 // CRC32C (Castagnoli), reflected
            } else {
                crc >> 1
            };
            bit += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
};

/// CRC32C of `data`, continuing from `crc` (0 to start).
pub fn crc32c_extend(crc: u32, data: &[u8]) -> u32 {
    let mut c = !crc;
    for &byte in data {
        c = TABLE[((c ^ byte as u32) & 0xFF) as usize] ^ (c >> 8);
    }
    !c
}

pub fn crc32c(data: &[u8]) -> u32 {
    crc32c_extend(0, data)
}

/// How RocksDB stores a CRC (so that a CRC of data holding CRCs is not trivially one).
fn mask(crc: u32) -> u32 {
    crc.rotate_right(15).wrapping_add(MASK_DELTA)
}

fn record_crc(kind: u8, payload: &[u8]) -> u32 {
    mask(crc32c_extend(crc32c(&[kind]), payload))
}

/// The logical records of a log that are whole, in order, and how many damaged spans were
/// dropped (a span: the rest of a block after a bad header or checksum, or a logical record that
/// lost a fragment).
pub fn read(log: &[u8]) -> (Vec<Vec<u8>>, usize) {
    let mut records = Vec::new();
    let mut partial: Option<Vec<u8>> = None;
    let mut dropped = 0;
    for start in (0..log.len()).step_by(BLOCK) {
        let end = (start + BLOCK).min(log.len());
        let mut at = start;
        while at + HEADER <= end {
            let stored = u32::from_le_bytes([log[at], log[at + 1], log[at + 2], log[at + 3]]);
            let length = u16::from_le_bytes([log[at + 4], log[at + 5]]) as usize;
            let kind = log[at + 6];
            if kind == 0 && length == 0 {
                break; // padding, or a preallocated tail: nothing more in this block
            }
            let body = at + HEADER;
            let fits = body + length <= end;
            if !fits
                || !(FULL..=LAST).contains(&kind)
                || stored != record_crc(kind, &log[body..body + length])
            {
                dropped += 1 + usize::from(partial.take().is_some());
                break; // its length cannot be trusted: the rest of the block goes, as in RocksDB
            }
            let payload = &log[body..body + length];
            match kind {
                FULL => {
                    dropped += usize::from(partial.take().is_some());
                    records.push(payload.to_vec());
                }
                FIRST => {
                    dropped += usize::from(partial.replace(payload.to_vec()).is_some());
                }
                MIDDLE => match partial.as_mut() {
                    Some(buffer) => buffer.extend_from_slice(payload),
                    None => dropped += 1, // the rest of a record whose start was lost
                },
                _ => match partial.take() {
                    Some(mut buffer) => {
                        buffer.extend_from_slice(payload);
                        records.push(buffer);
                    }
                    None => dropped += 1,
                },
            }
            at = body + length;
        }
    }
    dropped += usize::from(partial.is_some()); // a torn tail
    (records, dropped)
}

/// `records` as a well-formed log.
pub fn write(records: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for record in records {
        let mut left: &[u8] = record;
        let mut first = true;
        loop {
            let room = BLOCK - out.len() % BLOCK;
            if room < HEADER {
                out.resize(out.len() + room, 0); // the block's trailer
                continue;
            }
            let take = left.len().min(room - HEADER);
            let last = take == left.len();
            let kind = match (first, last) {
                (true, true) => FULL,
                (true, false) => FIRST,
                (false, true) => LAST,
                (false, false) => MIDDLE,
            };
            let (fragment, rest) = left.split_at(take);
            out.extend_from_slice(&record_crc(kind, fragment).to_le_bytes());
            out.extend_from_slice(&(take as u16).to_le_bytes());
            out.push(kind);
            out.extend_from_slice(fragment);
            left = rest;
            first = false;
            if last {
                break;
            }
        }
    }
    out
}

/// The log with every damaged span dropped: (the new log, records kept, spans dropped).
pub fn salvage(log: &[u8]) -> (Vec<u8>, usize, usize) {
    let (records, dropped) = read(log);
    (write(&records), records.len(), dropped)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<Vec<u8>> {
        vec![
            b"small".to_vec(),
            vec![7u8; 100_000], // spans four blocks: FIRST, MIDDLE, MIDDLE, LAST
            vec![9u8; BLOCK - HEADER - 5 - HEADER], // fills its block to the byte
            b"after".to_vec(),
        ]
    }

    #[test]
    fn crc32c_matches_the_standard_check_value() {
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        assert_eq!(crc32c_extend(crc32c(b"1234"), b"56789"), 0xE306_9283);
    }

    #[test]
    fn a_written_log_reads_back_whole() {
        let log = write(&sample());
        assert_eq!(read(&log), (sample(), 0));
    }

    #[test]
    fn a_damaged_middle_fragment_drops_its_record_and_keeps_the_rest() {
        let mut log = write(&sample());
        log[BLOCK + 100] ^= 0xFF; // inside the big record's first MIDDLE fragment
        let (records, dropped) = read(&log);
        assert!(dropped >= 1);
        assert_eq!(
            records,
            vec![b"small".to_vec(), sample()[2].clone(), b"after".to_vec()]
        );
        let (again, kept, _) = salvage(&log);
        assert_eq!(kept, 3);
        assert_eq!(
            read(&again),
            (records, 0),
            "the salvaged log is well formed"
        );
    }

    #[test]
    fn a_torn_tail_and_padding_are_handled() {
        let log = write(&sample());
        let torn = &log[..log.len() - 2];
        let (records, dropped) = read(torn);
        assert_eq!((records.len(), dropped), (3, 1));
        let mut padded = write(&[b"x".to_vec()]);
        padded.resize(BLOCK * 2, 0); // a preallocated tail
        assert_eq!(read(&padded), (vec![b"x".to_vec()], 0));
    }
}
