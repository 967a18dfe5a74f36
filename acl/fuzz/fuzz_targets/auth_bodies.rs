//! RocketMQ 5's AUTH_* bodies and the users/ACL snapshot from arbitrary bytes: decoding
//! never panics; whatever converts to the model writes back to the same model; whatever
//! snapshot decodes encodes to one that decodes to the same tables.
#![no_main]
use libfuzzer_sys::fuzz_target;
use ringmq_acl::auth::info::{encode, AclInfo, UserInfo};
use ringmq_acl::auth::tables::AuthTables;

fuzz_target!(|data: &[u8]| {
    if let Ok(info) = UserInfo::decode(data) {
        if let Ok(user) = info.to_new_user() {
            let back = UserInfo::decode(&encode(&UserInfo::of(&user))).expect("a written UserInfo decodes");
            assert_eq!(back.to_new_user().as_ref(), Ok(&user));
        }
    }
    let _ = UserInfo::decode_list(data);
    if let Ok(info) = AclInfo::decode(data) {
        if let Ok(acl) = info.to_acl(Some("User:fuzz")) {
            let back = AclInfo::decode(&encode(&AclInfo::of(&acl))).expect("a written AclInfo decodes");
            assert_eq!(back.to_acl(None).as_ref(), Ok(&acl));
        }
    }
    let _ = AclInfo::decode_list(data);
    if let Ok(tables) = AuthTables::decode(data) {
        let again = AuthTables::decode(&tables.encode()).expect("an encoded snapshot decodes");
        assert_eq!(again, tables);
    }
});
