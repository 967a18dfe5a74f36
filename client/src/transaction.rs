//! The transactional producer (RocketMQ's `TransactionMQProducer`): half messages, the
//! local transaction, END_TRANSACTION, and the answers to a broker's checks.
//!
//! The protocol, as Java's `DefaultMQProducerImpl` runs it (`sendMessageInTransaction`,
//! `endTransaction`, `checkTransactionState`):
//! 1. the message goes out as a *half*: properties `TRAN_MSG=true` and `PGROUP=<group>`,
//!    sysFlag `TRANSACTION_PREPARED_TYPE` (the producer's send path sets the flag from
//!    the property, see `send_sys_flag`). The broker keeps it away from consumers and
//!    answers like a normal send: the queue offset is the half's offset in its half
//!    queue (`tranStateTableOffset`), the offsetMsgId carries its CommitLog offset;
//! 2. the listener's `execute_local_transaction` runs once, synchronously, on the
//!    executor;
//! 3. END_TRANSACTION tells the master of the queue's broker: commit (0x08), rollback
//!    (0x0C) or unknown (0). Oneway by default, as Java; `EndTransactionMode::Request`
//!    waits for the broker's answer instead (tests, tools);
//! 4. a half still undecided after a while (END lost or unknown, producer gone) is
//!    checked: the broker sends CHECK_TRANSACTION_STATE (oneway; body = the half in the
//!    stored layout, real topic and queue) on a connection of the group; the
//!    `ClientInstance` hands it to this group's producer, which asks
//!    `check_local_transaction` in a spawned task and answers END_TRANSACTION
//!    (`fromTransactionCheck=true`, oneway) to the address the check came from.
//!
//! Owns: the listener types, the pure pieces (half message, sysFlag, END headers, check
//! decoding, each with a table test) and `TransactionProducer`, which wraps a `Producer`.
//!
//! Invariants:
//! - a message asking for a delayed or timed delivery is refused before any IO: a broker
//!   does not schedule a half (Java 4.x drops `DELAY` silently, RocketMQ 5 clients
//!   refuse; refusing beats sending now what was asked for later);
//! - every local execution and every accepted check is answered by one END_TRANSACTION
//!   attempt, never more, unknown included; an END that cannot be built or written is
//!   logged (and reported in `TransactionSendResult::end`), never an error of the send:
//!   the broker checks the half again, so a lost END decides nothing;
//! - a panicking listener counts as `Unknown` (the broker asks again later) and never
//!   unwinds into the executor;
//! - at most `TRANSACTION_CHECKS_IN_FLIGHT_MAX` checks are queued or running per
//!   producer; a check beyond that is dropped with a warning (the broker checks again);
//! - the instance holds the check hook weakly: dropping every `TransactionProducer`
//!   clone stops answering checks (the broker then asks another member of the group).

use crate::error::ClientError;
use crate::instance::{ClientInstance, TransactionCheckHook};
use crate::message::properties::keys;
use crate::message::stored::StoredMessageView;
use crate::message::{decode_messages, Delivery, Message, MessageExt, Properties};
use crate::msgid::decode_offset_msg_id;
use crate::producer::{Producer, ProducerConfig, SendResult};
use crate::remoting::codes::{request_code as rq, response_code as rs};
use crate::remoting::command::RemotingCommand;
use crate::remoting::headers::{CheckTransactionStateRequestHeader, EndTransactionRequestHeader};
use std::any::Any;
use std::cell::Cell;
use std::panic::AssertUnwindSafe;
use std::rc::{Rc, Weak};
use std::time::Duration;

/// RocketMQ's `MessageSysFlag` transaction bits (bits 2-3 of a message's sysFlag).
pub const TRANSACTION_NOT_TYPE: i32 = 0;
/// A half message: stored, invisible to consumers until committed.
pub const TRANSACTION_PREPARED_TYPE: i32 = 0x04;
pub const TRANSACTION_COMMIT_TYPE: i32 = 0x08;
pub const TRANSACTION_ROLLBACK_TYPE: i32 = 0x0C;
pub const TRANSACTION_TYPE_MASK: i32 = 0x0C;

/// Checks queued or running per producer (Java's `checkRequestHoldMax`); more are
/// dropped: the broker checks an unanswered half again later.
pub const TRANSACTION_CHECKS_IN_FLIGHT_MAX: usize = 2_000;
/// How long writing the answer to a check may take (Java's 3 s).
pub const CHECK_END_TIMEOUT_MS: u64 = 3_000;

