//! An in-memory duplex byte stream: the simulator's socket between a client and a
//! broker connection (`net::conn::serve` runs on it unchanged).
//!
//! Invariants: each direction buffers at most `capacity_bytes` (a writer waits for
//! room: a slow reader applies backpressure as TCP would); dropping an end is a close
//! (the peer reads EOF, its writes fail with BrokenPipe).

use futures_lite::{AsyncRead, AsyncWrite};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

#[derive(Default)]
struct OneWay {
    data: VecDeque<u8>,
    capacity_bytes: usize,
    writer_closed: bool,
    reader_gone: bool,
    read_waker: Option<Waker>,
    write_waker: Option<Waker>,
}

type Shared = Rc<RefCell<OneWay>>;

/// One end of a duplex pipe.
pub struct PipeEnd {
    incoming: Shared,
    outgoing: Shared,
}

/// Two connected ends, each direction holding at most `capacity_bytes`.
pub fn duplex(capacity_bytes: usize) -> (PipeEnd, PipeEnd) {
    assert!(capacity_bytes > 0);
    let a: Shared = Rc::new(RefCell::new(OneWay { capacity_bytes, ..Default::default() }));
    let b: Shared = Rc::new(RefCell::new(OneWay { capacity_bytes, ..Default::default() }));
    (PipeEnd { incoming: a.clone(), outgoing: b.clone() }, PipeEnd { incoming: b, outgoing: a })
}

fn wake(w: Option<Waker>) {
    if let Some(w) = w {
        w.wake();
    }
}

impl AsyncRead for PipeEnd {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        let mut s = self.incoming.borrow_mut();
        if s.data.is_empty() {
            if s.writer_closed {
                return Poll::Ready(Ok(0));
            }
            s.read_waker = Some(cx.waker().clone());
            return Poll::Pending;
        }
        let n = buf.len().min(s.data.len());
        for (dst, src) in buf.iter_mut().zip(s.data.drain(..n)) {
            *dst = src;
        }
        let w = s.write_waker.take();
        drop(s);
        wake(w);
        Poll::Ready(Ok(n))
    }
}

impl AsyncWrite for PipeEnd {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let mut s = self.outgoing.borrow_mut();
        if s.reader_gone || s.writer_closed {
            return Poll::Ready(Err(io::Error::from(io::ErrorKind::BrokenPipe)));
        }
        let room = s.capacity_bytes - s.data.len();
        if room == 0 {
            s.write_waker = Some(cx.waker().clone());
            return Poll::Pending;
        }
        let n = room.min(buf.len());
        s.data.extend(&buf[..n]);
        let w = s.read_waker.take();
        drop(s);
        wake(w);
        Poll::Ready(Ok(n))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_close(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let w = {
            let mut s = self.outgoing.borrow_mut();
            s.writer_closed = true;
            s.read_waker.take()
        };
        wake(w);
        Poll::Ready(Ok(()))
    }
}

impl Drop for PipeEnd {
    fn drop(&mut self) {
        let w1 = {
            let mut s = self.outgoing.borrow_mut();
            s.writer_closed = true;
            s.read_waker.take()
        };
        let w2 = {
            let mut s = self.incoming.borrow_mut();
            s.reader_gone = true;
            s.data.clear();
            s.write_waker.take()
        };
        wake(w1);
        wake(w2);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_lite::future::block_on;
    use futures_lite::{AsyncReadExt, AsyncWriteExt};

    #[test]
    fn bytes_flow_both_ways_and_a_drop_is_a_close() {
        let (mut a, mut b) = duplex(4);
        block_on(async {
            assert_eq!(a.write(b"hello").await.unwrap(), 4, "at most the capacity is buffered");
            let mut buf = [0u8; 8];
            assert_eq!(b.read(&mut buf).await.unwrap(), 4);
            assert_eq!(&buf[..4], b"hell");
            b.write_all(b"ok").await.unwrap();
            assert_eq!(a.read(&mut buf).await.unwrap(), 2);
        });
        drop(b);
        block_on(async {
            let mut buf = [0u8; 8];
            assert_eq!(a.read(&mut buf).await.unwrap(), 0);
            assert_eq!(a.write(b"x").await.unwrap_err().kind(), io::ErrorKind::BrokenPipe);
        });
    }
}
