//! The NameServer's use of the 4.x plain ACL (RingMQ's: Apache's NameServer checks
//! nothing). The codes that change routes or settings (`NAMESRV_ADMIN_CODES`: KV puts
//! and deletes, broker registration and unregistration, topic deletion and
//! registration, write-permission changes, config updates) must be signed by an
//! `admin: true` account (the same white lists, access key and signature steps as the
//! broker's, `AclRules::authenticate`): the brokers sign their registrations with
//! `innerClientAuthenticationCredentials`, so that account must be an admin, and nobody
//! else can register, unregister or fence a broker.
//!
//! Reads (routes, cluster info, topic lists, KV reads, data versions) stay open, as on
//! Apache's NameServer: clients there have never had their NameServer signatures
//! checked, and rocketmq-client-rust 1.0's do not verify (its route lookups carry
//! `AccessKey` and `topic` under a signature that matches neither, and differs from
//! run to run for the same fields), so checking them would cut such clients off their
//! routes. What a client may do with a topic is checked where it acts: the broker.
//!
//! Invariant: the decision never panics and reads only the request's ext fields.

use crate::{AclRules, Refusal, RefusalKind};
use ringmq_client::remoting::codes::request_code as rq;
use ringmq_client::remoting::command::RemotingCommand;
use std::net::IpAddr;

/// NameServer requests that change what it answers: an admin account's only.
pub const NAMESRV_ADMIN_CODES: &[i32] = &[
    rq::PUT_KV_CONFIG,
    rq::DELETE_KV_CONFIG,
    rq::REGISTER_BROKER,
    rq::UNREGISTER_BROKER,
    rq::DELETE_TOPIC_IN_NAMESRV,
    rq::REGISTER_TOPIC_IN_NAMESRV,
    rq::WIPE_WRITE_PERM_OF_BROKER,
    rq::ADD_WRITE_PERM_OF_BROKER,
    rq::UPDATE_NAMESRV_CONFIG,
];

