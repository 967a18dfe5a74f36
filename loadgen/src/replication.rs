//! Replication lag under load: a sampler thread that reads GET_BROKER_RUNTIME_INFO from
//! a master and its slave every `LAG_SAMPLE_INTERVAL_MS` while a workload runs, and the
//! lag it saw in bytes, messages and milliseconds.
//!
//! - bytes: the master's `haSlaveBehindBytes` (its log no slave confirmed, summed over
//!   shards);
//! - messages: the master's `storeMessagesTotal` minus the slave's (the sum of queue max
//!   offsets on each; the two reads are a fraction of a millisecond apart, so this is
//!   exact to the messages stored in between);
//! - ms: the slave's `haBehindMs` (the age of the newest record it holds while its master
//!   has more; max over shards; master and slave share this host's clock here).
//!
//! Invariant: samples are bounded (`LAG_SAMPLES_MAX`); a sample whose reads failed is
//! counted as failed, never as zero lag.

use bytes::BytesMut;
use ringmq_client::remoting::codes::request_code as rq;
use ringmq_client::remoting::command::RemotingCommand;
use ringmq_client::remoting::frame::FrameLimits;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub const LAG_SAMPLE_INTERVAL_MS: u64 = 100;
/// One hour of samples at the interval above.
pub const LAG_SAMPLES_MAX: usize = 36_000;
const CALL_TIMEOUT_MS: u64 = 2_000;

/// GET_BROKER_RUNTIME_INFO of the broker at `addr`, as its string table.
pub fn runtime_info(addr: &str) -> Result<BTreeMap<String, String>, String> {
    runtime_info_as(addr, None, None)
}

/// `runtime_info`, signed with `credentials` for a broker that checks an ACL, and over
/// TLS when `tls` is given (a `--tls` embedded broker accepts nothing else).
pub fn runtime_info_as(
    addr: &str,
    credentials: Option<&ringmq_client::remoting::acl::Credentials>,
    tls: Option<&std::sync::Arc<ringmq_client::net::tls::rustls::ClientConfig>>,
) -> Result<BTreeMap<String, String>, String> {
    let s = TcpStream::connect(addr).map_err(|e| format!("{addr}: {e}"))?;
    s.set_read_timeout(Some(Duration::from_millis(CALL_TIMEOUT_MS))).map_err(|e| e.to_string())?;
    s.set_write_timeout(Some(Duration::from_millis(CALL_TIMEOUT_MS))).map_err(|e| e.to_string())?;
    match tls {
        None => runtime_info_over(addr, s, credentials),
        Some(config) => {
            use ringmq_client::net::tls::rustls;
            let name = ringmq_client::net::tls::server_name_of(addr).map_err(|e| e.to_string())?;
            let session = rustls::ClientConnection::new(config.clone(), name).map_err(|e| format!("{addr}: {e}"))?;
            runtime_info_over(addr, rustls::StreamOwned::new(session, s), credentials)
        }
    }
}

fn runtime_info_over<S: Read + Write>(addr: &str, mut s: S, credentials: Option<&ringmq_client::remoting::acl::Credentials>) -> Result<BTreeMap<String, String>, String> {
    let mut out = BytesMut::new();
    let mut request = RemotingCommand::request(rq::GET_BROKER_RUNTIME_INFO).with_opaque(1);
    if let Some(c) = credentials {
        ringmq_client::remoting::acl::sign(&mut request, c);
    }
    request.encode(&mut out).map_err(|e| e.to_string())?;
    s.write_all(&out).map_err(|e| e.to_string())?;
    s.flush().map_err(|e| e.to_string())?;
    let mut buf = BytesMut::new();
    let mut chunk = [0u8; 16 * 1024];
    let response = loop {
        if let Some(cmd) = RemotingCommand::decode(&mut buf, &FrameLimits::default()).map_err(|e| e.to_string())? {
            break cmd;
        }
        let n = s.read(&mut chunk).map_err(|e| format!("{addr}: {e}"))?;
        if n == 0 {
            return Err(format!("{addr}: closed"));
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let v: serde_json::Value = serde_json::from_slice(&response.body).map_err(|e| format!("{addr}: runtime info body: {e}"))?;
    let table = v["table"].as_object().ok_or_else(|| format!("{addr}: no table in the runtime info"))?;
    Ok(table.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string())).collect())
}

