//! EndTransaction (docs/design/pop-grpc.md §3.3; Apache
//! `proxy/grpc/v2/transaction/EndTransactionActivity.java`, `TransactionService`): the
//! front end remembers, per (producer group, transaction id), where each half it stored
//! lives (broker, queue offset, CommitLog offset) — a gRPC client only sends the ids
//! back — and builds END_TRANSACTION from it. Check-backs (WP7) add entries the same way.
//!
//! Invariants: at most `GRPC_TRANSACTIONS_MAX` entries, each kept at most
//! `TRANSACTION_DATA_KEEP_MS` (an unknown id after that is INVALID_TRANSACTION_ID, and
//! the broker's check-back re-adds it); an entry is removed when its END is answered.

use crate::backend::Target;
use crate::metadata::ClientMeta;
use crate::pb::{self, Code, TransactionResolution, TransactionSource};
use crate::route::validate_topic;
use crate::server::Frontend;
use crate::status::{self, GrpcError};
use ringmq_client::msgid::decode_offset_msg_id;
use ringmq_client::remoting::codes::request_code as rq;
use ringmq_client::remoting::headers::EndTransactionRequestHeader;
use ringmq_client::remoting::RemotingCommand;
use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};

/// Most open transactions remembered.
pub const GRPC_TRANSACTIONS_MAX: usize = 65_536;
/// How long a half's location is kept without its END.
pub const TRANSACTION_DATA_KEEP_MS: i64 = 3_600_000;
/// `MessageSysFlag` END types.
pub const TRANSACTION_NOT_TYPE: i32 = 0;
pub const TRANSACTION_COMMIT_TYPE: i32 = 0x8;
pub const TRANSACTION_ROLLBACK_TYPE: i32 = 0xC;

/// Where a half message lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnData {
    pub broker_name: String,
    pub tran_state_table_offset: i64,
    pub commit_log_offset: i64,
}

impl TxnData {
    /// From a stored half's send answer entry: its transaction id is the offsetMsgId.
    pub fn of_half(broker: &str, entry: &pb::SendResultEntry) -> Option<Self> {
        let (_, phys) = decode_offset_msg_id(&entry.transaction_id)?;
        Some(Self { broker_name: broker.to_string(), tran_state_table_offset: entry.offset, commit_log_offset: i64::try_from(phys).ok()? })
    }
}

/// Open transactions by (producer group, transaction id), oldest first for eviction.
#[derive(Debug, Default)]
pub struct TxnTable {
    map: HashMap<(String, String), (TxnData, i64)>,
    order: VecDeque<((String, String), i64)>,
}

impl TxnTable {
    pub fn insert(&mut self, group: &str, transaction_id: &str, data: TxnData, now_ms: i64) {
        self.expire(now_ms);
        while self.map.len() >= GRPC_TRANSACTIONS_MAX {
            let Some((key, _)) = self.order.pop_front() else { break };
            self.map.remove(&key);
        }
        let key = (group.to_string(), transaction_id.to_string());
        self.order.push_back((key.clone(), now_ms));
        self.map.insert(key, (data, now_ms));
    }

    /// Removes and returns an entry that has not expired.
    pub fn take(&mut self, group: &str, transaction_id: &str, now_ms: i64) -> Option<TxnData> {
        self.expire(now_ms);
        self.map.remove(&(group.to_string(), transaction_id.to_string())).map(|(d, _)| d)
    }