/// What the application says about its local transaction (Java's names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LocalTransactionState {
    /// Deliver the message.
    CommitMessage,
    /// Drop the message.
    RollbackMessage,
    /// Not decided yet: the broker checks again later (up to its check maximum).
    Unknown,
}

impl LocalTransactionState {
    /// END_TRANSACTION's `commitOrRollback` value.
    pub fn commit_or_rollback(self) -> i32 {
        match self {
            LocalTransactionState::CommitMessage => TRANSACTION_COMMIT_TYPE,
            LocalTransactionState::RollbackMessage => TRANSACTION_ROLLBACK_TYPE,
            LocalTransactionState::Unknown => TRANSACTION_NOT_TYPE,
        }
    }
}

/// The application's side of a transaction. Both calls run synchronously on the
/// producer's executor: keep them short (hand long work to a task and answer `Unknown`;
/// the broker will check). A panic counts as `Unknown`.
pub trait TransactionListener {
    /// Runs the local transaction of a half message the broker has stored. `msg` is the
    /// message as sent (`TRAN_MSG`, `PGROUP`, `UNIQ_KEY`) plus `__transactionId__`
    /// (`keys::TRANSACTION_ID`: the broker's transaction id, else the `UNIQ_KEY`).
    fn execute_local_transaction(&self, msg: &Message, arg: Option<&dyn Any>) -> LocalTransactionState;

    /// The broker asks about a half message still undecided: `msg` is the half as stored
    /// (real topic and queue; `msg.transaction_id()` is its `UNIQ_KEY`;
    /// `TRANSACTION_CHECK_TIMES` counts the checks so far).
    fn check_local_transaction(&self, msg: &MessageExt) -> LocalTransactionState;
}

/// How END_TRANSACTION after a local execution is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EndTransactionMode {
    /// Written and forgotten, as Java does; `TransactionSendResult::end` says whether it
    /// was written.
    #[default]
    Oneway,
    /// Sent as a request: `TransactionSendResult::end` carries the broker's answer. An
    /// `Unknown` END still goes oneway (Java's broker does not answer it: there is
    /// nothing to do). Answers to checks are always oneway.
    Request,
}

/// The outcome of `send_message_in_transaction`: the half is stored and the local
/// transaction ran.
#[derive(Debug)]
pub struct TransactionSendResult {
    pub send_result: SendResult,
    pub local_state: LocalTransactionState,
    /// Whether END_TRANSACTION was written (or, with `EndTransactionMode::Request`,
    /// accepted). Not an error of the send: a half whose END is lost is checked later.
    pub end: Result<(), ClientError>,
}

/// A decoded CHECK_TRANSACTION_STATE.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionCheck {
    pub header: CheckTransactionStateRequestHeader,
    /// The half message as the broker stored it.
    pub msg: MessageExt,
    /// Its producer group (`PGROUP`): who must answer.
    pub group: String,
}

/// Whether `TRAN_MSG` says "transactional" (Java's `Boolean.parseBoolean`: `true` in
/// any case).
pub fn is_transactional(properties: &Properties) -> bool {
    properties.get(keys::TRAN_MSG).is_some_and(|v| v.eq_ignore_ascii_case("true"))
}

/// The sysFlag a single message is sent with (Java's `sendKernelImpl`; no compression
/// here): `TRANSACTION_PREPARED_TYPE` for a transactional message, else 0.
pub fn send_sys_flag(properties: &Properties) -> i32 {
    if is_transactional(properties) {
        TRANSACTION_PREPARED_TYPE
    } else {
        TRANSACTION_NOT_TYPE
    }
}

/// `msg` as the half message of producer `group`: `TRAN_MSG=true`, `PGROUP=group`.
/// Refused when it asks for a delayed or timed delivery (or carries a delivery value a
/// broker would not parse).
pub fn half_message(mut msg: Message, group: &str) -> Result<Message, ClientError> {
    match msg.delivery() {
        Ok(Delivery::Now) => {}
        Ok(delivery) => {
            return Err(ClientError::MessageIllegal {
                addr: "local".into(),
                remark: format!("a transactional message cannot be delayed or timed ({delivery:?}): send it without a delivery time"),
            })
        }
        Err(e) => return Err(ClientError::InvalidMessage(e)),
    }
    msg.set_property(keys::TRAN_MSG, "true")?;
    msg.set_property(keys::PGROUP, group)?;
    Ok(msg)
}

