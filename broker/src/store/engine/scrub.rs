//! The background scrub: re-reads the CommitLog's sealed segments from the device and
//! checks every record (length, magic, body CRC, physical offset field), a bounded
//! piece per call, so bit rot in data nobody reads is found and named (file, offset)
//! without a start-up scan. Rate-limited by its caller (`flusher.rs`,
//! `scrub_bytes_per_sec`); off by default.
//!
//! Invariants: it reads only sealed segments (below the segment being written), never
//! through the read-ahead windows or the tail (it must see what the device holds);
//! it changes nothing on disk — a corrupt record is reported, counted, logged, and the
//! scrub goes on at the next segment (it cannot know where the next record starts).

use super::*;
use crate::store::io::{align_down, DiskFile};
use ringmq_client::message::stored::{record_head, RecordHead, StoredMessageView, BLANK_LEN_MIN_BYTES};

/// Bytes the scrub reads per device read.
pub const SCRUB_READ_BYTES: u64 = 1024 * 1024;

/// One corrupt record the scrub found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScrubFinding {
    pub file: PathBuf,
    /// Offset in the file.
    pub offset: u64,
    pub reason: String,
}

/// What one `scrub_step` did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScrubStep {
    pub scanned_bytes: u64,
    pub findings: Vec<ScrubFinding>,
    /// The cursor went back to the log's start: a whole pass ended.
    pub pass_ended: bool,
}

impl<D: Disk, C: Clock> Store<D, C> {
    /// Checks the records from the scrub cursor on, reading at most about `max_bytes`
    /// (at least one whole record), then moves the cursor. Read errors are returned
    /// (not fatal, as every read error); corruption is in the step's findings.
    pub async fn scrub_step(&self, max_bytes: u64) -> Result<ScrubStep, StoreError> {
        self.check_alive()?;
        let (start, sealed_end, segment_bytes) = {
            let inner = self.inner.borrow();
            let sealed_end = inner.commitlog.segment_start(inner.commitlog.flushed_pos);
            (inner.commitlog_start, sealed_end, inner.commitlog.segment_bytes)
        };
        let mut step = ScrubStep::default();
        let mut pos = {
            let inner = self.inner.borrow();
            inner.scrub_pos.max(start)
        };
        if pos >= sealed_end {
            // Nothing sealed past the cursor: start the next pass.
            step.pass_ended = pos > start;
            self.inner.borrow_mut().scrub_pos = start;
            return Ok(step);
        }
        let budget_end = pos + max_bytes.max(1);
        while pos < sealed_end && pos < budget_end {
            let seg = align_down(pos, segment_bytes);
            let seg_end = seg + segment_bytes;
            // What is left of the budget (the rate is the caller's promise), but at least
            // the whole record that starts here, so that every step advances.
            let mut want = SCRUB_READ_BYTES.min(budget_end - pos).max(BLANK_LEN_MIN_BYTES as u64).min(seg_end - pos);
            let mut bytes = self.note_read(read_segment_bytes(&self.inner, pos, want as usize).await)?;
            if let RecordHead::Message(n) = record_head(&bytes) {
                let n = (n as u64).min(self.config.record_bytes_limit()).min(seg_end - pos);
                if n > want {
                    want = n;
                    bytes = self.note_read(read_segment_bytes(&self.inner, pos, want as usize).await)?;
                }
            }
            step.scanned_bytes += bytes.len() as u64;
            let mut at = 0usize;
            let mut next = None;
            while at + BLANK_LEN_MIN_BYTES <= bytes.len() {
                let record_pos = pos + at as u64;
                match record_head(&bytes[at..]) {
                    RecordHead::Blank(n) if record_pos + n as u64 == seg_end => {
                        next = Some(seg_end);
                        break;
                    }
                    RecordHead::Message(n) if n as u64 <= self.config.record_bytes_limit() && record_pos + n as u64 <= seg_end => {
                        if at + n > bytes.len() {
                            break; // the rest of it comes with the next read
                        }
                        let verdict = match StoredMessageView::parse_verified(&bytes[at..at + n]) {
                            Ok(view) if view.physical_offset() as u64 == self.shard.phys(record_pos) => None,
                            Ok(view) => Some(format!("record says physical offset {}", view.physical_offset())),
                            Err(e) => Some(e.to_string()),
                        };
                        if let Some(reason) = verdict {
                            next = Some(seg_end);
                            step.findings.push(self.scrub_finding(seg, record_pos, reason));
                            break;
                        }
                        at += n;
                    }
                    // A sealed segment holds records back to back up to its blank: zeros
                    // or garbage here mean lost or damaged bytes.
                    RecordHead::Empty => {
                        next = Some(seg_end);
                        step.findings.push(self.scrub_finding(seg, record_pos, "zeros where a record was expected".into()));
                        break;
                    }
                    _ => {
                        next = Some(seg_end);
                        step.findings.push(self.scrub_finding(seg, record_pos, "bad magic code or length".into()));
                        break;
                    }
                }
            }
            let moved_to = next.unwrap_or(pos + at as u64);
            if moved_to == pos {
                // Shorter than one record header: the segment file is short.
                step.findings.push(self.scrub_finding(seg, pos, format!("segment file ends at {}", pos - seg + bytes.len() as u64)));
                pos = seg_end;
            } else {
                pos = moved_to;
            }
        }
        let mut inner = self.inner.borrow_mut();
        inner.scrub_pos = pos;
        inner.stats.scrubbed_bytes += step.scanned_bytes;
        inner.stats.scrub_corrupt_records += step.findings.len() as u64;
        Ok(step)
    }

    fn scrub_finding(&self, seg: u64, record_pos: u64, reason: String) -> ScrubFinding {
        let finding = ScrubFinding { file: self.inner.borrow().commitlog.path_of(seg), offset: record_pos - seg, reason };
        tracing::error!(shard = self.shard.0, file = %finding.file.display(), offset = finding.offset, reason = %finding.reason, "scrub: corrupt record in a sealed segment");
        finding
    }
}

/// `[pos, pos + len)` from the segment file holding `pos` (never the tail): what the
/// device holds. Short where the file ends.
async fn read_segment_bytes<D: Disk>(cell: &RefCell<Inner<D>>, pos: u64, len: usize) -> Result<Vec<u8>, StoreError> {
    let (file, seg) = {
        let inner = cell.borrow();
        let seg = inner.commitlog.segment_start(pos);
        match inner.commitlog.files.get(&seg) {
            Some(f) => (f.clone(), seg),
            None => return Ok(Vec::new()),
        }
    };
    file.read_at(pos - seg, len).await.map_err(|source| StoreError::Read { file: file.path().to_path_buf(), offset: pos - seg, source })
}
