//! Fuzzes the front end's request path short of the backend: prost decoding of
//! SendMessageRequest, then the validation and translation of each message into the
//! SEND_MESSAGE_V2 it would send; never panics, allocates at most a bounded multiple of
//! the input.
#![no_main]

use libfuzzer_sys::fuzz_target;
use prost::Message;
use ringmq_grpc::metadata::ClientMeta;
use ringmq_grpc::pb;
use ringmq_grpc::send::{build_message, send_request, SendLimits};

fuzz_target!(|data: &[u8]| {
    let Ok(req) = pb::SendMessageRequest::decode(data) else { return };
    let meta = ClientMeta { client_id: "fuzz".into(), language: "OTHER", ..Default::default() };
    let limits = SendLimits { max_body_bytes: 4 << 20, max_delay_ms: 86_400_000 };
    for m in req.messages.iter().take(64) {
        let topic = m.topic.as_ref().map(|t| meta.resource_name(t)).unwrap_or_default();
        let _ = ringmq_grpc::route::validate_topic(&topic);
        if let Ok(built) = build_message(m, &topic, "127.0.0.1:1", limits, 1_700_000_000_000) {
            let _ = send_request(&meta, &topic, &topic, "b", 0, &built, 1_700_000_000_000).encode_header();
        }
    }
    let _ = pb::TelemetryCommand::decode(data);
    let _ = pb::EndTransactionRequest::decode(data);
    let _ = pb::QueryRouteRequest::decode(data);
});