/// The transaction id of a sent half: the broker's `transactionId`, else the message's
/// `UNIQ_KEY` (which is what a RocketMQ 5 broker puts there).
pub fn send_transaction_id(send_result: &SendResult) -> &str {
    send_result.transaction_id.as_deref().filter(|id| !id.is_empty()).unwrap_or(&send_result.msg_id)
}

/// END_TRANSACTION after a local execution (Java's `endTransaction`): the half's queue
/// offset and CommitLog offset (from the offsetMsgId), `fromTransactionCheck=false`.
pub fn end_header_after_send(
    group: &str,
    send_result: &SendResult,
    state: LocalTransactionState,
) -> Result<EndTransactionRequestHeader, ClientError> {
    let commit_log_offset = decode_offset_msg_id(&send_result.offset_msg_id)
        .and_then(|(_, offset)| i64::try_from(offset).ok())
        .ok_or_else(|| {
            ClientError::Protocol(format!(
                "offsetMsgId {:?} of half message {} is not a store host and CommitLog offset: cannot end its transaction (the broker will check it)",
                send_result.offset_msg_id, send_result.msg_id
            ))
        })?;
    Ok(EndTransactionRequestHeader {
        producer_group: group.to_string(),
        tran_state_table_offset: send_result.queue_offset,
        commit_log_offset,
        commit_or_rollback: state.commit_or_rollback(),
        from_transaction_check: false,
        msg_id: send_result.msg_id.clone(),
        transaction_id: Some(send_transaction_id(send_result).to_string()),
    })
}

/// END_TRANSACTION answering a check (Java's `processTransactionState`): offsets and
/// transaction id copied from the check, msgId = the half's `UNIQ_KEY` (else its msgId),
/// `fromTransactionCheck=true`.
pub fn end_header_for_check(group: &str, check: &TransactionCheck, state: LocalTransactionState) -> EndTransactionRequestHeader {
    EndTransactionRequestHeader {
        producer_group: group.to_string(),
        tran_state_table_offset: check.header.tran_state_table_offset,
        commit_log_offset: check.header.commit_log_offset,
        commit_or_rollback: state.commit_or_rollback(),
        from_transaction_check: true,
        msg_id: check.msg.transaction_id().to_string(),
        transaction_id: check.header.transaction_id.clone(),
    }
}

/// The END_TRANSACTION command; `remark` says why a listener failed (Java sends its
/// exception there).
pub fn end_transaction_command(header: &EndTransactionRequestHeader, remark: Option<String>) -> RemotingCommand {
    let mut cmd = RemotingCommand::request(rq::END_TRANSACTION).with_header(header);
    cmd.remark = remark;
    cmd
}

/// Decodes a CHECK_TRANSACTION_STATE: its header, the half in its body (the first stored
/// record; like Java, anything after it is ignored) and the half's `PGROUP`.
pub fn decode_check_request(cmd: &RemotingCommand) -> Result<TransactionCheck, ClientError> {
    let header: CheckTransactionStateRequestHeader = cmd.header()?;
    let bad_body = |e: &dyn std::fmt::Display| ClientError::Protocol(format!("CHECK_TRANSACTION_STATE body: {e}"));
    let first_len = StoredMessageView::parse(&cmd.body).map_err(|e| bad_body(&e))?.total_size();
    let broker_name = header.broker_name.clone().unwrap_or_default();
    let msg = decode_messages(&cmd.body.slice(..first_len), &broker_name)
        .map_err(|e| bad_body(&e))?
        .pop()
        .ok_or_else(|| bad_body(&"no message"))?;
    let group = match msg.property(keys::PGROUP) {
        Some(g) if !g.is_empty() => g.to_string(),
        _ => return Err(ClientError::Protocol(format!("CHECK_TRANSACTION_STATE: half message {} has no PGROUP", msg.msg_id))),
    };
    Ok(TransactionCheck { header, msg, group })
}

/// Runs a listener call; a panic becomes `Unknown` plus its message.
fn run_listener(call: impl FnOnce() -> LocalTransactionState) -> (LocalTransactionState, Option<String>) {
    match std::panic::catch_unwind(AssertUnwindSafe(call)) {
        Ok(state) => (state, None),
        Err(payload) => {
            let why = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "panic".to_string());
            (LocalTransactionState::Unknown, Some(why))
        }
    }
}

