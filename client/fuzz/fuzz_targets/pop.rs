//! Fuzzes POP's decoders (issue 28): the receipt handle's extra info, the POP answer's
//! startOffsetInfo / orderCountInfo / msgOffsetInfo strings and the BATCH_ACK_MESSAGE
//! body: any bytes decode or fail, never panic; what decodes re-encodes to itself.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ringmq_client::remoting::pop::{decode_msg_offsets, decode_queue_values, BatchAckMessageRequestBody, ExtraInfo};

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(info) = ExtraInfo::decode(text) {
            assert_eq!(ExtraInfo::decode(&info.encode()).ok(), Some(info));
        }
        let _ = decode_queue_values("startOffsetInfo", text);
        let _ = decode_msg_offsets(text);
    }
    if let Ok(body) = BatchAckMessageRequestBody::decode(data) {
        let again = BatchAckMessageRequestBody::decode(&body.encode()).expect("re-encoded body decodes");
        assert_eq!(again.acks.len(), body.acks.len());
        for (a, b) in again.acks.iter().zip(&body.acks) {
            assert_eq!(a.bit_set.bits().collect::<Vec<_>>(), b.bit_set.bits().collect::<Vec<_>>());
        }
    }
});
