//! A bounds-checked big-endian reader over a byte slice, shared by the binary decoders
//! (ROCKETMQ header, batch body).
//!
//! Invariant: no method panics or reads past the slice; a short read returns `None`
//! and leaves the position unchanged, so callers can report what was missing.

pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    pub(crate) fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub(crate) fn position(&self) -> usize {
        self.pos
    }

    pub(crate) fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let out = self.buf.get(self.pos..end)?;
        self.pos = end;
        Some(out)
    }

    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.take(N).and_then(|s| s.try_into().ok())
    }

    pub(crate) fn i8(&mut self) -> Option<i8> {
        self.array::<1>().map(i8::from_be_bytes)
    }

    pub(crate) fn i16(&mut self) -> Option<i16> {
        self.array::<2>().map(i16::from_be_bytes)
    }

    pub(crate) fn i32(&mut self) -> Option<i32> {
        self.array::<4>().map(i32::from_be_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_reads_leave_position() {
        let mut r = Reader::new(&[0, 1, 0, 0, 0]);
        assert_eq!(r.i16(), Some(1));
        assert_eq!(r.i32(), None);
        assert_eq!(r.position(), 2);
        assert_eq!(r.remaining(), 3);
        assert_eq!(r.i8(), Some(0));
        assert_eq!(r.take(usize::MAX), None);
        assert_eq!(r.take(2), Some(&[0u8, 0][..]));
        assert_eq!(r.remaining(), 0);
    }
}