/// Writes `cmd` oneway to `addr` within `timeout` (connecting if needed).
async fn oneway_within(instance: &Rc<ClientInstance>, addr: &str, cmd: RemotingCommand, timeout: Duration) -> Result<(), ClientError> {
    futures_lite::future::or(instance.invoke_oneway(addr, cmd), async {
        glommio::timer::sleep(timeout).await;
        Err(ClientError::Timeout { addr: addr.to_string(), code: rq::END_TRANSACTION, timeout_ms: timeout.as_millis() as u64 })
    })
    .await
}

/// What the producer and its check hook share.
struct Inner {
    group: String,
    listener: Rc<dyn TransactionListener>,
    instance: Rc<ClientInstance>,
    end_mode: Cell<EndTransactionMode>,
    /// Budget of one END after a local execution (the producer's `send_timeout_ms`).
    end_timeout: Duration,
    checks_in_flight: Cell<usize>,
}

/// One check in progress; frees its place however the task ends (done, cancelled).
struct CheckSlot(Rc<Inner>);

impl Drop for CheckSlot {
    fn drop(&mut self) {
        self.0.checks_in_flight.set(self.0.checks_in_flight.get().saturating_sub(1));
    }
}

impl TransactionCheckHook for Inner {
    fn check_transaction_state(self: Rc<Self>, addr: &str, check: TransactionCheck) {
        let in_flight = self.checks_in_flight.get();
        if in_flight >= TRANSACTION_CHECKS_IN_FLIGHT_MAX {
            tracing::warn!(addr, group = %self.group, msg_id = %check.msg.msg_id, in_flight,
                "too many transaction checks in progress: check dropped (the broker checks again later)");
            return;
        }
        self.checks_in_flight.set(in_flight + 1);
        let slot = CheckSlot(self);
        let addr = addr.to_string();
        glommio::spawn_local(async move {
            let me = &slot.0;
            let (state, failure) = run_listener(|| me.listener.check_local_transaction(&check.msg));
            let header = end_header_for_check(&me.group, &check, state);
            let remark = failure.map(|why| format!("checkLocalTransactionState Exception: {why}"));
            tracing::debug!(addr, msg_id = %header.msg_id, ?state, "answering a transaction check");
            let cmd = end_transaction_command(&header, remark);
            if let Err(e) = oneway_within(&me.instance, &addr, cmd, Duration::from_millis(CHECK_END_TIMEOUT_MS)).await {
                tracing::warn!(addr, msg_id = %header.msg_id, ?state, error = %e, "answer to a transaction check not sent (the broker checks again later)");
            }
            drop(slot);
        })
        .detach();
    }
}

/// A producer of transactional messages; clones share one producer, listener and check
/// hook. Lives on one glommio executor (`Rc`, `!Send`), like `Producer`.
#[derive(Clone)]
pub struct TransactionProducer {
    producer: Producer,
    inner: Rc<Inner>,
}

impl TransactionProducer {
    /// Starts the producer on the current executor and registers `listener` to answer
    /// the broker's checks for `config.group`.
    pub async fn start(config: ProducerConfig, listener: Rc<dyn TransactionListener>) -> Result<Self, ClientError> {
        let group = config.group.clone();
        let end_timeout = Duration::from_millis(config.send_timeout_ms);
        let producer = Producer::start(config).await?;
        let inner = Rc::new(Inner {
            group,
            listener,
            instance: producer.instance().clone(),
            end_mode: Cell::new(EndTransactionMode::default()),
            end_timeout,
            checks_in_flight: Cell::new(0),
        });
        let hook: Weak<dyn TransactionCheckHook> = Rc::downgrade(&inner) as Weak<Inner>;
        producer.instance().register_transaction_checker(&inner.group, hook);
        Ok(Self { producer, inner })
    }

    /// The plain producer underneath (its non-transactional sends work as usual).
    pub fn producer(&self) -> &Producer {
        &self.producer
    }

    pub fn group(&self) -> &str {
        &self.inner.group
    }

    pub fn set_end_transaction_mode(&self, mode: EndTransactionMode) {
        self.inner.end_mode.set(mode);
    }

    /// Checks being answered right now.
    pub fn checks_in_flight(&self) -> usize {
        self.inner.checks_in_flight.get()
    }