fn num(t: &BTreeMap<String, String>, key: &str) -> Option<u64> {
    t.get(key).and_then(|v| v.parse().ok())
}

#[derive(Debug, Clone, Copy, Default)]
struct Sample {
    bytes: u64,
    messages: u64,
    ms: u64,
}

/// Percentiles of one lag measure.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Spread {
    pub p50: u64,
    pub p99: u64,
    pub max: u64,
}

fn spread(mut v: Vec<u64>) -> Spread {
    if v.is_empty() {
        return Spread::default();
    }
    v.sort_unstable();
    let at = |p: f64| v[((v.len() as f64 * p) as usize).min(v.len() - 1)];
    Spread { p50: at(0.5), p99: at(0.99), max: *v.last().expect("not empty") }
}

#[derive(Debug, Clone, Default)]
pub struct LagStats {
    pub samples: usize,
    pub failed: usize,
    pub bytes: Spread,
    pub messages: Spread,
    pub ms: Spread,
}

impl LagStats {
    pub fn describe(&self) -> String {
        format!(
            "lag bytes p50/p99/max {}/{}/{}; messages {}/{}/{}; ms {}/{}/{} ({} samples every {LAG_SAMPLE_INTERVAL_MS} ms, {} failed)",
            self.bytes.p50, self.bytes.p99, self.bytes.max, self.messages.p50, self.messages.p99, self.messages.max, self.ms.p50, self.ms.p99, self.ms.max, self.samples, self.failed
        )
    }
}

/// Samples lag until `finish`.
pub struct LagSampler {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<(Vec<Sample>, usize)>,
}

impl LagSampler {
    pub fn start(master: String, slave: String) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let (mut samples, mut failed) = (Vec::new(), 0usize);
            while !flag.load(Ordering::SeqCst) && samples.len() < LAG_SAMPLES_MAX {
                match (runtime_info(&master), runtime_info(&slave)) {
                    (Ok(m), Ok(s)) => match (num(&m, "haSlaveBehindBytes"), num(&m, "storeMessagesTotal"), num(&s, "storeMessagesTotal"), num(&s, "haBehindMs")) {
                        (Some(bytes), Some(mm), Some(sm), Some(ms)) => samples.push(Sample { bytes, messages: mm.saturating_sub(sm), ms }),
                        _ => failed += 1,
                    },
                    _ => failed += 1,
                }
                std::thread::sleep(Duration::from_millis(LAG_SAMPLE_INTERVAL_MS));
            }
            (samples, failed)
        });
        Self { stop, thread }
    }

    pub fn finish(self) -> LagStats {
        self.stop.store(true, Ordering::SeqCst);
        let (samples, failed) = self.thread.join().unwrap_or_default();
        LagStats {
            samples: samples.len(),
            failed,
            bytes: spread(samples.iter().map(|s| s.bytes).collect()),
            messages: spread(samples.iter().map(|s| s.messages).collect()),
            ms: spread(samples.iter().map(|s| s.ms).collect()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_picks_percentiles_of_the_samples() {
        // check(samples, expected)
        let check = |v: Vec<u64>, want: Spread| assert_eq!(spread(v), want);
        check(vec![], Spread::default());
        check(vec![7], Spread { p50: 7, p99: 7, max: 7 });
        check((1..=100).collect(), Spread { p50: 51, p99: 100, max: 100 });
        check(vec![5, 1, 9, 3], Spread { p50: 5, p99: 9, max: 9 });
    }
}
