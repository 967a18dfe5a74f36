//! Telling TLS from plain remoting on one port (`tls.server.mode=permissive`, as
//! Apache's `TlsModeHandler`): a TLS connection opens with a handshake record, type
//! 0x16; a remoting frame opens with the high byte of its big-endian length, which is
//! 0x00 for every frame under 16 MiB (the protocol's bound) — so one byte decides.
//! The byte read to decide is handed back to whoever reads next by `PrefixedStream`.
//!
//! Invariant: `PrefixedStream` yields exactly the bytes of the stream, the prefix
//! first, whatever the size of the reads; writes go straight through.

use futures_lite::{AsyncRead, AsyncReadExt, AsyncWrite};
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

/// The content type of a TLS handshake record: every TLS connection's first byte.
pub const TLS_HANDSHAKE_RECORD: u8 = 0x16;

/// What a connection's first byte says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FirstByte {
    Tls,
    Plain,
    /// The peer closed before sending anything.
    Closed,
}

pub fn classify_first_byte(first: Option<u8>) -> FirstByte {
    match first {
        Some(TLS_HANDSHAKE_RECORD) => FirstByte::Tls,
        Some(_) => FirstByte::Plain,
        None => FirstByte::Closed,
    }
}

/// The stream's first byte; `None` at end of stream.
pub async fn read_first_byte<S: AsyncRead + Unpin>(stream: &mut S) -> io::Result<Option<u8>> {
    let mut one = [0u8; 1];
    loop {
        match stream.read(&mut one).await {
            Ok(0) => return Ok(None),
            Ok(_) => return Ok(Some(one[0])),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
}

/// A stream with one byte already read from it put back in front.
#[derive(Debug)]
pub struct PrefixedStream<S> {
    prefix: Option<u8>,
    inner: S,
}

impl<S> PrefixedStream<S> {
    pub fn new(prefix: Option<u8>, inner: S) -> Self {
        Self { prefix, inner }
    }

    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for PrefixedStream<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        if buf.is_empty() {
            return Poll::Ready(Ok(0));
        }
        if let Some(byte) = self.prefix.take() {
            buf[0] = byte;
            // Whatever else is ready comes with it; nothing is waited for.
            return match Pin::new(&mut self.inner).poll_read(cx, &mut buf[1..]) {
                Poll::Ready(Ok(n)) => Poll::Ready(Ok(1 + n)),
                Poll::Ready(Err(_)) | Poll::Pending => Poll::Ready(Ok(1)),
            };
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for PrefixedStream<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(mut self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[io::IoSlice<'_>]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_close(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_close(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_lite::future::block_on;

    /// A reader that hands out its bytes in the given pieces (an empty piece is a
    /// `Pending` once, as a socket with nothing ready yet).
    struct Pieces {
        pieces: std::collections::VecDeque<Vec<u8>>,
    }

    impl AsyncRead for Pieces {
        fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
            let Some(mut piece) = self.pieces.pop_front() else { return Poll::Ready(Ok(0)) };
            if piece.is_empty() {
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            let n = piece.len().min(buf.len());
            buf[..n].copy_from_slice(&piece[..n]);
            if n < piece.len() {
                self.pieces.push_front(piece.split_off(n));
            }
            Poll::Ready(Ok(n))
        }
    }

    fn pieces(input: &[&[u8]]) -> Pieces {
        Pieces { pieces: input.iter().map(|p| p.to_vec()).collect() }
    }

    /// `input` arrives in these pieces; the first byte is read and classified
    /// (`expected.0`), then the rest is read back through a `PrefixedStream` in reads of
    /// `read_bytes` and must be the whole input (`expected.1`).
    fn check(input: &[&[u8]], read_bytes: usize, expected: (FirstByte, &[u8])) {
        let (kind, bytes) = block_on(async {
            let mut stream = pieces(input);
            let first = read_first_byte(&mut stream).await.expect("read");
            let mut replay = PrefixedStream::new(first, stream);
            let mut out = Vec::new();
            let mut chunk = vec![0u8; read_bytes];
            loop {
                let n = replay.read(&mut chunk).await.expect("read");
                if n == 0 {
                    break;
                }
                out.extend_from_slice(&chunk[..n]);
            }
            (classify_first_byte(first), out)
        });
        assert_eq!(kind, expected.0, "{input:?}");
        assert_eq!(bytes, expected.1, "{input:?} read {read_bytes} at a time");
    }

    #[test]
    fn the_first_byte_decides_and_is_replayed() {
        let hello: &[u8] = &[0x16, 0x03, 0x01, 0x00, 0x05, 1, 2, 3, 4, 5];
        let frame: &[u8] = &[0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00];
        for read_bytes in [1, 2, 3, 64] {
            check(&[hello], read_bytes, (FirstByte::Tls, hello));
            check(&[&hello[..1], &hello[1..]], read_bytes, (FirstByte::Tls, hello));
            check(&[&hello[..1], &[], &hello[1..4], &[], &hello[4..]], read_bytes, (FirstByte::Tls, hello));
            check(&[frame], read_bytes, (FirstByte::Plain, frame));
            check(&[&frame[..3], &frame[3..]], read_bytes, (FirstByte::Plain, frame));
            check(&[b"G"], read_bytes, (FirstByte::Plain, b"G"));
            check(&[], read_bytes, (FirstByte::Closed, b""));
        }
        // A frame of 16 MiB or more cannot be a remoting frame, so 0x16 is never one.
        assert_eq!(classify_first_byte(Some(0x15)), FirstByte::Plain);
        assert_eq!(classify_first_byte(Some(0x17)), FirstByte::Plain);
        assert!(0x16u32 << 24 > ringmq_frame_max(), "a plain frame never starts with 0x16");
    }

    fn ringmq_frame_max() -> u32 {
        crate::remoting::frame::FRAME_LEN_MAX_BYTES as u32
    }
}
