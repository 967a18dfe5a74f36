//! The transactional producer against a fake broker over a local TCP socket: what goes
//! on the wire for half sends, END_TRANSACTION after a local execution (answered and
//! oneway), and the answer to a CHECK_TRANSACTION_STATE the broker pushes.
//!
//! The fake (a plain thread with a blocking socket) is NameServer and broker on one
//! address, so the client opens one connection for everything. It answers routes,
//! heartbeats and sends, refuses the END of a message whose body is "refused", and
//! after the third END sends one check about the third half. Every wait has a deadline:
//! a broken client fails the test instead of hanging it.

use bytes::BytesMut;
use ringmq_client::message::properties::keys;
use ringmq_client::message::stored::StoredMessage;
use ringmq_client::message::{Message, MessageExt, Properties};
use ringmq_client::msgid::offset_msg_id;
use ringmq_client::producer::ProducerConfig;
use ringmq_client::remoting::codes::{request_code as rq, response_code as rs};
use ringmq_client::remoting::command::RemotingCommand;
use ringmq_client::remoting::frame::FrameLimits;
use ringmq_client::remoting::headers::{
    CheckTransactionStateRequestHeader, EndTransactionRequestHeader, SendMessageRequestHeader, SendMessageRequestHeaderV2,
    SendMessageResponseHeader,
};
use ringmq_client::remoting::route::{BrokerData, QueueData, TopicRouteData, PERM_READ, PERM_WRITE};
use ringmq_client::transaction::{EndTransactionMode, TransactionProducer, TRANSACTION_PREPARED_TYPE};
use ringmq_client::{ClientConfig, ClientError, LocalTransactionState, TransactionListener};
use std::any::Any;
use std::cell::RefCell;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::rc::Rc;
use std::time::{Duration, Instant};

/// Longest any wait in this test may take.
const DEADLINE: Duration = Duration::from_secs(20);
const TOPIC: &str = "orders";
const GROUP: &str = "PG";
/// CommitLog offset of the fake's n-th half: `(n + 1) * PHYS_STEP_BYTES`.
const PHYS_STEP_BYTES: u64 = 4_096;

fn send_ext(cmd: &RemotingCommand) -> SendMessageRequestHeader {
    SendMessageRequestHeader::from(cmd.header::<SendMessageRequestHeaderV2>().expect("send header"))
}

fn write(stream: &mut TcpStream, cmd: &RemotingCommand) {
    let mut out = BytesMut::new();
    cmd.encode(&mut out).expect("encode");
    stream.write_all(&out).expect("write to client");
}

