//! Compiles the vendored rocketmq-apis protos (proto/, v2.1.2) into the prost messages
//! and the tonic server/client of `apache.rocketmq.v2.MessagingService`. protox parses
//! them in pure Rust: the build needs no `protoc` binary.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = [
        "proto/apache/rocketmq/v2/definition.proto",
        "proto/apache/rocketmq/v2/service.proto",
        "proto/apache/rocketmq/v2/admin.proto",
    ];
    for f in files {
        println!("cargo:rerun-if-changed={f}");
    }
    let fds = protox::compile(files, ["proto"])?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .compile_fds(fds)?;
    Ok(())
}
