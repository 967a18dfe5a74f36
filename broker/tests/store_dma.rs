//! The real backend (glommio DMA files, O_DIRECT) passes the same round-trip and
//! recovery checks as the simulator, on a temporary directory.

use glommio::{LocalExecutorBuilder, Placement};
use ringmq_broker::store::config::{FlushMode, StoreConfig};
use ringmq_broker::store::engine::{open_store, GetStatus, MessageToStore, ShardId, Store};
use ringmq_broker::store::flusher::spawn_store_tasks;
use ringmq_broker::store::io::dma::DmaDisk;
use ringmq_broker::store::io::SystemClock;
use ringmq_client::message::stored::StoredMessageView;
use std::cell::Cell;
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::rc::Rc;

type DmaStore = Store<DmaDisk, SystemClock>;

fn run<F: std::future::Future<Output = ()> + 'static>(f: impl FnOnce() -> F + Send + 'static) {
    LocalExecutorBuilder::new(Placement::Unbound).make().expect("glommio executor").run(f());
}

/// A directory on a real filesystem (O_DIRECT does not work on tmpfs).
fn store_dir() -> tempfile::TempDir {
    let base = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    tempfile::tempdir_in(base).expect("tempdir")
}

fn msg<'a>(queue_id: i32, body: &'a [u8], props: &'a str) -> MessageToStore<'a> {
    MessageToStore {
        topic: "DmaTopic",
        queue_id,
        flag: 0,
        body,
        properties: props,
        sys_flag: 0,
        born_timestamp_ms: 1,
        born_host: "127.0.0.1:1".parse().unwrap(),
        store_host: "127.0.0.1:10911".parse().unwrap(),
        reconsume_times: 0,
        prepared_transaction_offset: 0,
    }
}

fn body(seq: u32) -> Vec<u8> {
    let mut b = seq.to_be_bytes().to_vec();
    b.extend(std::iter::repeat_n((seq % 251) as u8, 700 + (seq as usize * 13) % 600));
    b
}

async fn read_seqs(store: &DmaStore, queue_id: i32) -> Vec<u32> {
    let mut out = Vec::new();
    let mut offset = 0;
    loop {
        let got = store.get_messages("DmaTopic", queue_id, offset, 64, 1 << 20, &|_| true).await.unwrap();
        if got.status != GetStatus::Found {
            break;
        }
        let mut at = 0;
        while at < got.records.len() {
            let view = StoredMessageView::parse_verified(&got.records[at..]).unwrap();
            let seq = u32::from_be_bytes(view.body()[..4].try_into().unwrap());
            assert_eq!(view.body(), &body(seq)[..]);
            out.push(seq);
            at += view.total_size();
        }
        offset = got.next_offset;
    }
    out
}

fn config() -> StoreConfig {
    StoreConfig { flush_mode: FlushMode::Sync, ..StoreConfig::for_tests() }
}

#[test]
fn fallocated_segments_round_trip() {
    let dir = store_dir();
    let path = dir.path().to_path_buf();
    run(move || async move {
        let cfg = StoreConfig { preallocate: ringmq_broker::store::config::Preallocate::Fallocate, ..config() };
        let (store, _) = open_store(DmaDisk, SystemClock, path.clone(), ShardId(0), cfg.clone()).await.unwrap();
        for seq in 0..200 {
            let b = body(seq);
            if store.put(&msg(0, &b, "")).is_err() {
                store.flush_all().await.unwrap();
                store.put(&msg(0, &b, "")).unwrap();
            }
            if seq % 50 == 0 {
                store.prepare_next_segment().await.unwrap();
            }
        }
        store.flush_all().await.unwrap();
        drop(store);
        // Unclean: recovery scans fallocated (zero-reading) space past the end.
        let (store, report) = open_store(DmaDisk, SystemClock, path.clone(), ShardId(0), cfg).await.unwrap();
        assert!(report.unclean);
        assert_eq!(read_seqs(&store, 0).await, (0..200).collect::<Vec<_>>());
    });
}

