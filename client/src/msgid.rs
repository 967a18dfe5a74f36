//! Message ids in RocketMQ's `MessageClientIDSetter` layout (the `UNIQ_KEY` property):
//! 32 hex digits for IPv4 = ip (4 bytes) · pid (2 bytes, low half) · a per-process
//! random word standing in for Java's class-loader hash (4 bytes) · milliseconds since
//! the start of the current month (4 bytes) · a counter (2 bytes), big-endian, upper
//! case. Tools that decode ids (`mqadmin queryMsgById`, dashboards) read the ip and time
//! back out of it.
//!
//! Invariant: ids from one generator are unique as long as fewer than 65 536 are made
//! within one millisecond-tick window of the counter wrapping — the same bound as Java.

use std::cell::Cell;
use std::net::{IpAddr, SocketAddr};
use std::time::{SystemTime, UNIX_EPOCH};

pub const UNIQ_ID_LEN_V4: usize = 32;

pub struct MsgIdGenerator {
    /// Hex of ip · pid · random.
    prefix: String,
    month_start_ms: Cell<i64>,
    next_month_start_ms: Cell<i64>,
    counter: Cell<u16>,
}

fn hex_upper(bytes: &[u8], out: &mut String) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for b in bytes {
        out.push(HEX[(b >> 4) as usize] as char);
        out.push(HEX[(b & 0xF) as usize] as char);
    }
}

/// Milliseconds of the first instant of the UTC month containing `now_ms`, and of the next.
pub fn month_bounds_ms(now_ms: i64) -> (i64, i64) {
    let days = now_ms.div_euclid(86_400_000);
    let (y, m, _) = civil_from_days(days);
    let start = days_from_civil(y, m, 1) * 86_400_000;
    let (ny, nm) = if m == 12 { (y + 1, 1) } else { (y, m + 1) };
    (start, days_from_civil(ny, nm, 1) * 86_400_000)
}

// Howard Hinnant's civil-calendar algorithms (public domain).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m as i64 + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// `ms` since the epoch as `yyyy-MM-dd HH:mm:ss` in UTC (mqadmin prints the host's
/// zone; RingMQ's tools read and print UTC so two hosts agree).
pub fn utc_date_time(ms: i64) -> String {
    let (days, in_day_s) = (ms.div_euclid(86_400_000), ms.rem_euclid(86_400_000) / 1000);
    let (y, m, d) = civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}", in_day_s / 3600, in_day_s / 60 % 60, in_day_s % 60)
}

pub fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

impl MsgIdGenerator {
    pub fn new(ip: IpAddr, pid: u32, random: u32) -> Self {
        let mut prefix = String::with_capacity(UNIQ_ID_LEN_V4);
        match ip {
            IpAddr::V4(v4) => hex_upper(&v4.octets(), &mut prefix),
            IpAddr::V6(v6) => hex_upper(&v6.octets(), &mut prefix),
        }
        hex_upper(&(pid as u16).to_be_bytes(), &mut prefix);
        hex_upper(&random.to_be_bytes(), &mut prefix);
        Self { prefix, month_start_ms: Cell::new(0), next_month_start_ms: Cell::new(0), counter: Cell::new(0) }
    }

    /// The next id at wall time `now_ms`.
    pub fn next_at(&self, now_ms: i64) -> String {
        if now_ms >= self.next_month_start_ms.get() || now_ms < self.month_start_ms.get() {
            let (start, next) = month_bounds_ms(now_ms);
            self.month_start_ms.set(start);
            self.next_month_start_ms.set(next);
        }
        let since_month_ms = (now_ms - self.month_start_ms.get()) as i32;
        let counter = self.counter.get();
        self.counter.set(counter.wrapping_add(1));
        let mut id = String::with_capacity(self.prefix.len() + 12);
        id.push_str(&self.prefix);
        hex_upper(&since_month_ms.to_be_bytes(), &mut id);
        hex_upper(&counter.to_be_bytes(), &mut id);
        id
    }

    pub fn next(&self) -> String {
        self.next_at(now_ms())
    }
}

/// The ip and the born time (ms) read back from an IPv4 id made at a time within the
/// same month as `reference_ms`.
pub fn decode_v4(id: &str, reference_ms: i64) -> Option<(std::net::Ipv4Addr, i64)> {
    if id.len() != UNIQ_ID_LEN_V4 || !id.is_ascii() {
        return None;
    }
    let byte = |i: usize| u8::from_str_radix(&id[i * 2..i * 2 + 2], 16).ok();
    let ip = std::net::Ipv4Addr::new(byte(0)?, byte(1)?, byte(2)?, byte(3)?);
    let t = i32::from_be_bytes([byte(10)?, byte(11)?, byte(12)?, byte(13)?]);
    let (start, _) = month_bounds_ms(reference_ms);
    Some((ip, start + t as i64))
}

