//! Port reservations for a broker started with `listenPort = 0` (tests, `loadgen`'s
//! embedded broker): a run of free ports picked once and held until every shard has
//! bound its own listener on them.
//!
//! Why held: every shard binds its port with SO_REUSEPORT, and Linux lets any socket of
//! the same user with SO_REUSEPORT join a port. A port picked and released before the
//! shards bind can be picked again by another broker in the same window; both then
//! share one port, and the kernel spreads connections across two unrelated brokers.
//! A reservation is a socket bound with SO_REUSEPORT (never listening, so it takes no
//! connections): the shards can join it, while `bind(0)` elsewhere never hands the
//! port out (automatic port choice skips every port in use, SO_REUSEPORT or not).
//!
//! Invariant: a reservation is dropped only after every listener it covers is bound.

use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::net::{Ipv4Addr, SocketAddr};

/// Tries of a fresh first port before giving up on a run.
const RUN_TRIES_MAX: usize = 64;

/// `count` consecutive ports held for this process's own SO_REUSEPORT listeners.
#[derive(Debug)]
pub struct PortRun {
    pub first: u16,
    _held: Vec<Socket>,
}

fn reuseport_socket() -> std::io::Result<Socket> {
    let socket = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_port(true)?;
    Ok(socket)
}

/// True when nothing at all holds `port` (a plain bind, no SO_REUSEPORT, succeeds).
fn port_is_free(port: u16) -> bool {
    std::net::TcpListener::bind((Ipv4Addr::UNSPECIFIED, port)).is_ok()
}

/// Picks and holds `count` consecutive free ports.
pub fn reserve_run(count: usize) -> std::io::Result<PortRun> {
    assert!(count >= 1 && count <= u16::MAX as usize, "a run of 1..=65535 ports");
    for _ in 0..RUN_TRIES_MAX {
        let first_socket = reuseport_socket()?;
        first_socket.bind(&SockAddr::from(SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0))))?;
        let first = first_socket.local_addr()?.as_socket().map(|a| a.port()).unwrap_or(0);
        if first == 0 || first as usize + count > u16::MAX as usize + 1 {
            continue;
        }
        let mut held = vec![first_socket];
        for i in 1..count as u16 {
            let port = first + i;
            // An explicit bind with SO_REUSEPORT would join another process's
            // reservation: check with a plain bind first (it conflicts with anything).
            if !port_is_free(port) {
                break;
            }
            let socket = reuseport_socket()?;
            if socket.bind(&SockAddr::from(SocketAddr::from((Ipv4Addr::UNSPECIFIED, port)))).is_err() {
                break;
            }
            held.push(socket);
        }
        if held.len() == count {
            return Ok(PortRun { first, _held: held });
        }
    }
    Err(std::io::Error::new(std::io::ErrorKind::AddrInUse, format!("no run of {count} free ports")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_run_is_never_handed_out_again_and_our_listeners_can_join_it() {
        let run = reserve_run(3).expect("a run");
        for i in 0..3u16 {
            assert!(!port_is_free(run.first + i), "port {} is held", run.first + i);
        }
        // Automatic choice, even with SO_REUSEPORT set, skips held ports.
        for _ in 0..200 {
            let other = reuseport_socket().expect("socket");
            other.bind(&SockAddr::from(SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)))).expect("bind 0");
            let port = other.local_addr().expect("addr").as_socket().expect("inet").port();
            assert!(!(run.first..run.first + 3).contains(&port), "bind(0) handed out held port {port}");
        }
        // A shard's listener (SO_REUSEPORT, as glommio binds) joins the reservation.
        let listener = reuseport_socket().expect("socket");
        listener.bind(&SockAddr::from(SocketAddr::from((Ipv4Addr::LOCALHOST, run.first + 1)))).expect("shard joins the held port");
        listener.listen(16).expect("listen");
        let first = run.first;
        drop(run);
        drop(listener);
        assert!(port_is_free(first), "released with the reservation");
    }
}