    /// Sends `msg` as a half message (synchronously, with the producer's retries), runs
    /// the listener's `execute_local_transaction(msg, arg)` and ends the transaction with
    /// its answer. An error means the half was not stored (or its fate is unknown, e.g.
    /// a flush timeout: the broker's check then asks the listener about a transaction
    /// it never ran).
    pub async fn send_message_in_transaction(&self, msg: Message, arg: Option<&dyn Any>) -> Result<TransactionSendResult, ClientError> {
        let mut local = half_message(msg, &self.inner.group)?;
        let send_result = self.producer.send(local.clone()).await?;
        // The listener sees the ids the half was stored with. Ids from our generator are
        // hex; one a broker sent could hold a separator, so a refusal only skips it.
        for (name, value) in [(keys::UNIQ_KEY, send_result.msg_id.as_str()), (keys::TRANSACTION_ID, send_transaction_id(&send_result))] {
            if let Err(e) = local.set_property(name, value) {
                tracing::debug!(error = %e, "transaction id not shown to the listener");
            }
        }
        let (local_state, failure) = run_listener(|| self.inner.listener.execute_local_transaction(&local, arg));
        if let Some(why) = &failure {
            tracing::warn!(msg_id = %send_result.msg_id, why, "execute_local_transaction panicked: the transaction is unknown");
        }
        let remark = failure.map(|why| format!("executeLocalTransactionBranch exception: {why}"));
        let mode = match local_state {
            LocalTransactionState::Unknown => EndTransactionMode::Oneway,
            _ => self.inner.end_mode.get(),
        };
        let end = self.end(&send_result, local_state, remark, mode).await;
        if let Err(e) = &end {
            tracing::warn!(msg_id = %send_result.msg_id, ?local_state, error = %e, "local transaction done but END_TRANSACTION failed (the broker checks it later)");
        }
        Ok(TransactionSendResult { send_result, local_state, end })
    }

    /// Sends `msg` as a half message only: no local execution, no END. The transaction
    /// then ends through `end_transaction*` or the broker's check.
    pub async fn send_half_message(&self, msg: Message) -> Result<SendResult, ClientError> {
        self.producer.send(half_message(msg, &self.inner.group)?).await
    }

    /// END_TRANSACTION (oneway) for a half sent by this producer. Ok means written.
    pub async fn end_transaction(&self, send_result: &SendResult, state: LocalTransactionState) -> Result<(), ClientError> {
        self.end(send_result, state, None, EndTransactionMode::Oneway).await
    }

    /// END_TRANSACTION as a request: Ok when the broker answers SUCCESS, else its error.
    /// (A Java broker answers nothing to an `Unknown` END: this then times out.)
    pub async fn end_transaction_request(&self, send_result: &SendResult, state: LocalTransactionState) -> Result<(), ClientError> {
        self.end(send_result, state, None, EndTransactionMode::Request).await
    }

    /// Leaves the group on every broker and stops; checks in progress fail to answer
    /// (the broker asks another member of the group, or this one after a restart).
    pub async fn shutdown(&self) {
        self.producer.shutdown().await;
    }

    async fn end(&self, send_result: &SendResult, state: LocalTransactionState, remark: Option<String>, mode: EndTransactionMode) -> Result<(), ClientError> {
        let header = end_header_after_send(&self.inner.group, send_result, state)?;
        let addr = self.end_addr(send_result)?;
        let cmd = end_transaction_command(&header, remark);
        let instance = &self.inner.instance;
        match mode {
            EndTransactionMode::Oneway => oneway_within(instance, &addr, cmd, self.inner.end_timeout).await,
            EndTransactionMode::Request => {
                let r = instance.invoke_with_timeout(&addr, cmd, self.inner.end_timeout).await?;
                match r.code {
                    rs::SUCCESS => Ok(()),
                    code => Err(ClientError::from_response(&addr, code, r.remark.as_deref())),
                }
            }
        }
    }

