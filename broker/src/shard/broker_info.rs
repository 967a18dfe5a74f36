//! GET_BROKER_RUNTIME_INFO, GET_BROKER_CONFIG and UPDATE_BROKER_CONFIG: what the broker
//! reports about itself and the settings an operator may change while it runs.
//!
//! Runtime info is per shard and merged where the request arrived: counters summed,
//! TPS texts summed component by component, histograms bucket by bucket, a few values
//! as their maximum, and some also per shard (`shard.<id>.<key>`). In shard route mode
//! a shard-broker answers its own figures and the host's merged ones as `host.<key>`.

use ringmq_client::remoting::codes::{request_code as rq, response_code as rs};
use ringmq_client::remoting::command::RemotingCommand;
use std::collections::BTreeMap;
use std::rc::Rc;
use super::admin::*;
use super::{error_response, Shard};

/// Runtime-info counters that are summed over shards.
const SUMMED_COUNTERS: [&str; 34] = [
    "dispatchBehindBytes",
    "putMessageTimesTotal",
    "getMessageTransferedMsgCount",
    "requestsTotal",
    "forwardedOut",
    "forwardedIn",
    "suspendedPulls",
    "suspendedPullsRefusedTotal",
    "readErrorsTotal",
    "transactionOpen",
    "transactionHalfTotal",
    "transactionCommitTotal",
    "transactionRollbackTotal",
    "transactionCheckTotal",
    "transactionDiscardTotal",
    "transactionDuplicateEndTotal",
    "transactionExpiredTotal",
    "transactionCheckNoProducerTotal",
    "haSlaves",
    "haSlaveBehindBytes",
    "haBehindBytes",
    "storeMessagesTotal",
    "msgPutTotalTodayNow",
    "msgGetTotalTodayNow",
    "msgPutTotalTodayMorning",
    "msgPutTotalYesterdayMorning",
    "msgGetTotalTodayMorning",
    "msgGetTotalYesterdayMorning",
    "putMessageSizeTotal",
    "remainHowManyDataToFlush",
    "sendLatencySumUs",
    "scrubbedBytesTotal",
    "scrubCorruptRecordsTotal",
    "checkpointLagBytes",
];

/// Where shard route mode's runtime info puts the host's merged figures: a tool that
/// sums shard-brokers never reads them as the shard-broker's own.
pub const HOST_KEY_PREFIX: &str = "host.";

/// Runtime info "a b c" TPS texts, summed component by component over the shards.
const TPS_VALUES: [&str; 4] = ["putTps", "getTransferredTps", "getTransferedTps", "getTotalTps"];

/// Runtime info values that are the maximum over the shards.
const MAXED_VALUES: [&str; 2] = ["haBehindMs", "pageCacheLockTimeMills"];

/// Runtime info values that are the minimum over the shards that have one (`-1`, none,
/// is left out; `-1` only when no shard has a value).
const MIN_VALUES: [&str; 1] = ["earliestMessageTimeStamp"];

/// Runtime info histograms ("c0 c1 ... cN" counts per `latencyBucketBoundsUs` bucket, the
/// last one unbounded), summed bucket by bucket over the shards.
const BUCKET_VALUES: [&str; 1] = ["sendLatencyBucketsUs"];

/// Values the merged answer also carries per shard, as `shard.<id>.<key>`, so an
/// operator (the dashboard's cluster page) sees how load spreads over the shards. The
/// merged answer has `shardCount` × these extra keys; a local part has none.
const PER_SHARD_KEYS: [&str; 9] = [
    "putMessageTimesTotal",
    "getMessageTransferedMsgCount",
    "storeMessagesTotal",
    "putMessageSizeTotal",
    "remainHowManyDataToFlush",
    "commitLogDiskRatio",
    "suspendedPulls",
    "forwardedIn",
    "readErrorsTotal",
];

/// The request codes whose latency is runtime info's send latency.
const SEND_CODES: [i32; 3] = [rq::SEND_MESSAGE, rq::SEND_MESSAGE_V2, rq::SEND_BATCH_MESSAGE];