impl AclRules {
    /// Whether the caller at `remote` may send `cmd` to a NameServer.
    pub fn check_namesrv(&self, cmd: &RemotingCommand, remote: Option<IpAddr>) -> Result<(), Refusal> {
        if !NAMESRV_ADMIN_CODES.contains(&cmd.code) {
            return Ok(());
        }
        let Some(account) = self.authenticate(cmd, remote)? else { return Ok(()) };
        if !account.admin {
            return Err(Refusal {
                kind: RefusalKind::NotAdmin,
                remark: format!("Need admin permission for request code={}, but accessKey={} is not", cmd.code, account.access_key),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringmq_client::remoting::acl::{sign, Credentials};

    const FILE: &str = "globalWhiteRemoteAddresses: ['10.9.*.*']\n\
        accounts:\n\
        \x20 - accessKey: brokerAdmin\n    secretKey: brokerSecret\n    admin: true\n\
        \x20 - accessKey: appAccount\n    secretKey: appSecret1\n    defaultTopicPerm: DENY\n    defaultGroupPerm: SUB\n    topicPerms:\n      - Orders=PUB\n      - Audit=SUB\n\
        \x20 - accessKey: whiteAccount\n    secretKey: whiteSecret\n    whiteRemoteAddress: 10.1.1.1\n";

    /// `(code, ext, signer, caller)` → `Ok` or the refusal's kind and a remark piece.
    fn check(code: i32, ext: &[(&str, &str)], signer: Option<(&str, &str)>, caller: &str, expected: Result<(), (RefusalKind, &str)>) {
        let rules = crate::parse(FILE.as_bytes()).expect("the test file parses");
        let mut cmd = RemotingCommand::request(code);
        for (k, v) in ext {
            cmd = cmd.with_ext(*k, *v);
        }
        if let Some((ak, sk)) = signer {
            sign(&mut cmd, &Credentials::new(ak, sk));
        }
        let got = rules.check_namesrv(&cmd, Some(caller.parse().expect("ip")));
        match (got, expected) {
            (Ok(()), Ok(())) => {}
            (Err(r), Err((kind, piece))) => assert!(r.kind == kind && r.remark.contains(piece), "code {code} {ext:?} by {signer:?} from {caller}: got {r:?}, wanted {kind:?} with {piece:?}"),
            (got, want) => panic!("code {code} {ext:?} by {signer:?} from {caller}: got {got:?}, wanted {want:?}"),
        }
    }

    const ADMIN: Option<(&str, &str)> = Some(("brokerAdmin", "brokerSecret"));
    const APP: Option<(&str, &str)> = Some(("appAccount", "appSecret1"));
    const HOST: &str = "192.168.0.5";

    #[test]
    fn namesrv_decisions() {
        let cluster = [("brokerName", "broker-a")];
        // Route changes: admin accounts only.
        check(rq::REGISTER_BROKER, &cluster, ADMIN, HOST, Ok(()));
        check(rq::REGISTER_BROKER, &cluster, APP, HOST, Err((RefusalKind::NotAdmin, "Need admin permission for request code=103")));
        check(rq::REGISTER_BROKER, &cluster, None, HOST, Err((RefusalKind::NoAccessKey, "No accessKey")));
        check(rq::UNREGISTER_BROKER, &cluster, APP, HOST, Err((RefusalKind::NotAdmin, "accessKey=appAccount is not")));
        check(rq::PUT_KV_CONFIG, &[("namespace", "ns"), ("key", "k"), ("value", "v")], APP, HOST, Err((RefusalKind::NotAdmin, "code=100")));
        check(rq::PUT_KV_CONFIG, &[("namespace", "ns"), ("key", "k"), ("value", "v")], ADMIN, HOST, Ok(()));
        check(rq::DELETE_TOPIC_IN_NAMESRV, &[("topic", "Orders")], APP, HOST, Err((RefusalKind::NotAdmin, "code=216")));
        check(rq::WIPE_WRITE_PERM_OF_BROKER, &cluster, APP, HOST, Err((RefusalKind::NotAdmin, "code=205")));
        // A wrong secret or an unknown account on a change.
        check(rq::REGISTER_BROKER, &cluster, Some(("brokerAdmin", "notTheSecret")), HOST, Err((RefusalKind::BadSignature, "Check signature failed for accessKey=brokerAdmin")));
        check(rq::DELETE_KV_CONFIG, &[("namespace", "ns"), ("key", "k")], Some(("nobodyHere", "whatever1")), HOST, Err((RefusalKind::UnknownAccessKey, "No acl config for nobodyHere")));
        // Reads are open, signed or not (as on Apache's NameServer).
        check(rq::GET_BROKER_CLUSTER_INFO, &[], None, HOST, Ok(()));
        check(rq::GET_BROKER_CLUSTER_INFO, &[], Some(("appAccount", "notTheSecret")), HOST, Ok(()));
        check(rq::GET_ALL_TOPIC_LIST_FROM_NAMESERVER, &[], APP, HOST, Ok(()));
        check(rq::GET_ROUTEINFO_BY_TOPIC, &[("topic", "Payroll")], APP, HOST, Ok(()));
        check(rq::GET_KV_CONFIG, &[("namespace", "ns"), ("key", "k")], None, HOST, Ok(()));
        // White lists: no signature needed.
        check(rq::REGISTER_BROKER, &cluster, None, "10.9.3.4", Ok(()));
        check(rq::WIPE_WRITE_PERM_OF_BROKER, &[("brokerName", "b"), ("AccessKey", "whiteAccount")], None, "10.1.1.1", Ok(()));
        check(rq::WIPE_WRITE_PERM_OF_BROKER, &[("brokerName", "b"), ("AccessKey", "whiteAccount")], None, "10.1.1.2", Err((RefusalKind::BadSignature, "whiteAccount")));
    }
}
