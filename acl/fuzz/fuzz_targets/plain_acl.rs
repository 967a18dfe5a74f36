//! `plain_acl.yml` text from arbitrary bytes: parsing never panics, and whatever rules
//! parse decide a request (signed by a parsed account or not) without panicking.
#![no_main]
use libfuzzer_sys::fuzz_target;
use ringmq_acl as acl;
use ringmq_client::remoting::acl::{sign, Credentials};
use ringmq_client::remoting::codes::request_code as rq;
use ringmq_client::remoting::command::RemotingCommand;

fuzz_target!(|data: &[u8]| {
    let Ok(rules) = acl::parse(data) else { return };
    let mut cmd = RemotingCommand::request(rq::SEND_MESSAGE_V2).with_ext("a", "pg").with_ext("b", "TopicTest");
    if let Some(account) = rules.accounts.values().next() {
        sign(&mut cmd, &Credentials::new(account.access_key.clone(), account.secret_key.clone()));
    }
    for remote in [None, Some("127.0.0.1".parse().unwrap()), Some("::1".parse().unwrap())] {
        let _ = rules.check(&cmd, remote);
    }
});