impl<R: crate::rt::Runtime> Shard<R> {
    /// GET_BROKER_RUNTIME_INFO: a `{"table":{...}}` of string values, as Java's
    /// `KVTable`; `shardId` names the shard that answered. Host route mode: counters
    /// merged over every shard (asked over the mesh with a scoped request), and some
    /// also per shard as `shard.<id>.<key>`. Shard route mode: the shard-broker's own
    /// figures (tools sum shard-brokers as they sum brokers), and the host's merged
    /// counters only under `host.<key>`.
    pub(super) async fn handle_runtime_info(self: &Rc<Self>, cmd: &RemotingCommand) -> RemotingCommand {
        let local = self.runtime_table();
        let mut table: BTreeMap<String, String> = if cmd.ext(super::admin::LOCAL_ONLY_EXT).is_some() {
            local.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
        } else {
            let others = match self.gather(cmd, "1").await {
                Ok(others) => others,
                Err(r) => return r,
            };
            let merged = merge_runtime_tables(self.place.id, local.clone(), &others);
            match self.route_mode() {
                crate::config::RouteMode::Host => merged,
                crate::config::RouteMode::Shard => {
                    let mut own: BTreeMap<String, String> = local.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
                    for key in SUMMED_COUNTERS.iter().chain(TPS_VALUES.iter()).chain(MAXED_VALUES.iter()).chain(BUCKET_VALUES.iter()).chain(MIN_VALUES.iter()) {
                        if let Some(v) = merged.get(*key) {
                            own.insert(format!("{HOST_KEY_PREFIX}{key}"), v.clone());
                        }
                    }
                    own
                }
            }
        };
        table.insert("routeMode".to_string(), if self.route_mode() == crate::config::RouteMode::Shard { "shard" } else { "host" }.to_string());
        let body = serde_json::json!({ "table": table });
        let mut r = cmd.create_response(rs::SUCCESS, None);
        r.body = body.to_string().into_bytes().into();
        r
    }