    /// Where the half went: the master of its queue's broker (Java's
    /// `findBrokerAddressInPublish`), else the store host in its offsetMsgId.
    fn end_addr(&self, send_result: &SendResult) -> Result<String, ClientError> {
        self.inner
            .instance
            .broker_addr(&send_result.queue.broker_name)
            .or_else(|| decode_offset_msg_id(&send_result.offset_msg_id).map(|(host, _)| host.to_string()))
            .ok_or_else(|| ClientError::NoRoute { topic: send_result.queue.topic.clone() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::stored::StoredMessage;
    use crate::msgid::offset_msg_id;
    use crate::remoting::bodies::MessageQueue;
    use crate::remoting::command::ExtFields;
    use LocalTransactionState::*;

    /// Name/value pairs: properties or ext fields, in order.
    type Pairs<'a> = &'a [(&'a str, &'a str)];

    fn ext(pairs: &[(&str, &str)]) -> ExtFields {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    /// Makes the half of a message with `props`; expects its properties and sysFlag, or
    /// an error whose text contains the given words.
    fn check_half(props: Pairs, expected: Result<(Pairs, i32), &str>) {
        let mut m = Message::new("t", "b");
        for (n, v) in props {
            m.set_property(n, v).unwrap();
        }
        match (half_message(m, "PG"), expected) {
            (Ok(half), Ok((want, sys_flag))) => {
                assert_eq!(half.properties.iter().collect::<Vec<_>>(), want, "{props:?}");
                assert_eq!(send_sys_flag(&half.properties), sys_flag, "{props:?}");
            }
            (Err(e), Err(words)) => assert!(e.to_string().contains(words), "{props:?}: {e}"),
            (got, want) => panic!("{props:?}: got {got:?}, want {want:?}"),
        }
    }

    #[test]
    fn half_messages_carry_tran_msg_and_group_and_are_never_delayed() {
        check_half(&[], Ok((&[("TRAN_MSG", "true"), ("PGROUP", "PG")], TRANSACTION_PREPARED_TYPE)));
        check_half(&[("TAGS", "A"), ("KEYS", "k")], Ok((&[("TAGS", "A"), ("KEYS", "k"), ("TRAN_MSG", "true"), ("PGROUP", "PG")], 0x04)));
        // An application's own values are replaced, not duplicated.
        check_half(&[("TRAN_MSG", "false"), ("PGROUP", "other")], Ok((&[("TRAN_MSG", "true"), ("PGROUP", "PG")], 0x04)));
        // DELAY = 0 means no delay to a broker.
        check_half(&[("DELAY", "0")], Ok((&[("DELAY", "0"), ("TRAN_MSG", "true"), ("PGROUP", "PG")], 0x04)));
        check_half(&[("DELAY", "3")], Err("cannot be delayed or timed (DelayLevel(3))"));
        check_half(&[("TIMER_DELIVER_MS", "1700000000000")], Err("cannot be delayed or timed"));
        check_half(&[("TIMER_DELAY_SEC", "5")], Err("cannot be delayed or timed (AfterSecs(5))"));
        check_half(&[("TIMER_DELAY_MS", "5")], Err("cannot be delayed or timed (AfterMs(5))"));
        check_half(&[("TIMER_DELAY_MS", "soon")], Err("is not a time a broker accepts"));
    }

    fn check_sys_flag(tran_msg: Option<&str>, expected: i32) {
        let mut p = Properties::new();
        if let Some(v) = tran_msg {
            p.set(keys::TRAN_MSG, v).unwrap();
        }
        assert_eq!(send_sys_flag(&p), expected, "TRAN_MSG {tran_msg:?}");
        assert_eq!(expected & TRANSACTION_TYPE_MASK, expected);
    }

    #[test]
    fn sys_flag_follows_javas_parse_boolean_of_tran_msg() {
        check_sys_flag(None, TRANSACTION_NOT_TYPE);
        check_sys_flag(Some("true"), TRANSACTION_PREPARED_TYPE);
        check_sys_flag(Some("TRUE"), TRANSACTION_PREPARED_TYPE);
        check_sys_flag(Some("True"), TRANSACTION_PREPARED_TYPE);
        check_sys_flag(Some("false"), TRANSACTION_NOT_TYPE);
        check_sys_flag(Some("1"), TRANSACTION_NOT_TYPE);
        check_sys_flag(Some(" true"), TRANSACTION_NOT_TYPE);
        check_sys_flag(Some(""), TRANSACTION_NOT_TYPE);
    }

    fn sent(offset_msg_id: &str, transaction_id: Option<&str>) -> SendResult {
        SendResult {
            msg_id: "UNIQ1".into(),
            offset_msg_id: offset_msg_id.into(),
            queue: MessageQueue { broker_name: "broker-a".into(), queue_id: 2, topic: "t".into() },
            queue_offset: 17,
            transaction_id: transaction_id.map(str::to_string),
            region_id: "DefaultRegion".into(),
            trace_on: true,
        }
    }

    /// The END after a local execution, as the ext fields on the wire (or an error).
    fn check_end_after_send(result: &SendResult, state: LocalTransactionState, expected: Option<&[(&str, &str)]>) {
        let got = end_header_after_send("PG", result, state);
        match (got, expected) {
            (Ok(h), Some(want)) => {
                assert_eq!(h.to_ext(), ext(want), "{result:?} {state:?}");
                assert_eq!(EndTransactionRequestHeader::from_ext(&h.to_ext()), Ok(h), "round trip");
            }
            (Err(e), None) => assert!(e.to_string().contains("cannot end its transaction"), "{e}"),
            (got, want) => panic!("{result:?} {state:?}: got {got:?}, want {want:?}"),
        }
    }

    #[test]
    fn end_after_send_names_the_half_by_its_offsets() {
        let phys = 0x0100_0000_0000_1234u64; // shard 1 in the top byte
        let id = offset_msg_id(&"10.0.0.7:10911".parse().unwrap(), phys);
        let fields = |cor: &'static str, tx: &'static str| {
            vec![
                ("producerGroup", "PG"),
                ("tranStateTableOffset", "17"),
                ("commitLogOffset", "72057594037932596"),
                ("commitOrRollback", cor),
                ("fromTransactionCheck", "false"),
                ("msgId", "UNIQ1"),
                ("transactionId", tx),
            ]
        };
        check_end_after_send(&sent(&id, Some("TX9")), CommitMessage, Some(&fields("8", "TX9")));
        check_end_after_send(&sent(&id, Some("TX9")), RollbackMessage, Some(&fields("12", "TX9")));
        check_end_after_send(&sent(&id, Some("TX9")), Unknown, Some(&fields("0", "TX9")));
        // No (or an empty) transactionId from the broker: the UNIQ_KEY stands in.
        check_end_after_send(&sent(&id, None), CommitMessage, Some(&fields("8", "UNIQ1")));
        check_end_after_send(&sent(&id, Some("")), CommitMessage, Some(&fields("8", "UNIQ1")));
        // An IPv6 store host works as well.
        let v6 = offset_msg_id(&"[::1]:10911".parse().unwrap(), phys);
        check_end_after_send(&sent(&v6, None), CommitMessage, Some(&fields("8", "UNIQ1")));
        // Not an offsetMsgId, or an offset no broker writes (past i64): no END.
        check_end_after_send(&sent("UNIQ1", None), CommitMessage, None);
        check_end_after_send(&sent("", None), CommitMessage, None);
        check_end_after_send(&sent(&offset_msg_id(&"10.0.0.7:1".parse().unwrap(), u64::MAX), None), CommitMessage, None);
    }

    fn stored_half(props: &[(&str, &str)]) -> Vec<u8> {
        let mut p = Properties::new();
        for (n, v) in props {
            p.set(n, v).unwrap();
        }
        let m = StoredMessage {
            queue_id: 3,
            queue_offset: 40,
            physical_offset: 9_000,
            sys_flag: TRANSACTION_PREPARED_TYPE,
            body: b"order-42".to_vec(),
            topic: "orders".into(),
            properties: p.encode(),
            store_host: "127.0.0.1:10911".parse().unwrap(),
            ..Default::default()
        };
        let mut raw = Vec::new();
        m.encode_into(&mut raw);
        raw
    }

    fn check_request(body: Vec<u8>) -> RemotingCommand {
        let header = CheckTransactionStateRequestHeader {
            topic: Some("orders".into()),
            tran_state_table_offset: 55,
            commit_log_offset: 9_000,
            msg_id: Some("OFFSETID".into()),
            transaction_id: Some("TX7".into()),
            offset_msg_id: Some("OFFSETID".into()),
            broker_name: Some("broker-a".into()),
        };
        RemotingCommand::request(rq::CHECK_TRANSACTION_STATE).with_header(&header).with_body(body).oneway()
    }

    /// Decodes a check and answers it with `state`: expects (group, msgId, END fields),
    /// or an error containing the given words.
    fn check_answer(cmd: RemotingCommand, state: LocalTransactionState, expected: Result<(&str, Pairs), &str>) {
        match (decode_check_request(&cmd), expected) {
            (Ok(check), Ok((group, want))) => {
                assert_eq!(check.group, group);
                assert_eq!((check.msg.topic.as_str(), check.msg.queue_id, check.msg.broker_name.as_str()), ("orders", 3, "broker-a"));
                assert_eq!(&check.msg.body[..], b"order-42");
                assert_eq!(end_header_for_check(&check.group, &check, state).to_ext(), ext(want));
            }
            (Err(e), Err(words)) => assert!(e.to_string().contains(words), "{e}"),
            (got, want) => panic!("got {got:?}, want {want:?}"),
        }
    }

    #[test]
    fn checks_are_answered_with_the_checked_offsets() {
        let fields = |cor: &'static str, msg_id: &'static str| {
            vec![
                ("producerGroup", "PG"),
                ("tranStateTableOffset", "55"),
                ("commitLogOffset", "9000"),
                ("commitOrRollback", cor),
                ("fromTransactionCheck", "true"),
                ("msgId", msg_id),
                ("transactionId", "TX7"),
            ]
        };
        let half = |extra: &[(&str, &str)]| {
            let mut props = vec![("TRAN_MSG", "true"), ("PGROUP", "PG"), ("TRANSACTION_CHECK_TIMES", "1")];
            props.extend_from_slice(extra);
            stored_half(&props)
        };
        let uniq = [("UNIQ_KEY", "UNIQ7")];
        check_answer(check_request(half(&uniq)), CommitMessage, Ok(("PG", &fields("8", "UNIQ7"))));
        check_answer(check_request(half(&uniq)), RollbackMessage, Ok(("PG", &fields("12", "UNIQ7"))));
        check_answer(check_request(half(&uniq)), Unknown, Ok(("PG", &fields("0", "UNIQ7"))));
        // No UNIQ_KEY: the stored message's offset id names it (Java's getMsgId()).
        check_answer(check_request(half(&[])), CommitMessage, Ok(("PG", &fields("8", "7F00000100002A9F0000000000002328"))));
        // Bytes after the first record are ignored, as Java's decoder does.
        let mut trailing = half(&uniq);
        trailing.extend_from_slice(b"junk");
        check_answer(check_request(trailing), CommitMessage, Ok(("PG", &fields("8", "UNIQ7"))));
        // Refused: no group, a broken or empty body, a header without offsets.
        check_answer(check_request(stored_half(&[("UNIQ_KEY", "U")])), Unknown, Err("has no PGROUP"));
        check_answer(check_request(stored_half(&[("PGROUP", "")])), Unknown, Err("has no PGROUP"));
        let mut torn = half(&uniq);
        torn.truncate(torn.len() - 1);
        check_answer(check_request(torn), Unknown, Err("CHECK_TRANSACTION_STATE body: record truncated"));
        check_answer(check_request(Vec::new()), Unknown, Err("CHECK_TRANSACTION_STATE body"));
        let mut no_offsets = check_request(half(&uniq));
        no_offsets.ext_fields.remove("commitLogOffset");
        check_answer(no_offsets, Unknown, Err("commitLogOffset"));
    }

    fn check_listener(call: impl FnOnce() -> LocalTransactionState, expected: (LocalTransactionState, Option<&str>)) {
        let (state, why) = run_listener(call);
        assert_eq!((state, why.as_deref()), expected);
    }

    #[test]
    fn a_panicking_listener_counts_as_unknown() {
        check_listener(|| CommitMessage, (CommitMessage, None));
        check_listener(|| RollbackMessage, (RollbackMessage, None));
        check_listener(|| panic!("db down"), (Unknown, Some("db down")));
        check_listener(|| panic!("order {} failed", 7), (Unknown, Some("order 7 failed")));
        check_listener(|| std::panic::panic_any(42u8), (Unknown, Some("panic")));
    }

    #[test]
    fn end_commands_carry_the_header_and_the_failure() {
        let h = end_header_after_send("PG", &sent(&offset_msg_id(&"10.0.0.7:1".parse().unwrap(), 5), None), CommitMessage).unwrap();
        let cmd = end_transaction_command(&h, Some("executeLocalTransactionBranch exception: db down".into()));
        assert_eq!(cmd.code, 37);
        assert!(!cmd.is_oneway(), "the connection marks oneway when it sends");
        assert_eq!(cmd.header::<EndTransactionRequestHeader>(), Ok(h));
        assert_eq!(cmd.remark.as_deref(), Some("executeLocalTransactionBranch exception: db down"));
    }
}
