//! placeholder
pub mod pb {
    tonic::include_proto!("apache.rocketmq.v2");
}
