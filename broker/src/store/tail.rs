//! `TailBuffer`: the in-memory tail of an append-only byte space, in fixed-size chunks.
//!
//! Holds bytes `[base, end)` of a log's offset space: every byte not yet flushed plus
//! up to a configured amount of flushed bytes for tail reads. Chunks are allocated as
//! the tail grows and dropped from the front as it is trimmed, so no byte is ever
//! moved and memory is `end - base` rounded up to one chunk.
//!
//! Invariants: `base` is block-aligned (a flush always starts at a block boundary it
//! holds); `base <= end`; reads outside `[base, end)` are refused by the caller, never
//! served with stale bytes.

use std::collections::VecDeque;

pub struct TailBuffer {
    base: u64,
    end: u64,
    chunk_bytes: usize,
    chunks: VecDeque<Box<[u8]>>,
    /// Trimmed chunks kept for reuse (at most `SPARE_CHUNKS_MAX`): allocating and
    /// zeroing a fresh chunk per chunk appended dominated the append path.
    spare: Vec<Box<[u8]>>,
}

/// Enough to refill one full dirty window of 1 MiB chunks without allocating.
const SPARE_CHUNKS_MAX: usize = 64;

impl TailBuffer {
    pub fn new(base: u64, chunk_bytes: usize) -> Self {
        assert!(chunk_bytes > 0 && chunk_bytes % 4096 == 0, "chunk_bytes must be a positive multiple of 4096");
        assert!(base % 4096 == 0, "tail base {base} not block-aligned");
        Self { base, end: base, chunk_bytes, chunks: VecDeque::new(), spare: Vec::new() }
    }

    pub fn base(&self) -> u64 {
        self.base
    }
    pub fn end(&self) -> u64 {
        self.end
    }
    pub fn len_bytes(&self) -> u64 {
        self.end - self.base
    }
    pub fn contains(&self, pos: u64, len: u64) -> bool {
        pos >= self.base && pos + len <= self.end
    }