    fn runtime_table(&self) -> BTreeMap<&'static str, String> {
        let mut table = BTreeMap::new();
        let c = self.counters();
        table.insert("brokerVersionDesc", "RingMQ ".to_string() + env!("CARGO_PKG_VERSION"));
        table.insert("shardCount", self.place.count.to_string());
        table.insert("shardId", self.place.id.to_string());
        table.insert("bootTimestamp", self.stats.started_ms().to_string());
        table.insert("commitLogMinOffset", self.store.log_start().to_string());
        table.insert("commitLogMaxOffset", self.store.write_offset().to_string());
        table.insert("commitLogFlushedOffset", self.store.flushed_offset().to_string());
        table.insert("putMessageTimesTotal", c.messages_put.get().to_string());
        // RocketMQ's StoreStatsService figures (mqadmin brokerStatus / clusterList).
        {
            let stats = self.stats.call_stats();
            table.insert("putTps", stats.tps_text(true));
            let got = stats.tps_text(false);
            table.insert("getTransferredTps", got.clone());
            // Older mqadmin (clusterList) reads this spelling.
            table.insert("getTransferedTps", got);
            // Java's getFoundTps + getMissTps: pull lookups of the store per second.
            table.insert("getTotalTps", stats.lookups_tps_text());
            let ((put_today, got_today), (put_yesterday, got_yesterday)) = stats.mornings();
            table.insert("msgPutTotalTodayMorning", put_today.to_string());
            table.insert("msgPutTotalYesterdayMorning", put_yesterday.to_string());
            table.insert("msgGetTotalTodayMorning", got_today.to_string());
            table.insert("msgGetTotalYesterdayMorning", got_yesterday.to_string());
        }
        table.insert("msgPutTotalTodayNow", c.messages_put.get().to_string());
        table.insert("msgGetTotalTodayNow", c.messages_pulled.get().to_string());
        table.insert("putMessageSizeTotal", c.bytes_put.get().to_string());
        // Send latency (request arrival on this shard's socket to answer, forwarding
        // included), cumulative since start: a poller derives per-interval percentiles
        // from the difference of two samples, as Prometheus does with histograms.
        {
            let sends = self.stats.latency_of(&SEND_CODES);
            table.insert("sendLatencyBucketsUs", sends.counts.iter().map(u64::to_string).collect::<Vec<_>>().join(" "));
            table.insert("sendLatencySumUs", sends.sum_us.to_string());
            table.insert("latencyBucketBoundsUs", crate::metrics::LATENCY_BOUNDS_US.iter().map(u64::to_string).collect::<Vec<_>>().join(" "));
        }
        table.insert("commitLogDiskRatio", format!("{:.4}", self.store.stats().disk_used_permille as f64 / 1000.0));
        table.insert("remainHowManyDataToFlush", self.store.dirty_bytes().to_string());
        table.insert("brokerActive", "true".to_string());
        let up_s = (self.now_ms() - self.stats.started_ms()).max(0) / 1000;
        table.insert("runtime", format!("[ {} days, {} hours, {} minutes, {} seconds ]", up_s / 86_400, up_s / 3_600 % 24, up_s / 60 % 60, up_s % 60));
        table.insert("getMessageTransferedMsgCount", c.messages_pulled.get().to_string());
        table.insert("requestsTotal", c.requests.get().to_string());
        table.insert("forwardedOut", c.forwarded_out.get().to_string());
        table.insert("forwardedIn", c.forwarded_in.get().to_string());
        table.insert("consumerGroups", self.clients.consumers.borrow().group_count().to_string());
        table.insert("producerGroups", self.clients.consumers.borrow().producer_group_count().to_string());
        table.insert("flushDiskType", format!("{:?}", self.config().store.flush_mode));
        table.insert("refusingWrites", self.store.refusing_writes().to_string());
        table.insert("suspendedPulls", self.waiters.suspended().to_string());
        table.insert("suspendedPullsRefusedTotal", self.waiters.refused_total().to_string());
        table.insert("readErrorsTotal", self.store.stats().read_errors.to_string());
        table.insert("scrubbedBytesTotal", self.store.stats().scrubbed_bytes.to_string());
        table.insert("scrubCorruptRecordsTotal", self.store.stats().scrub_corrupt_records.to_string());
        table.insert("checkpointLagBytes", self.store.checkpoint_lag_bytes().to_string());
        let t = self.txn_counters();
        table.insert("transactionOpen", self.open_transactions().to_string());
        table.insert("transactionHalfTotal", t.halves.get().to_string());
        table.insert("transactionCommitTotal", t.commits.get().to_string());
        table.insert("transactionRollbackTotal", t.rollbacks.get().to_string());
        table.insert("transactionCheckTotal", t.checks.get().to_string());
        table.insert("transactionDiscardTotal", t.discards.get().to_string());
        table.insert("transactionDuplicateEndTotal", t.duplicate_ends.get().to_string());
        table.insert("transactionExpiredTotal", t.expired.get().to_string());
        table.insert("transactionCheckNoProducerTotal", t.checks_without_producer.get().to_string());
        // Replication: on a master, its slaves and how far the furthest behind is (bytes
        // of this shard's log not yet confirmed received); on a slave, how far it is
        // behind its master's end as last heard.
        let end = self.store.write_offset();
        let slaves = self.ha_slaves();
        table.insert("haSlaves", slaves.len().to_string());
        table.insert("haSlaveBehindBytes", slaves.iter().map(|(_, p)| end.saturating_sub(p.received)).max().unwrap_or(0).to_string());
        let s = self.ha_slave_state();
        let behind = if s.connected { crate::store::engine::local_of(s.master_end_phys).saturating_sub(end) } else { 0 };
        table.insert("haBehindBytes", behind.to_string());
        // How stale a slave's view is: the age of the newest record it holds while its
        // master has more (master's store clock vs this host's: same host in the
        // benchmarks; across hosts it includes their clock difference).
        let behind_ms = if behind > 0 && s.newest_store_ms > 0 { (self.now_ms() - s.newest_store_ms).max(0) } else { 0 };
        table.insert("haBehindMs", behind_ms.to_string());
        table.insert("storeMessagesTotal", self.store.messages_total().to_string());
        // Java's getEarliestMessageTime: store time of the CommitLog's first record, -1
        // when there is none (or it could not be read).
        table.insert("earliestMessageTimeStamp", self.store.earliest_message_time().unwrap_or(-1).to_string());
        // Java's reput lag (CommitLog bytes not yet in a ConsumeQueue): `Store::put` and
        // `append_replicated` write the ConsumeQueue entry (and the index's, or its
        // pending hand-off) in the same call that appends the record, so no byte of
        // this log is ever undispatched.
        table.insert("dispatchBehindBytes", "0".to_string());
        // Java's lockTimeMills: how long the put in progress has held the CommitLog's
        // put lock, 0 when none (its SYSTEM_BUSY "[PC_SYNCHRONIZED]" gate). An append
        // here is one call on this shard's thread that never awaits (`Store::put`), so
        // none is in progress while this table is built; and a group commit in flight
        // holds no appends back (they go on into the tail), so its age is not this
        // lock's. A stalled flush shows as `remainHowManyDataToFlush` instead.
        table.insert("pageCacheLockTimeMills", "0".to_string());
        table.insert("haMasterConnected", s.connected.to_string());
        table
    }

    /// GET_BROKER_CONFIG: the configuration as RocketMQ broker.conf properties (Java's
    /// `properties2String`), and the `version` DataVersion Java sends with it (settings
    /// never change at runtime: counter 0, stamped at start-up).
    pub(super) fn handle_get_broker_config(&self, cmd: &RemotingCommand) -> RemotingCommand {
        let mut text = String::new();
        for (k, v) in self.config().to_broker_conf() {
            text.push_str(&format!("{k}={v}\n"));
        }
        text.push_str(&format!("shardCount={}\n", self.place.count));
        let mut r = cmd.create_response(rs::SUCCESS, None);
        let version = ringmq_client::remoting::route::DataVersion { counter: 0, state_version: 0, timestamp: self.stats.started_ms() };
        r.ext_fields.insert("version".into(), String::from_utf8_lossy(&ringmq_client::remoting::json::to_json(&version)).into_owned());
        r.body = text.into_bytes().into();
        r
    }

    /// UPDATE_BROKER_CONFIG (on the metadata owner): runtime keys (every key broker.conf
    /// maps but `config::START_UP_CONF_KEYS`) are checked over the running configuration,
    /// applied on every shard before the answer (each shard's store takes its part,
    /// `Store::set_runtime_config`), and kept for the next start; a body naming a
    /// start-up key changes nothing and is refused naming it and why, with NO_PERMISSION
    /// (Java's code for a key in its black list). A new `brokerPermission` or
    /// `namesrvAddr` is told to the NameServers at once. Logged with the caller.
    pub(super) async fn handle_update_broker_config(self: &Rc<Self>, cmd: &RemotingCommand) -> RemotingCommand {
        let caller = caller_of(cmd).to_string();
        let body = String::from_utf8_lossy(&cmd.body).into_owned();
        let pairs = match crate::config::parse_runtime_update(&body) {
            Ok(p) => p,
            Err(e) => {
                tracing::info!(caller, error = %e, "broker config update refused");
                let code = match e {
                    crate::config::RuntimeUpdateError::NotRuntime { .. } => rs::NO_PERMISSION,
                    crate::config::RuntimeUpdateError::Empty | crate::config::RuntimeUpdateError::Syntax(_) => rs::INVALID_PARAMETER,
                    crate::config::RuntimeUpdateError::BadValue { .. } | crate::config::RuntimeUpdateError::Invalid { .. } => rs::SYSTEM_ERROR,
                };
                return error_response(cmd, code, e.to_string());
            }
        };
        let Some(meta) = &self.meta.stores else {
            crate::fatal::fatal(&format!("UPDATE_BROKER_CONFIG routed to shard {}, not the metadata owner", self.place.id));
        };
        let writer = match meta.lock.lock() {
            Ok(w) => w.await,
            Err(e) => return error_response(cmd, rs::SYSTEM_BUSY, format!("broker config: {e}")),
        };
        // Values that pass alone may not together, or not over what runs now.
        if let Err(e) = self.config().runtime_updated(&pairs) {
            tracing::info!(caller, error = %e, "broker config update refused");
            return error_response(cmd, rs::SYSTEM_ERROR, e.to_string());
        }
        // Kept first: a crash after this applies the change at the next start.
        let store = crate::meta::snapshot::SnapshotStore::new(self.rt.disk(), self.config().store_root.join("config"), super::RUNTIME_CONFIG_SNAPSHOT);
        let mut kept: Vec<(String, String)> = match store.load().await {
            Ok(Some(b)) => crate::config::parse_runtime_update(&String::from_utf8_lossy(&b)).unwrap_or_default(),
            Ok(None) => Vec::new(),
            Err(e) => return error_response(cmd, rs::SYSTEM_ERROR, format!("runtime config could not be read: {e}")),
        };
        for (k, v) in &pairs {
            kept.retain(|(kk, _)| kk != k);
            kept.push((k.clone(), v.clone()));
        }
        let text: String = kept.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
        if let Err(e) = store.save(text.as_bytes()).await {
            return error_response(cmd, rs::SYSTEM_ERROR, format!("runtime config could not be saved: {e}"));
        }
        let before = self.config();
        let event = super::mesh::ShardEvent::RuntimeConfig { pairs: pairs.clone() };
        self.mesh.broadcast_and_wait(event.clone()).await;
        self.apply_event(event);
        let after = self.config();
        drop(writer);
        tracing::info!(caller, keys = ?pairs, "broker config updated at runtime on every shard");
        let perm_changed = before.broker_permission != after.broker_permission;
        if perm_changed {
            // The NameServers take a registration's topic perms only when its data
            // version moved (Java bumps it here too).
            let now = self.now_ms();
            if let Err((code, e)) = self.update_topics(|t| {
                t.touch(now);
                Ok(())
            })
            .await
            {
                return error_response(cmd, code, e);
            }
        }
        // New NameServers learn of the broker now, not at the next round.
        if perm_changed || before.namesrv_addrs != after.namesrv_addrs {
            let shard = self.clone();
            self.rt.spawn(async move { shard.register_now().await });
        }
        cmd.create_response(rs::SUCCESS, None)
    }
}

