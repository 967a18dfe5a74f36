fn main() {
    let ex = glommio::LocalExecutorBuilder::new(glommio::Placement::Fixed(0)).make().unwrap();
    ex.run(async {
        let f = glommio::io::OpenOptions::new().read(true).write(true).create(true).dma_open("/tmp/gtest").await.unwrap();
        let mut b = f.alloc_dma_buffer(4096);
        b.as_bytes_mut().fill(7);
        let n = f.write_at(b, 0).await.unwrap();
        f.fdatasync().await.unwrap();
        let r = f.read_at(10, 100).await.unwrap();
        println!("wrote {n} read {} {}", r.len(), r[0]);
    });
}