    pub fn append(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let rel = (self.end - self.base) as usize;
            let chunk_index = rel / self.chunk_bytes;
            let within = rel % self.chunk_bytes;
            if chunk_index == self.chunks.len() {
                // A reused chunk holds stale bytes; every byte is written before it is
                // read (reads past `end` return zeros without looking).
                let chunk = self.spare.pop().unwrap_or_else(|| vec![0u8; self.chunk_bytes].into_boxed_slice());
                self.chunks.push_back(chunk);
            }
            let room = self.chunk_bytes - within;
            let n = room.min(bytes.len());
            self.chunks[chunk_index][within..within + n].copy_from_slice(&bytes[..n]);
            self.end += n as u64;
            bytes = &bytes[n..];
        }
    }

    /// Appends `len` bytes that `fill` writes in place, when they fit in the chunk the
    /// tail ends in (or in a fresh one): the append path encodes a record straight into
    /// the tail, with no scratch copy. Returns `false`, appending nothing, when they
    /// would straddle two chunks (then `append` a copy: once per chunk at most).
    pub fn append_in_place(&mut self, len: usize, fill: impl FnOnce(&mut [u8])) -> bool {
        let rel = (self.end - self.base) as usize;
        let chunk_index = rel / self.chunk_bytes;
        let within = rel % self.chunk_bytes;
        if within + len > self.chunk_bytes {
            return false;
        }
        if chunk_index == self.chunks.len() {
            let chunk = self.spare.pop().unwrap_or_else(|| vec![0u8; self.chunk_bytes].into_boxed_slice());
            self.chunks.push_back(chunk);
        }
        fill(&mut self.chunks[chunk_index][within..within + len]);
        self.end += len as u64;
        true
    }

    /// Appends `len` zero bytes.
    pub fn append_zeros(&mut self, len: u64) {
        // Reused chunks hold stale bytes: write the zeros.
        const ZEROS: [u8; 4096] = [0; 4096];
        let mut left = len;
        while left > 0 {
            let n = left.min(ZEROS.len() as u64);
            self.append(&ZEROS[..n as usize]);
            left -= n;
        }
    }

    /// Copies `[pos, pos + out.len())` into `out`; bytes at or past `end` read as zero
    /// (the padding of a flush's last block). Panics if `pos < base`: callers check.
    pub fn copy_to(&self, pos: u64, out: &mut [u8]) {
        assert!(pos >= self.base, "tail read at {pos} below base {}", self.base);
        let mut done = 0usize;
        while done < out.len() {
            let at = pos + done as u64;
            if at >= self.end {
                out[done..].fill(0);
                return;
            }
            let rel = (at - self.base) as usize;
            let chunk = &self.chunks[rel / self.chunk_bytes];
            let within = rel % self.chunk_bytes;
            let avail = (self.chunk_bytes - within).min((self.end - at) as usize);
            let n = avail.min(out.len() - done);
            out[done..done + n].copy_from_slice(&chunk[within..within + n]);
            done += n;
        }
    }

    pub fn read(&self, pos: u64, len: usize) -> Vec<u8> {
        let mut out = vec![0; len];
        self.copy_to(pos, &mut out);
        out
    }

    /// Drops whole chunks that lie entirely below `keep_from`.
    pub fn trim_before(&mut self, keep_from: u64) {
        while self.chunks.len() > 1 && self.base + self.chunk_bytes as u64 <= keep_from.min(self.end) {
            if let Some(chunk) = self.chunks.pop_front() {
                if self.spare.len() < SPARE_CHUNKS_MAX {
                    self.spare.push(chunk);
                }
            }
            self.base += self.chunk_bytes as u64;
        }
    }

    /// Forgets everything and restarts empty at `base` (after recovery truncation).
    pub fn reset(&mut self, base: u64) {
        assert!(base % 4096 == 0, "tail base {base} not block-aligned");
        self.chunks.clear();
        self.base = base;
        self.end = base;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(appends: &[usize], trim_to: u64, read: (u64, usize)) {
        let mut tail = TailBuffer::new(8192, 4096);
        let mut model = Vec::new();
        for (i, &n) in appends.iter().enumerate() {
            let bytes: Vec<u8> = (0..n).map(|j| (i * 31 + j) as u8).collect();
            tail.append(&bytes);
            model.extend_from_slice(&bytes);
        }
        tail.trim_before(trim_to);
        assert!(tail.base() <= trim_to.max(8192));
        let (pos, len) = read;
        let got = tail.read(pos, len);
        let mut want = vec![0u8; len];
        for (k, b) in want.iter_mut().enumerate() {
            let at = (pos - 8192) as usize + k;
            *b = model.get(at).copied().unwrap_or(0);
        }
        assert_eq!(got, want, "appends {appends:?} trim {trim_to} read {read:?}");
    }

    #[test]
    fn in_place_appends_fill_within_one_chunk() {
        let mut tail = TailBuffer::new(0, 4096);
        assert!(tail.append_in_place(4000, |b| b.fill(1)));
        assert!(!tail.append_in_place(97, |_| unreachable!("straddles chunks")));
        assert!(tail.append_in_place(96, |b| b.fill(2)));
        assert!(tail.append_in_place(10, |b| b.fill(3)));
        assert_eq!(tail.end(), 4106);
        assert_eq!(tail.read(3998, 100), [vec![1u8; 2], vec![2; 96], vec![3; 2]].concat());
        assert!(!tail.append_in_place(5000, |_| unreachable!("larger than a chunk")));
    }

    #[test]
    fn reads_match_appends() {
        check(&[10], 8192, (8192, 10));
        check(&[4096, 1], 8192, (8192 + 4090, 10));
        check(&[5000, 5000, 5000], 8192 + 9000, (8192 + 8192, 100));
        check(&[100], 8192, (8192 + 90, 20)); // past end reads zero
        check(&[3, 4093, 4096, 1], 8192 + 4096, (8192 + 4096, 4097));
        check(&[20000], 8192 + 100_000, (8192 + 16384, 3616)); // trim never drops the last chunk
    }
}