async fn open(dir: &Path) -> DmaStore {
    open_store(DmaDisk, SystemClock, dir.to_path_buf(), ShardId(1), config()).await.expect("open").0
}

#[test]
fn round_trip_across_segment_rolls_with_group_commit() {
    let dir = store_dir();
    let path = dir.path().to_path_buf();
    run(move || async move {
        let store = open(&path).await;
        let stop = Rc::new(Cell::new(false));
        spawn_store_tasks(ringmq_broker::rt::Glommio::default(), store.clone(), stop.clone(), Rc::new(|e| panic!("fatal: {e}")));
        // 8 writers in flight, each waiting for durability before its next append.
        let mut tasks = Vec::new();
        for w in 0..8u32 {
            let s = store.clone();
            tasks.push(glommio::spawn_local(async move {
                for i in 0..40u32 {
                    let seq = w * 1000 + i;
                    let b = body(seq);
                    let r = loop {
                        match s.put(&msg((w % 2) as i32, &b, "")) {
                            Ok(r) => break r,
                            Err(_) => glommio::timer::sleep(std::time::Duration::from_millis(1)).await,
                        }
                    };
                    assert_eq!(ShardId::of_phys(r.phys_offset), ShardId(1));
                    s.wait_durable(r.durable_ticket).await.unwrap();
                }
            }));
        }
        for t in tasks {
            t.await;
        }
        let stats = store.stats();
        assert!(stats.flushes > 0 && stats.flushes < 320, "group commit: {} flushes for 320 appends", stats.flushes);
        stop.set(true);
        let mut all = read_seqs(&store, 0).await;
        all.extend(read_seqs(&store, 1).await);
        assert_eq!(all.len(), 320);
        store.close().await.unwrap();
        let segments = std::fs::read_dir(path.join("commitlog")).unwrap().count();
        assert!(segments >= 4, "{segments} segments");
        let names: Vec<String> = std::fs::read_dir(path.join("commitlog")).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        assert!(names.iter().all(|n| n.len() == 20 && n.parse::<u64>().unwrap() >> 56 == 1), "names carry the shard: {names:?}");
        drop(store);
        let store = open(&path).await;
        let mut again = read_seqs(&store, 0).await;
        again.extend(read_seqs(&store, 1).await);
        assert_eq!(again, all);
    });
}

#[test]
fn unclean_stop_with_a_torn_tail_recovers() {
    let dir = store_dir();
    let path = dir.path().to_path_buf();
    let end = Rc::new(Cell::new(0u64));
    {
        let path = path.clone();
        run(move || async move {
            let store = open(&path).await;
            for seq in 0..100 {
                let b = body(seq);
                if store.put(&msg(0, &b, "")).is_err() {
                    store.flush_all().await.unwrap();
                    store.put(&msg(0, &b, "")).unwrap();
                }
            }
            store.flush_all().await.unwrap();
            std::fs::write(path.join("end"), store.write_offset().to_string()).unwrap();
            // No close: the abort file stays, as after SIGKILL.
        });
    }
    let written_end: u64 = std::fs::read_to_string(path.join("end")).unwrap().parse().unwrap();
    end.set(written_end);
    // A torn record after the end, inside the last write window.
    let seg_bytes = config().segment_bytes;
    let seg_start = written_end / seg_bytes * seg_bytes;
    let name = format!("{:020}", (1u64 << 56) + seg_start);
    let mut f = std::fs::OpenOptions::new().write(true).open(path.join("commitlog").join(name)).unwrap();
    f.seek(SeekFrom::Start(written_end - seg_start)).unwrap();
    f.write_all(&[0xAB; 300]).unwrap();
    f.sync_all().unwrap();
    drop(f);
    let p2 = path.clone();
    run(move || async move {
        let (store, report) = open_store(DmaDisk, SystemClock, p2.clone(), ShardId(1), config()).await.unwrap();
        assert!(report.unclean);
        assert_eq!(report.end_offset, written_end);
        assert_eq!(read_seqs(&store, 0).await, (0..100).collect::<Vec<_>>());
        store.close().await.unwrap();
    });
}