    fn expire(&mut self, now_ms: i64) {
        while let Some((key, at)) = self.order.front() {
            let current = self.map.get(key).map(|(_, a)| *a);
            if current != Some(*at) {
                // Re-inserted or taken since: this queue entry is stale.
                self.order.pop_front();
                continue;
            }
            if now_ms - at < TRANSACTION_DATA_KEEP_MS {
                break;
            }
            let key = key.clone();
            self.order.pop_front();
            self.map.remove(&key);
        }
        // Stale queue entries are bounded by the live ones they shadow.
        if self.order.len() > 2 * GRPC_TRANSACTIONS_MAX {
            let map = &self.map;
            self.order.retain(|(k, at)| map.get(k).is_some_and(|(_, a)| a == at));
        }
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

/// The END_TRANSACTION request for a resolution of a remembered half.
pub fn end_request(meta: &ClientMeta, producer_group: &str, data: &TxnData, req: &pb::EndTransactionRequest) -> RemotingCommand {
    let commit_or_rollback = match TransactionResolution::try_from(req.resolution).unwrap_or(TransactionResolution::Unspecified) {
        TransactionResolution::Commit => TRANSACTION_COMMIT_TYPE,
        TransactionResolution::Rollback => TRANSACTION_ROLLBACK_TYPE,
        TransactionResolution::Unspecified => TRANSACTION_NOT_TYPE,
    };
    let header = EndTransactionRequestHeader {
        producer_group: producer_group.to_string(),
        tran_state_table_offset: data.tran_state_table_offset,
        commit_log_offset: data.commit_log_offset,
        commit_or_rollback,
        from_transaction_check: req.source == TransactionSource::SourceServerCheck as i32,
        msg_id: req.message_id.clone(),
        transaction_id: Some(req.transaction_id.clone()),
    };
    let mut cmd = RemotingCommand::request(rq::END_TRANSACTION).with_header(&header);
    cmd.language = Cow::Borrowed(meta.language);
    cmd
}

/// EndTransaction.
pub async fn end_transaction(fe: &Frontend, meta: &ClientMeta, req: pb::EndTransactionRequest) -> Result<pb::EndTransactionResponse, GrpcError> {
    let topic = meta.resource_name(&req.topic.clone().unwrap_or_default());
    validate_topic(&topic)?;
    if req.transaction_id.trim().is_empty() {
        return Err(GrpcError::new(Code::InvalidTransactionId, "transaction id cannot be empty"));
    }
    let producer_group = topic;
    let data = fe.take_transaction(&producer_group, &req.transaction_id).ok_or_else(|| GrpcError::new(Code::InvalidTransactionId, "cannot found transaction data"))?;
    let answer = fe.call(Target::Broker(data.broker_name.clone()), end_request(meta, &producer_group, &data, &req)).await?;
    status::expect_success(answer)?;
    Ok(pb::EndTransactionResponse { status: Some(status::ok()) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(o: i64) -> TxnData {
        TxnData { broker_name: "b".into(), tran_state_table_offset: o, commit_log_offset: o * 100 }
    }

    #[test]
    fn table_keeps_and_expires() {
        let mut t = TxnTable::default();
        t.insert("g", "t1", data(1), 0);
        t.insert("g", "t2", data(2), 10);
        assert_eq!(t.take("g", "t1", 5), Some(data(1)));
        assert_eq!(t.take("g", "t1", 5), None, "taken once");
        assert_eq!(t.take("other", "t2", 5), None, "keyed by group too");
        assert_eq!(t.take("g", "t2", 10 + TRANSACTION_DATA_KEEP_MS), None, "expired");
        t.insert("g", "t3", data(3), 0);
        t.insert("g", "t3", data(4), TRANSACTION_DATA_KEEP_MS - 1);
        assert_eq!(t.take("g", "t3", TRANSACTION_DATA_KEEP_MS + 1), Some(data(4)), "the re-insert's time counts");
        assert!(t.is_empty());
    }

    #[test]
    fn table_is_bounded() {
        let mut t = TxnTable::default();
        for i in 0..GRPC_TRANSACTIONS_MAX + 10 {
            t.insert("g", &i.to_string(), data(i as i64), 0);
        }
        assert_eq!(t.len(), GRPC_TRANSACTIONS_MAX);
        assert_eq!(t.take("g", "0", 0), None, "the oldest went first");
        assert!(t.take("g", &(GRPC_TRANSACTIONS_MAX + 9).to_string(), 0).is_some());
    }
}