/// Runtime info merged over the shards: this shard's `local` table and the others'
/// parts (`{"table":{...}}` each): counters summed, TPS texts and histograms added
/// component by component, maxima and minima kept, and `PER_SHARD_KEYS` also as
/// `shard.<id>.<key>`.
fn merge_runtime_tables(own_id: usize, mut table: BTreeMap<&'static str, String>, others: &[serde_json::Value]) -> BTreeMap<String, String> {
    let mut per_shard = BTreeMap::new();
    for key in PER_SHARD_KEYS {
        per_shard.insert(format!("shard.{own_id}.{key}"), table.get(key).cloned().unwrap_or_default());
    }
    for v in others {
        let id = v["table"]["shardId"].as_str().unwrap_or("?").to_string();
        for key in PER_SHARD_KEYS {
            per_shard.insert(format!("shard.{id}.{key}"), v["table"][key].as_str().unwrap_or_default().to_string());
        }
        for key in SUMMED_COUNTERS {
            let theirs = v["table"][key].as_str().and_then(|s| s.parse::<u64>().ok()).unwrap_or(0);
            let ours = table.get(key).and_then(|s| s.parse::<u64>().ok()).unwrap_or(0);
            table.insert(key, (ours + theirs).to_string());
        }
        for key in TPS_VALUES {
            let theirs = v["table"][key].as_str().unwrap_or_default();
            let ours = table.get(key).cloned().unwrap_or_default();
            table.insert(key, crate::metrics::stats::add_tps_text(&ours, theirs));
        }
        for key in MAXED_VALUES {
            let theirs = v["table"][key].as_str().and_then(|s| s.parse::<u64>().ok()).unwrap_or(0);
            let ours = table.get(key).and_then(|s| s.parse::<u64>().ok()).unwrap_or(0);
            table.insert(key, ours.max(theirs).to_string());
        }
        for key in BUCKET_VALUES {
            let theirs = v["table"][key].as_str().unwrap_or_default();
            let ours = table.get(key).cloned().unwrap_or_default();
            table.insert(key, crate::metrics::stats::add_counts_text(&ours, theirs));
        }
        for key in MIN_VALUES {
            let theirs = v["table"][key].as_str().and_then(|s| s.parse::<i64>().ok()).unwrap_or(-1);
            let ours = table.get(key).and_then(|s| s.parse::<i64>().ok()).unwrap_or(-1);
            let min = [ours, theirs].into_iter().filter(|&t| t >= 0).min().unwrap_or(-1);
            table.insert(key, min.to_string());
        }
    }
    let mut table: BTreeMap<String, String> = table.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
    table.extend(per_shard);
    table
}