/// RocketMQ's offsetMsgId: uppercase hex of store IP (4 or 16 bytes), port (i32) and
/// physical offset (i64).
pub fn offset_msg_id(store_host: &SocketAddr, phys_offset: u64) -> String {
    OffsetMsgId(*store_host, phys_offset).to_string()
}

/// `offset_msg_id` as a `Display`: formats into whatever it is written to (the broker
/// writes it into a response header's buffer, no `String` per send).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffsetMsgId(pub SocketAddr, pub u64);

impl std::fmt::Display for OffsetMsgId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        const HEX: &[u8; 16] = b"0123456789ABCDEF";
        // IPv6 (16) + port (4) + offset (8).
        let mut bytes = [0u8; 28];
        let ip_len = match self.0.ip() {
            IpAddr::V4(ip) => {
                bytes[..4].copy_from_slice(&ip.octets());
                4
            }
            IpAddr::V6(ip) => {
                bytes[..16].copy_from_slice(&ip.octets());
                16
            }
        };
        bytes[ip_len..ip_len + 4].copy_from_slice(&(self.0.port() as i32).to_be_bytes());
        bytes[ip_len + 4..ip_len + 12].copy_from_slice(&self.1.to_be_bytes());
        let n = ip_len + 12;
        let mut hex = [0u8; 56];
        for (i, b) in bytes[..n].iter().enumerate() {
            hex[2 * i] = HEX[(b >> 4) as usize];
            hex[2 * i + 1] = HEX[(b & 0xF) as usize];
        }
        f.write_str(std::str::from_utf8(&hex[..2 * n]).map_err(|_| std::fmt::Error)?)
    }
}

/// Decodes an offsetMsgId into (store host, physical offset).
pub fn decode_offset_msg_id(id: &str) -> Option<(SocketAddr, u64)> {
    if !id.is_ascii() || (id.len() != 32 && id.len() != 56) {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..id.len()).step_by(2).map(|i| u8::from_str_radix(&id[i..i + 2], 16).ok()).collect();
    let bytes = bytes?;
    let ip_len = bytes.len() - 12;
    let ip: IpAddr = if ip_len == 4 {
        IpAddr::from([bytes[0], bytes[1], bytes[2], bytes[3]])
    } else {
        let mut o = [0u8; 16];
        o.copy_from_slice(&bytes[..16]);
        IpAddr::from(o)
    };
    let port = i32::from_be_bytes(bytes[ip_len..ip_len + 4].try_into().ok()?) as u16;
    let phys = u64::from_be_bytes(bytes[ip_len + 4..].try_into().ok()?);
    Some((SocketAddr::new(ip, port), phys))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn check(now_ms: i64, expected_month_start_ms: i64) {
        assert_eq!(month_bounds_ms(now_ms).0, expected_month_start_ms, "now {now_ms}");
    }

    #[test]
    fn utc_date_times() {
        // check(ms, expected)
        let check = |ms: i64, expected: &str| assert_eq!(utc_date_time(ms), expected, "{ms}");
        check(0, "1970-01-01 00:00:00");
        check(1_625_883_640_000, "2021-07-10 02:20:40");
        check(1_709_251_199_999, "2024-02-29 23:59:59");
        check(-1, "1969-12-31 23:59:59");
    }

    #[test]
    fn month_start() {
        check(0, 0);
        check(86_400_000 * 31 - 1, 0); // 1970-01-31T23:59:59.999
        check(86_400_000 * 31, 86_400_000 * 31); // 1970-02-01
        check(1_709_251_200_000, 1_709_251_200_000); // 2024-03-01 (leap year)
        check(1_709_251_199_999, 1_706_745_600_000); // 2024-02-29T23:59:59.999 → 2024-02-01
        check(1_796_083_200_000 + 5, 1_796_083_200_000); // 2026-12-01
    }

    #[test]
    fn layout_matches_java() {
        let g = MsgIdGenerator::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)), 0x1_2345, 0xDEADBEEF);
        let t = 1_709_251_200_000 + 0x0102_0304;
        let a = g.next_at(t);
        let b = g.next_at(t);
        assert_eq!(a, "0A00000123 45DEADBEEF010203040000".replace(' ', ""));
        assert_eq!(b, "0A0000012345DEADBEEF010203040001");
        assert_eq!(decode_v4(&a, t), Some((Ipv4Addr::new(10, 0, 0, 1), t)));
        assert_eq!(decode_v4("zz", t), None);
    }

    #[test]
    fn ids_are_unique_within_a_window() {
        let g = MsgIdGenerator::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 1, 2);
        let ids: std::collections::HashSet<String> = (0..60_000).map(|_| g.next_at(1_800_000_000_000)).collect();
        assert_eq!(ids.len(), 60_000);
    }
}
