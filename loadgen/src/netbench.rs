//! The host's network limit on loopback, measured in the same run as the workloads it
//! bounds: TCP throughput (one sender writing `CHUNK_BYTES` chunks, one reader) and
//! round-trip time (1-byte ping-pong). Fractions of these are quoted next to broker
//! results, as fio's figures are for the disk.
//!
//! Invariant: every socket has read and write timeouts, so a stuck peer ends the test
//! with an error instead of hanging the run.

use serde::Serialize;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

pub const CHUNK_BYTES: usize = 1024 * 1024;
pub const SOCKET_TIMEOUT_MS: u64 = 5_000;

#[derive(Debug, Clone, Serialize)]
pub struct NetLimits {
    pub loopback_mib_per_sec: f64,
    pub loopback_rtt_us_p50: f64,
    pub loopback_rtt_us_p99: f64,
}

fn pair() -> Result<(TcpStream, TcpStream), String> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("bind: {e}"))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let client = TcpStream::connect(addr).map_err(|e| format!("connect: {e}"))?;
    let (server, _) = listener.accept().map_err(|e| format!("accept: {e}"))?;
    for s in [&client, &server] {
        s.set_read_timeout(Some(Duration::from_millis(SOCKET_TIMEOUT_MS))).map_err(|e| e.to_string())?;
        s.set_write_timeout(Some(Duration::from_millis(SOCKET_TIMEOUT_MS))).map_err(|e| e.to_string())?;
        s.set_nodelay(true).map_err(|e| e.to_string())?;
    }
    Ok((client, server))
}

/// Bytes per second through one loopback TCP connection for `secs`.
pub fn throughput_mib_per_sec(secs: f64) -> Result<f64, String> {
    let (mut tx, mut rx) = pair()?;
    let reader = std::thread::spawn(move || -> Result<u64, String> {
        let mut buf = vec![0u8; CHUNK_BYTES];
        let mut total = 0u64;
        loop {
            match rx.read(&mut buf) {
                Ok(0) => return Ok(total),
                Ok(n) => total += n as u64,
                Err(e) => return Err(format!("read: {e}")),
            }
        }
    });
    let chunk = vec![0x5Au8; CHUNK_BYTES];
    let started = Instant::now();
    let mut sent = 0u64;
    while started.elapsed().as_secs_f64() < secs {
        tx.write_all(&chunk).map_err(|e| format!("write: {e}"))?;
        sent += CHUNK_BYTES as u64;
    }
    drop(tx);
    let received = reader.join().map_err(|_| "reader panicked".to_string())??;
    let elapsed = started.elapsed().as_secs_f64();
    if received != sent {
        return Err(format!("loopback lost bytes: sent {sent}, received {received}"));
    }
    Ok(received as f64 / elapsed / (1024.0 * 1024.0))
}

/// Round trips of one byte; returns (p50, p99) in µs.
pub fn rtt_us(round_trips: usize) -> Result<(f64, f64), String> {
    let (mut a, mut b) = pair()?;
    let echo = std::thread::spawn(move || -> Result<(), String> {
        let mut byte = [0u8; 1];
        loop {
            match b.read(&mut byte) {
                Ok(0) => return Ok(()),
                Ok(_) => b.write_all(&byte).map_err(|e| format!("echo write: {e}"))?,
                Err(e) => return Err(format!("echo read: {e}")),
            }
        }
    });
    let mut samples = Vec::with_capacity(round_trips);
    let mut byte = [7u8; 1];
    for _ in 0..round_trips {
        let t = Instant::now();
        a.write_all(&byte).map_err(|e| format!("write: {e}"))?;
        a.read_exact(&mut byte).map_err(|e| format!("read: {e}"))?;
        samples.push(t.elapsed().as_secs_f64() * 1e6);
    }
    drop(a);
    echo.join().map_err(|_| "echo panicked".to_string())??;
    samples.sort_by(|x, y| x.total_cmp(y));
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
    Ok((at(0.5), at(0.99)))
}

pub fn measure(secs: f64) -> Result<NetLimits, String> {
    let loopback_mib_per_sec = throughput_mib_per_sec(secs)?;
    let (p50, p99) = rtt_us(20_000)?;
    Ok(NetLimits { loopback_mib_per_sec, loopback_rtt_us_p50: p50, loopback_rtt_us_p99: p99 })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_figures_are_sane() {
        let mib = throughput_mib_per_sec(0.2).expect("throughput");
        assert!(mib > 10.0, "{mib} MiB/s");
        let (p50, p99) = rtt_us(200).expect("rtt");
        assert!(p50 > 0.0 && p99 >= p50 && p99 < 1_000_000.0, "{p50} {p99}");
    }
}
