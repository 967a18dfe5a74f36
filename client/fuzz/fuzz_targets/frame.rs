//! Fuzzes the incremental frame decoder and the command decoder behind it: any byte
//! stream must yield frames, `None` or an error, never a panic, with small limits so that
//! the limit checks themselves are exercised.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use ringmq_client::remoting::frame::{self, FrameLimits};
use ringmq_client::remoting::RemotingCommand;

fuzz_target!(|data: &[u8]| {
    let limits = FrameLimits { frame_len_max_bytes: 1 << 16, body_len_max_bytes: 1 << 12 };
    let mut buf = BytesMut::from(data);
    while let Ok(Some(f)) = frame::decode(&mut buf, &limits) {
        let _ = RemotingCommand::from_frame(f);
    }
});