/// Serves one client connection until it closes; returns every request it got.
fn fake_broker(listener: TcpListener) -> Vec<RemotingCommand> {
    let addr = listener.local_addr().unwrap();
    let (mut stream, _) = listener.accept().expect("client connects");
    stream.set_read_timeout(Some(DEADLINE)).unwrap();
    let mut got = Vec::new();
    let mut halves: Vec<RemotingCommand> = Vec::new();
    let mut ends = 0;
    let mut buf = BytesMut::new();
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        while let Some(cmd) = RemotingCommand::decode(&mut buf, &FrameLimits::default()).expect("client frames decode") {
            let answer = match cmd.code {
                rq::GET_ROUTEINFO_BY_TOPIC => {
                    let route = TopicRouteData {
                        broker_datas: vec![BrokerData {
                            broker_addrs: [(0, addr.to_string())].into(),
                            broker_name: "broker-a".into(),
                            cluster: "c".into(),
                            ..Default::default()
                        }],
                        queue_datas: vec![QueueData {
                            broker_name: "broker-a".into(),
                            perm: PERM_READ | PERM_WRITE,
                            read_queue_nums: 1,
                            write_queue_nums: 1,
                            topic_sys_flag: 0,
                        }],
                        ..Default::default()
                    };
                    Some(cmd.create_response(rs::SUCCESS, None).with_body(route.encode_standard()))
                }
                rq::SEND_MESSAGE_V2 => {
                    let n = halves.len() as u64;
                    let props = Properties::decode_str(send_ext(&cmd).properties.as_deref().unwrap_or(""));
                    let header = SendMessageResponseHeader {
                        msg_id: offset_msg_id(&addr, (n + 1) * PHYS_STEP_BYTES),
                        queue_id: 0,
                        queue_offset: n as i64,
                        transaction_id: props.get(keys::UNIQ_KEY).map(str::to_string),
                        batch_uniq_id: None,
                    };
                    halves.push(cmd.clone());
                    Some(cmd.create_response(rs::SUCCESS, None).with_header(&header))
                }
                rq::END_TRANSACTION => {
                    ends += 1;
                    let h: EndTransactionRequestHeader = cmd.header().expect("END header");
                    let refused = halves
                        .get(h.tran_state_table_offset as usize)
                        .is_some_and(|half| &half.body[..] == b"refused");
                    if ends == 3 {
                        let check = check_of(&halves[2], addr);
                        write(&mut stream, &check);
                    }
                    match (cmd.is_oneway(), refused) {
                        (true, _) => None,
                        (false, false) => Some(cmd.create_response(rs::SUCCESS, None)),
                        (false, true) => Some(cmd.create_response(rs::SYSTEM_ERROR, Some("half message not found"))),
                    }
                }
                _ if cmd.is_oneway() => None,
                _ => Some(cmd.create_response(rs::SUCCESS, None)),
            };
            got.push(cmd);
            if let Some(answer) = answer {
                write(&mut stream, &answer);
            }
        }
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return got,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

/// The broker's check about the half sent as `send` (the fake's third).
fn check_of(send: &RemotingCommand, store: SocketAddr) -> RemotingCommand {
    let mut props = Properties::decode_str(send_ext(send).properties.as_deref().unwrap_or(""));
    props.set(keys::TRANSACTION_CHECK_TIMES, "1").unwrap();
    let half = StoredMessage {
        queue_id: 0,
        queue_offset: 2,
        physical_offset: 3 * PHYS_STEP_BYTES as i64,
        sys_flag: TRANSACTION_PREPARED_TYPE,
        body: send.body.to_vec(),
        topic: TOPIC.into(),
        properties: props.encode(),
        store_host: store,
        ..Default::default()
    };
    let mut body = Vec::new();
    half.encode_into(&mut body);
    let header = CheckTransactionStateRequestHeader {
        topic: Some(TOPIC.into()),
        tran_state_table_offset: 2,
        commit_log_offset: 3 * PHYS_STEP_BYTES as i64,
        msg_id: props.get(keys::UNIQ_KEY).map(str::to_string),
        transaction_id: Some("TX-CHECK".into()),
        offset_msg_id: Some(offset_msg_id(&store, 3 * PHYS_STEP_BYTES)),
        broker_name: Some("broker-a".into()),
    };
    RemotingCommand::request(rq::CHECK_TRANSACTION_STATE).with_header(&header).with_body(body).oneway()
}

/// What one local execution saw: body, UNIQ_KEY, __transactionId__, arg.
type Execution = (String, String, String, Option<u32>);

/// Commits "commit" and "refused", panics on "panic"; answers checks with commit.
#[derive(Default)]
struct Recorder {
    executed: RefCell<Vec<Execution>>,
    /// (topic, transaction id, check times) per check.
    checked: RefCell<Vec<(String, String, String)>>,
}

impl TransactionListener for Recorder {
    fn execute_local_transaction(&self, msg: &Message, arg: Option<&dyn Any>) -> LocalTransactionState {
        let body = String::from_utf8_lossy(&msg.body).to_string();
        let prop = |k| msg.properties.get(k).unwrap_or("-").to_string();
        let arg = arg.and_then(|a| a.downcast_ref::<u32>()).copied();
        self.executed.borrow_mut().push((body.clone(), prop(keys::UNIQ_KEY), prop(keys::TRANSACTION_ID), arg));
        match body.as_str() {
            "panic" => panic!("db down"),
            _ => LocalTransactionState::CommitMessage,
        }
    }

    fn check_local_transaction(&self, msg: &MessageExt) -> LocalTransactionState {
        let times = msg.property(keys::TRANSACTION_CHECK_TIMES).unwrap_or("-").to_string();
        self.checked.borrow_mut().push((msg.topic.clone(), msg.transaction_id().to_string(), times));
        LocalTransactionState::CommitMessage
    }
}

#[test]
fn transactions_and_checks_on_the_wire() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let broker_addr = addr.clone();
    let server = std::thread::spawn(move || fake_broker(listener));

    let executor = glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound).make().expect("executor");
    let (results, uniq_ids) = executor.run(async move {
        let recorder = Rc::new(Recorder::default());
        let mut client = ClientConfig::new([addr.clone()]);
        client.client_ip = Some("127.0.0.1".parse().unwrap());
        let producer = TransactionProducer::start(ProducerConfig::new(client, GROUP), recorder.clone()).await.expect("start");
        producer.set_end_transaction_mode(EndTransactionMode::Request);

        // Refused before any IO: a delayed transactional message, a transactional batch.
        let delayed = Message::new(TOPIC, "x").with_delay_level(2).unwrap();
        let e = producer.send_message_in_transaction(delayed, None).await.unwrap_err();
        assert!(matches!(e, ClientError::MessageIllegal { .. }), "{e}");
        let tran = Message::new(TOPIC, "x").with_property(keys::TRAN_MSG, "true").unwrap();
        let e = producer.producer().send_batch(vec![tran]).await.unwrap_err();
        assert!(e.to_string().contains("cannot be batched"), "{e}");

        let mut results = Vec::new();
        for (i, body) in ["commit", "refused", "panic"].into_iter().enumerate() {
            let arg = i as u32;
            let r = producer.send_message_in_transaction(Message::new(TOPIC, body), Some(&arg)).await.expect("half stored");
            results.push((r.send_result.queue_offset, r.local_state, r.end.map_err(|e| e.to_string())));
        }
        // The fake checks the third half after its END; wait for the answer to go out.
        let started = Instant::now();
        while recorder.checked.borrow().is_empty() || producer.checks_in_flight() > 0 {
            assert!(started.elapsed() < DEADLINE, "no check answered");
            glommio::timer::sleep(Duration::from_millis(5)).await;
        }
        let executed = recorder.executed.borrow().clone();
        let uniq_ids: Vec<String> = executed.iter().map(|e| e.1.clone()).collect();
        for (i, (body, uniq, tx_id, arg)) in executed.iter().enumerate() {
            assert_eq!((body.as_str(), arg), (["commit", "refused", "panic"][i], &Some(i as u32)));
            assert_eq!(uniq.len(), 32, "the producer's UNIQ_KEY");
            assert_eq!(tx_id, uniq, "the fake's transactionId is the UNIQ_KEY");
        }
        assert_eq!(*recorder.checked.borrow(), [(TOPIC.to_string(), uniq_ids[2].clone(), "1".to_string())]);
        producer.shutdown().await;
        (results, uniq_ids)
    });

    use LocalTransactionState::*;
    assert_eq!(
        results,
        [
            (0, CommitMessage, Ok(())),
            (1, CommitMessage, Err(format!("broker {broker_addr} answered code 1 (half message not found)"))),
            (2, Unknown, Ok(())),
        ]
    );

    let got = server.join().expect("fake broker");
    let sends: Vec<SendMessageRequestHeader> = got.iter().filter(|c| c.code == rq::SEND_MESSAGE_V2).map(send_ext).collect();
    assert_eq!(sends.len(), 3);
    for s in &sends {
        assert_eq!((s.sys_flag, s.producer_group.as_str(), s.topic.as_str()), (TRANSACTION_PREPARED_TYPE, GROUP, TOPIC));
        let props = Properties::decode_str(s.properties.as_deref().unwrap_or(""));
        assert_eq!((props.get(keys::TRAN_MSG), props.get(keys::PGROUP)), (Some("true"), Some(GROUP)));
        assert_eq!(props.get(keys::TRANSACTION_ID), None, "the id is shown to the listener, never sent");
    }

    let ends: Vec<(bool, Option<String>, EndTransactionRequestHeader)> = got
        .iter()
        .filter(|c| c.code == rq::END_TRANSACTION)
        .map(|c| (c.is_oneway(), c.remark.clone(), c.header().expect("END header")))
        .collect();
    let end = |n: usize, cor: i32, from_check: bool, tx: &str| EndTransactionRequestHeader {
        producer_group: GROUP.into(),
        tran_state_table_offset: n as i64,
        commit_log_offset: ((n as u64 + 1) * PHYS_STEP_BYTES) as i64,
        commit_or_rollback: cor,
        from_transaction_check: from_check,
        msg_id: uniq_ids[n].clone(),
        transaction_id: Some(tx.into()),
    };
    assert_eq!(
        ends,
        [
            (false, None, end(0, 8, false, &uniq_ids[0])),
            (false, None, end(1, 8, false, &uniq_ids[1])),
            // Unknown goes oneway even in Request mode, with the listener's failure.
            (true, Some("executeLocalTransactionBranch exception: db down".into()), end(2, 0, false, &uniq_ids[2])),
            // The answer to the check: its offsets and transactionId, the half's UNIQ_KEY.
            (true, None, end(2, 8, true, "TX-CHECK")),
        ]
    );
}
