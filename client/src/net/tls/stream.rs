//! The one stream type a TLS-capable side hands on: plain, or TLS (client or server
//! end) over the same underlying stream, so the code above (the broker's `net::conn`,
//! the NameServer's connection loop, replication, the client's connection) is written
//! once over `AsyncRead + AsyncWrite`.
//!
//! Invariant: a flush pushes out every byte rustls holds encrypted but unsent; callers
//! flush after a write they wait on the answer to (a plain socket's flush does nothing).
//!
//! Under a TLS session the socket is read through `ReadBuffered`: rustls asks for at most
//! 4 KiB per `read_tls`, which on a plain socket is one read (one io_uring round trip)
//! per 4 KiB of ciphertext; `ReadBuffered` reads up to `TLS_READ_BUFFER_BYTES` at a time
//! and hands rustls its 4 KiB from memory. Writes pass straight through (vectored ones
//! too: rustls writes its queued records with one vectored write).

use futures_lite::{AsyncRead, AsyncWrite};
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

/// Most ciphertext bytes read from the socket at a time under a TLS session: two
/// records of the largest size (16 KiB of plaintext each, plus their framing).
pub const TLS_READ_BUFFER_BYTES: usize = 32 * 1024 + 1024;

pub enum MaybeTls<S> {
    Plain(S),
    /// Boxed: a session's state is a few KiB; a plain connection does not carry it.
    Tls(Box<futures_rustls::TlsStream<ReadBuffered<S>>>),
}

/// A stream whose reads are served from a buffer filled `TLS_READ_BUFFER_BYTES` at a
/// time (allocated at the first read); writes go straight to the stream.
///
/// Invariant: the bytes read through it are exactly the stream's, in order; `start <=
/// end <= buf.len()`.
pub struct ReadBuffered<S> {
    inner: S,
    buf: Vec<u8>,
    start: usize,
    end: usize,
}

impl<S> ReadBuffered<S> {
    pub fn new(inner: S) -> Self {
        Self { inner, buf: Vec::new(), start: 0, end: 0 }
    }

    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for ReadBuffered<S> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, out: &mut [u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.start == this.end {
            // A read as large as the buffer gains nothing from it.
            if out.len() >= TLS_READ_BUFFER_BYTES {
                return Pin::new(&mut this.inner).poll_read(cx, out);
            }
            if this.buf.is_empty() {
                this.buf = vec![0u8; TLS_READ_BUFFER_BYTES];
            }
            let n = match Pin::new(&mut this.inner).poll_read(cx, &mut this.buf) {
                Poll::Ready(Ok(n)) => n,
                other => return other,
            };
            assert!(n <= this.buf.len(), "a read returned more than it was given");
            this.start = 0;
            this.end = n;
            if n == 0 {
                return Poll::Ready(Ok(0));
            }
        }
        let n = out.len().min(this.end - this.start);
        out[..n].copy_from_slice(&this.buf[this.start..this.start + n]);
        this.start += n;
        Poll::Ready(Ok(n))
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for ReadBuffered<S> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[io::IoSlice<'_>]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_close(cx)
    }
}

impl<S> MaybeTls<S> {
    pub fn is_tls(&self) -> bool {
        matches!(self, MaybeTls::Tls(_))
    }

    /// The certificates the peer showed (TLS, once the handshake is done).
    pub fn peer_certificates(&self) -> Option<Vec<rustls::pki_types::CertificateDer<'static>>> {
        match self {
            MaybeTls::Plain(_) => None,
            MaybeTls::Tls(t) => t.get_ref().1.peer_certificates().map(|c| c.iter().map(|c| c.clone().into_owned()).collect()),
        }
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for MaybeTls<S> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            MaybeTls::Plain(s) => Pin::new(s).poll_read(cx, buf),
            MaybeTls::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for MaybeTls<S> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            MaybeTls::Plain(s) => Pin::new(s).poll_write(cx, buf),
            MaybeTls::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[io::IoSlice<'_>]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            MaybeTls::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            MaybeTls::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            MaybeTls::Plain(s) => Pin::new(s).poll_flush(cx),
            MaybeTls::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            MaybeTls::Plain(s) => Pin::new(s).poll_close(cx),
            MaybeTls::Tls(s) => Pin::new(s.as_mut()).poll_close(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_lite::io::{AsyncReadExt, Cursor};

    /// Reading `len` bytes through `ReadBuffered` with reads of `sizes` (cycled) gives the
    /// stream's bytes exactly, then end of stream.
    fn check(len: usize, sizes: &[usize]) {
        let data: Vec<u8> = (0..len).map(|i| (i * 7 + i / 251) as u8).collect();
        let mut r = ReadBuffered::new(Cursor::new(data.clone()));
        let mut got = Vec::new();
        futures_lite::future::block_on(async {
            for size in sizes.iter().cycle() {
                let mut out = vec![0u8; *size];
                let n = r.read(&mut out).await.expect("a cursor reads");
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&out[..n]);
            }
        });
        assert_eq!(got.len(), data.len(), "len {len}, sizes {sizes:?}");
        assert!(got == data, "len {len}, sizes {sizes:?}: bytes differ");
    }

    #[test]
    fn reads_through_the_buffer_are_the_streams_bytes() {
        for len in [0, 1, 4096, TLS_READ_BUFFER_BYTES - 1, TLS_READ_BUFFER_BYTES, TLS_READ_BUFFER_BYTES + 1, 200_000] {
            for sizes in [&[1][..], &[4096], &[5000, 1, 17], &[TLS_READ_BUFFER_BYTES], &[70_000, 3], &[4096, TLS_READ_BUFFER_BYTES * 2]] {
                check(len, sizes);
            }
        }
    }

    /// A writer that records its vectored writes (to see that they reach it whole).
    #[derive(Default)]
    struct Recorder {
        data: Vec<u8>,
        vectored_calls: usize,
    }

    impl AsyncRead for Recorder {
        fn poll_read(self: Pin<&mut Self>, _: &mut Context<'_>, _: &mut [u8]) -> Poll<io::Result<usize>> {
            Poll::Ready(Ok(0))
        }
    }

    impl AsyncWrite for Recorder {
        fn poll_write(self: Pin<&mut Self>, _: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
            self.get_mut().data.extend_from_slice(buf);
            Poll::Ready(Ok(buf.len()))
        }
        fn poll_write_vectored(self: Pin<&mut Self>, _: &mut Context<'_>, bufs: &[io::IoSlice<'_>]) -> Poll<io::Result<usize>> {
            let this = self.get_mut();
            this.vectored_calls += 1;
            let mut n = 0;
            for b in bufs {
                this.data.extend_from_slice(b);
                n += b.len();
            }
            Poll::Ready(Ok(n))
        }
        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
        fn poll_close(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    #[test]
    fn writes_pass_straight_through() {
        let mut w = ReadBuffered::new(Recorder::default());
        futures_lite::future::block_on(async {
            use futures_lite::io::AsyncWriteExt;
            w.write_all(b"abc").await.expect("write");
            let n = w.write_vectored(&[io::IoSlice::new(b"de"), io::IoSlice::new(b"f")]).await.expect("vectored write");
            assert_eq!(n, 3, "a vectored write reaches the stream whole");
            w.flush().await.expect("flush");
        });
        assert_eq!(w.get_ref().data.as_slice(), b"abcdef");
        assert_eq!(w.get_ref().vectored_calls, 1);
    }
}
