//! RocketMQ 5 controller-mode subcommands (mqadmin's `tools/command/controller`, `ha`
//! and `broker/GetBrokerEpochSubCommand`): getControllerMetaData, getControllerConfig,
//! getSyncStateSet, getBrokerEpoch, electMaster, cleanBrokerMetadata. Names, flags and
//! the printed lines are mqadmin's (`#Key<TAB>value`), `--json` prints one document.
//!
//! Requests that only the controller leader serves (1002, 1006, 1011) go where
//! CONTROLLER_GET_METADATA_INFO (1005) at `-a` says the leader is, as Apache's
//! `MQClientAPIImpl` does; a `-a` that names no leader is an error, never a guess.
//!
//! Invariant: argument errors (ids that are not numbers, `cleanBrokerMetadata` without
//! `-c` or `-l`, neither `-b` nor `-c`) are refused before any request.

use crate::commands::{call, render, table, Common, Outcome};
use clap::Subcommand;
use ringmq_client::instance::ClientInstance;
use ringmq_client::remoting::bodies::JsonBody;
use ringmq_client::remoting::codes::request_code as rq;
use ringmq_client::remoting::command::RemotingCommand;
use ringmq_client::remoting::controller::{
    BrokerReplicasInfo, CleanControllerBrokerDataRequestHeader, ElectMasterRequestHeader, ElectMasterResponseBody, ElectMasterResponseHeader,
    ElectionHistoryBody, EpochEntryCache, GetMetaDataResponseHeader, ReplicaIdentity, RINGMQ_CONTROLLER_GET_ELECTION_HISTORY,
};
use ringmq_client::remoting::route::ClusterInfo;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::rc::Rc;
use std::time::Duration;

/// `-i` rounds when none is given (mqadmin's `flushSecond`).
const INTERVAL_SECS_DEFAULT: u64 = 3;

#[derive(Subcommand, Debug)]
#[allow(non_camel_case_types)]
#[command(rename_all = "verbatim")]
pub enum ControllerCommand {
    /// Get controller cluster's metadata.
    getControllerMetaData {
        #[command(flatten)]
        common: Common,
        /// The address of controller.
        #[arg(short = 'a', long = "controllerAddress")]
        controller: String,
    },
    /// Get the configuration of each controller (`-a host:port;host:port`).
    getControllerConfig {
        #[command(flatten)]
        common: Common,
        #[arg(short = 'a', long = "controllerAddress")]
        controller: String,
    },
    /// Fetch syncStateSet for target brokers (`-b` one broker set, `-c` every set of a
    /// cluster, which needs `-n`).
    getSyncStateSet {
        #[command(flatten)]
        common: Common,
        #[arg(short = 'a', long = "controllerAddress")]
        controller: String,
        #[arg(short = 'c', long = "clusterName")]
        cluster: Option<String>,
        #[arg(short = 'b', long = "brokerName")]
        broker_name: Option<String>,
        /// Print again every this many seconds (3 when given empty), until stopped.
        #[arg(short = 'i', long = "interval", num_args = 0..=1, default_missing_value = "")]
        interval: Option<String>,
        /// (RingMQ) also print each set's election history and epoch starts.
        #[arg(long = "history")]
        history: bool,
    },
    /// Fetch broker epoch entries (from every broker of the set or cluster; needs `-n`).
    getBrokerEpoch {
        #[command(flatten)]
        common: Common,
        #[arg(short = 'c', long = "clusterName")]
        cluster: Option<String>,
        #[arg(short = 'b', long = "brokerName")]
        broker_name: Option<String>,
        #[arg(short = 'i', long = "interval", num_args = 0..=1, default_missing_value = "")]
        interval: Option<String>,
    },
    /// Re-elect the specified broker as master.
    electMaster {
        #[command(flatten)]
        common: Common,
        #[arg(short = 'a', long = "controllerAddress")]
        controller: String,
        /// The clusterName of broker.
        #[arg(short = 'c', long = "clusterName")]
        cluster: String,
        /// The broker name of the replicas that require to be manipulated.
        #[arg(long = "bn", alias = "brokerName")]
        broker_name: String,
        /// The id of the broker which requires to become master.
        #[arg(short = 'b', long = "brokerId")]
        broker_id: i64,
    },
    /// Clean metadata of broker on controller.
    cleanBrokerMetadata {
        #[command(flatten)]
        common: Common,
        #[arg(short = 'a', long = "controllerAddress")]
        controller: String,
        /// The brokerController id list to clean, e.g. `1;2;3` (every replica when left out).
        #[arg(short = 'b', long = "brokerControllerIdsToClean")]
        ids: Option<String>,
        #[arg(long = "bn", alias = "brokerName")]
        broker_name: String,
        #[arg(short = 'c', long = "clusterName")]
        cluster: Option<String>,
        /// Whether clean up living brokers, default false.
        #[arg(short = 'l', long = "cleanLivingBroker")]
        clean_living: bool,
    },
}

impl ControllerCommand {
    pub fn common(&self) -> &Common {
        match self {
            Self::getControllerMetaData { common, .. }
            | Self::getControllerConfig { common, .. }
            | Self::getSyncStateSet { common, .. }
            | Self::getBrokerEpoch { common, .. }
            | Self::electMaster { common, .. }
            | Self::cleanBrokerMetadata { common, .. } => common,
        }
    }

    /// The controller addresses of `-a`, when the command has one: the client instance's
    /// bootstrap list when `-n` is not given (only `getSyncStateSet -c` and
    /// `getBrokerEpoch` read the NameServer).
    pub fn controllers(&self) -> Option<Vec<String>> {
        match self {
            Self::getControllerMetaData { controller, .. }
            | Self::getControllerConfig { controller, .. }
            | Self::getSyncStateSet { controller, cluster: None, .. }
            | Self::electMaster { controller, .. }
            | Self::cleanBrokerMetadata { controller, .. } => Some(address_list(controller)).filter(|l| !l.is_empty()),
            Self::getSyncStateSet { .. } | Self::getBrokerEpoch { .. } => None,
        }
    }
}

/// `host:port;host:port` as a list (blank entries dropped).
fn address_list(addrs: &str) -> Vec<String> {
    addrs.split(';').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect()
}

/// `-i`: none = one round; empty = every 3 s; else whole seconds.
fn interval(value: &Option<String>) -> Result<Option<Duration>, String> {
    match value.as_deref().map(str::trim) {
        None => Ok(None),
        Some("") => Ok(Some(Duration::from_secs(INTERVAL_SECS_DEFAULT))),
        Some(s) => s.parse::<u64>().map(|n| Some(Duration::from_secs(n.max(1)))).map_err(|_| format!("-i {s:?} is not a whole number of seconds")),
    }
}

/// `-b "1;2;3"` checked as mqadmin does (every id a number).
fn check_ids(ids: &str) -> Result<(), String> {
    match ids.split(';').map(str::trim).filter(|s| !s.is_empty()).find(|s| s.parse::<i64>().is_err()) {
        Some(bad) => Err(format!("please set the option <brokerControllerIdsToClean> according to the format (`1;2;3`): {bad:?} is not a broker id")),
        None => Ok(()),
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

pub async fn run(instance: &Rc<ClientInstance>, json: bool, command: ControllerCommand) -> Outcome {
    match command {
        ControllerCommand::getControllerMetaData { controller, .. } => {
            let meta = metadata(instance, first(&controller)?).await?;
            render(json, metadata_json(&meta), metadata_text(&meta))
        }
        ControllerCommand::getControllerConfig { controller, .. } => {
            let (mut text, mut docs) = (String::new(), serde_json::Map::new());
            for addr in address_list(&controller) {
                let r = call(instance, &addr, RemotingCommand::request(rq::GET_CONTROLLER_CONFIG)).await?;
                let (t, v) = crate::commands::properties_section(&addr, &r.body);
                text += &t;
                docs.insert(addr, v);
            }
            render(json, Value::Object(docs), text)
        }
        ControllerCommand::getSyncStateSet { controller, cluster, broker_name, interval: every, history, .. } => {
            let every = interval(&every)?;
            let controller = first(&controller)?.to_string();
            rounds(every, || async {
                let names = match (&broker_name, &cluster) {
                    (Some(b), _) => vec![b.clone()],
                    (None, Some(c)) => broker_sets_of_cluster(&crate::query::cluster_info(instance).await?, c)?,
                    (None, None) => return Err("give -b (a broker name) or -c (a cluster)".to_string()),
                };
                let leader = leader(instance, &controller).await?;
                let r = call(instance, &leader, RemotingCommand::request(rq::CONTROLLER_GET_SYNC_STATE_DATA).with_body(serde_json::to_vec(&names).map_err(|e| e.to_string())?)).await?;
                let info = BrokerReplicasInfo::decode(&r.body).map_err(|e| format!("{leader}: sync state data does not decode: {e}"))?;
                if !history {
                    return render(json, serde_json::to_value(&info).map_err(|e| e.to_string())?, sync_state_text(&info));
                }
                let (mut text, mut doc) = (sync_state_text(&info), serde_json::to_value(&info).map_err(|e| e.to_string())?);
                for name in info.replicas_info_table.keys() {
                    let r = call(instance, &leader, RemotingCommand::request(RINGMQ_CONTROLLER_GET_ELECTION_HISTORY).with_ext("brokerName", name)).await?;
                    let h = ElectionHistoryBody::decode(&r.body).map_err(|e| format!("{leader}: election history does not decode: {e}"))?;
                    text += &history_text(name, &h);
                    doc["history"][name] = serde_json::to_value(&h).map_err(|e| e.to_string())?;
                }
                render(json, doc, text)
            })
            .await
        }
        ControllerCommand::getBrokerEpoch { cluster, broker_name, interval: every, .. } => {
            let every = interval(&every)?;
            rounds(every, || async {
                let info = crate::query::cluster_info(instance).await?;
                let addrs = match (&broker_name, &cluster) {
                    (Some(b), _) => replica_addresses(&info, std::slice::from_ref(b)),
                    (None, Some(c)) => {
                        let names = info.cluster_addr_table.get(c).ok_or_else(|| format!("cluster {c} is not known to the NameServer"))?;
                        replica_addresses(&info, &names.iter().cloned().collect::<Vec<_>>())
                    }
                    (None, None) => return Err("give -b (a broker name) or -c (a cluster)".to_string()),
                };
                let (mut text, mut docs) = (String::new(), Vec::new());
                for addr in addrs {
                    let r = call(instance, &addr, RemotingCommand::request(rq::GET_BROKER_EPOCH_CACHE)).await?;
                    let cache = EpochEntryCache::decode(&r.body).map_err(|e| format!("{addr}: epoch cache does not decode: {e}"))?;
                    text += &epoch_text(&addr, &cache);
                    docs.push(json!({"brokerAddr": addr, "epochCache": cache}));
                }
                render(json, Value::Array(docs), text)
            })
            .await
        }
        ControllerCommand::electMaster { controller, cluster, broker_name, broker_id, .. } => {
            let leader = leader(instance, first(&controller)?).await?;
            let header = ElectMasterRequestHeader { cluster_name: cluster.clone(), broker_name: broker_name.clone(), broker_id, designate_elect: true, invoke_time: Some(now_ms()) };
            let r = call(instance, &leader, RemotingCommand::request(rq::CONTROLLER_ELECT_MASTER).with_header(&header)).await?;
            let answer: ElectMasterResponseHeader = r.header().map_err(|e| format!("{leader}: elect master answer: {e}"))?;
            let body = if r.body.is_empty() { ElectMasterResponseBody::default() } else { ElectMasterResponseBody::decode(&r.body).map_err(|e| format!("{leader}: elect master body: {e}"))? };
            render(
                json,
                json!({"clusterName": cluster, "brokerName": broker_name, "masterBrokerId": answer.master_broker_id, "masterAddress": answer.master_address,
                       "masterEpoch": answer.master_epoch, "syncStateSetEpoch": answer.sync_state_set_epoch, "body": body}),
                elect_text(&cluster, &broker_name, &answer, &body),
            )
        }
        ControllerCommand::cleanBrokerMetadata { controller, ids, broker_name, cluster, clean_living, .. } => {
            if let Some(ids) = &ids {
                check_ids(ids)?;
            }
            if !clean_living && cluster.as_deref().is_none_or(|c| c.trim().is_empty()) {
                return Err("cleanLivingBroker option is false, clusterName option can not be empty.".into());
            }
            let leader = leader(instance, first(&controller)?).await?;
            let header = CleanControllerBrokerDataRequestHeader {
                cluster_name: cluster,
                broker_name: broker_name.clone(),
                broker_controller_ids_to_clean: ids,
                is_clean_living_broker: clean_living,
                invoke_time: Some(now_ms()),
            };
            call(instance, &leader, RemotingCommand::request(rq::CLEAN_BROKER_DATA).with_header(&header)).await?;
            render(json, json!({"brokerName": broker_name, "cleaned": true}), format!("clear broker {broker_name} metadata from controller success! \n"))
        }
    }
}

/// Runs `round` once, or with `-i` forever, printing each round's output as it comes (as
/// mqadmin; the process ends by a signal).
async fn rounds<F, Fut>(every: Option<Duration>, round: F) -> Outcome
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Outcome>,
{
    let Some(every) = every else { return round().await };
    loop {
        print!("{}", round().await?);
        glommio::timer::sleep(every).await;
    }
}

/// The first address of `-a` (mqadmin asks the first).
fn first(controller: &str) -> Result<&str, String> {
    controller.split(';').map(str::trim).find(|s| !s.is_empty()).ok_or_else(|| "-a needs a controller host:port".to_string())
}

async fn metadata(instance: &Rc<ClientInstance>, addr: &str) -> Result<GetMetaDataResponseHeader, String> {
    let r = call(instance, addr, RemotingCommand::request(rq::CONTROLLER_GET_METADATA_INFO)).await?;
    r.header().map_err(|e| format!("{addr}: controller metadata: {e}"))
}

/// The leader's address as the controller at `addr` knows it.
async fn leader(instance: &Rc<ClientInstance>, addr: &str) -> Result<String, String> {
    let meta = metadata(instance, addr).await?;
    meta.controller_leader_address.filter(|a| !a.trim().is_empty()).ok_or_else(|| format!("{addr}: the controller knows no leader now (an election may be running): try again"))
}

fn metadata_json(m: &GetMetaDataResponseHeader) -> Value {
    json!({"group": m.group, "controllerLeaderId": m.controller_leader_id, "controllerLeaderAddress": m.controller_leader_address,
           "isLeader": m.is_leader, "peers": m.peers.as_deref().map(address_list).unwrap_or_default()})
}

/// mqadmin's lines; Java prints `null` for what is absent.
fn metadata_text(m: &GetMetaDataResponseHeader) -> String {
    let or_null = |v: &Option<String>| v.clone().unwrap_or_else(|| "null".into());
    let mut out = format!(
        "#ControllerGroup\t{}\n#ControllerLeaderId\t{}\n#ControllerLeaderAddress\t{}\n",
        or_null(&m.group),
        or_null(&m.controller_leader_id),
        or_null(&m.controller_leader_address)
    );
    for peer in m.peers.as_deref().map(address_list).unwrap_or_default() {
        out += &format!("#Peer:\t{peer}\n");
    }
    out
}

/// The broker sets of `cluster`: the names the NameServer lists and, for a shard-broker
/// `<name>-s<i>` (shard route mode), its broker set `<name>` (one controller broker set
/// per process, docs/design/controller.md §3.2). The controller answers the ones it knows.
fn broker_sets_of_cluster(info: &ClusterInfo, cluster: &str) -> Result<Vec<String>, String> {
    let names = info.cluster_addr_table.get(cluster).ok_or_else(|| format!("cluster {cluster} is not known to the NameServer"))?;
    let mut sets = BTreeSet::new();
    for name in names {
        sets.insert(name.clone());
        if let Some((base, shard)) = name.rsplit_once("-s") {
            if !base.is_empty() && !shard.is_empty() && shard.bytes().all(|b| b.is_ascii_digit()) {
                sets.insert(base.to_string());
            }
        }
    }
    Ok(sets.into_iter().collect())
}

/// Every address (master and slaves) of the broker names, in name then id order.
fn replica_addresses(info: &ClusterInfo, names: &[String]) -> Vec<String> {
    names.iter().filter_map(|n| info.broker_addr_table.get(n)).flat_map(|b| b.broker_addrs.values().cloned()).collect()
}

fn identity(r: &ReplicaIdentity) -> String {
    format!("ReplicaIdentity{{brokerName='{}', brokerId={}, brokerAddress='{}', alive={}}}", r.broker_name, r.broker_id, r.broker_address, r.alive)
}

/// mqadmin's `getSyncStateSet` lines, per broker set.
fn sync_state_text(info: &BrokerReplicasInfo) -> String {
    let mut out = String::new();
    for (name, set) in &info.replicas_info_table {
        out += &format!(
            "\n#brokerName\t{name}\n#MasterBrokerId\t{}\n#MasterAddr\t{}\n#MasterEpoch\t{}\n#SyncStateSetEpoch\t{}\n#SyncStateSetNums\t{}\n",
            set.master_broker_id.map_or("null".into(), |id| id.to_string()),
            set.master_address.as_deref().unwrap_or("null"),
            set.master_epoch,
            set.sync_state_set_epoch,
            set.in_sync_replicas.len()
        );
        for r in &set.in_sync_replicas {
            out += &format!("\nInSyncReplica:\t{}\n", identity(r));
        }
        for r in &set.not_in_sync_replicas {
            out += &format!("\nNotInSyncReplica:\t{}\n", identity(r));
        }
    }
    out
}

/// (RingMQ) a set's elections, oldest first, then its epochs' start offsets per shard.
fn history_text(name: &str, h: &ElectionHistoryBody) -> String {
    let id = |v: Option<i64>| v.map_or("-".to_string(), |i| i.to_string());
    let rows: Vec<Vec<String>> = h
        .history
        .iter()
        .map(|e| {
            let candidates = e.candidates.iter().map(|c| format!("{}{}@{}/{}", c.id, if c.alive { "" } else { "(dead)" }, c.epoch, c.max_offset)).collect::<Vec<_>>().join(" ");
            vec![e.master_epoch.to_string(), id(e.old_master), id(e.new_master), e.trigger.clone(), e.raft_term.to_string(), candidates]
        })
        .collect();
    let mut out = format!("\n#ElectionHistory\t{name}\n") + &table(&["#Epoch", "#OldMaster", "#NewMaster", "#Trigger", "#RaftTerm", "#Candidates(id@epoch/maxOffset)"], &rows);
    for (epoch, starts) in &h.epoch_starts {
        out += &format!("#EpochStart\t{epoch}\t{}\n", starts.iter().map(u64::to_string).collect::<Vec<_>>().join(","));
    }
    out
}

/// mqadmin's `getBrokerEpoch` lines for one broker; the last epoch ends at the broker's
/// max offset, as mqadmin prints it.
fn epoch_text(addr: &str, cache: &EpochEntryCache) -> String {
    let mut out = format!("\n#clusterName\t{}\n#brokerName\t{}\n#brokerAddr\t{addr}\n#brokerId\t{}", cache.cluster_name, cache.broker_name, cache.broker_id);
    let last = cache.epoch_list.len().saturating_sub(1);
    for (i, e) in cache.epoch_list.iter().enumerate() {
        let end = if i == last { cache.max_offset } else { e.end_offset };
        out += &format!("\n#Epoch: EpochEntry{{epoch={}, startOffset={}, endOffset={end}}}", e.epoch, e.start_offset);
    }
    out + "\n"
}

/// mqadmin's `electMaster` lines.
fn elect_text(cluster: &str, broker_name: &str, h: &ElectMasterResponseHeader, body: &ElectMasterResponseBody) -> String {
    let show = |v: Option<String>| v.unwrap_or_else(|| "null".into());
    let mut out = format!(
        "#ClusterName\t{cluster}\n#BrokerName\t{broker_name}\n#BrokerMasterAddr\t{}\n#MasterEpoch\t{}\n#SyncStateSetEpoch\t{}\n",
        show(h.master_address.clone()),
        show(h.master_epoch.map(|e| e.to_string())),
        show(h.sync_state_set_epoch.map(|e| e.to_string()))
    );
    if let Some(group) = &body.broker_member_group {
        for (id, addr) in &group.broker_addrs {
            out += &format!("\t#Broker\t{id}\t{addr}\n");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringmq_client::remoting::controller::{BrokerMemberGroup, EpochEntry, ReplicasInfo};
    use ringmq_client::remoting::route::BrokerData;

    fn check<T: std::fmt::Debug + PartialEq>(got: T, expected: T) {
        assert_eq!(got, expected);
    }

    fn replica(id: i64, alive: bool) -> ReplicaIdentity {
        ReplicaIdentity { broker_name: "broker-a".into(), broker_id: id, broker_address: format!("10.0.0.{id}:10911"), alive }
    }

    #[test]
    fn arguments_are_checked_before_any_request() {
        check(interval(&None), Ok(None));
        check(interval(&Some(String::new())), Ok(Some(Duration::from_secs(3))));
        check(interval(&Some(" 5 ".into())), Ok(Some(Duration::from_secs(5))));
        check(interval(&Some("0".into())), Ok(Some(Duration::from_secs(1))));
        check(interval(&Some("soon".into())), Err("-i \"soon\" is not a whole number of seconds".into()));
        check(check_ids("1;2;3"), Ok(()));
        check(check_ids("1;;2;"), Ok(()));
        check(check_ids("1;two"), Err("please set the option <brokerControllerIdsToClean> according to the format (`1;2;3`): \"two\" is not a broker id".into()));
        check(first(" 127.0.0.1:9878 ;127.0.0.1:9879"), Ok("127.0.0.1:9878"));
        check(first(" ; "), Err("-a needs a controller host:port".into()));
        check(address_list("a:1; b:2 ;;"), vec!["a:1".to_string(), "b:2".to_string()]);
    }

    #[test]
    fn metadata_prints_as_mqadmin() {
        let meta = GetMetaDataResponseHeader {
            group: Some("DefaultControllerGroup".into()),
            controller_leader_id: Some("n1".into()),
            controller_leader_address: Some("127.0.0.1:9879".into()),
            is_leader: false,
            peers: Some("n0:127.0.0.1:9878;n1:127.0.0.1:9879;".into()),
        };
        check(
            metadata_text(&meta),
            "#ControllerGroup\tDefaultControllerGroup\n#ControllerLeaderId\tn1\n#ControllerLeaderAddress\t127.0.0.1:9879\n#Peer:\tn0:127.0.0.1:9878\n#Peer:\tn1:127.0.0.1:9879\n".to_string(),
        );
        check(metadata_text(&GetMetaDataResponseHeader::default()), "#ControllerGroup\tnull\n#ControllerLeaderId\tnull\n#ControllerLeaderAddress\tnull\n".to_string());
        check(metadata_json(&meta)["peers"].clone(), json!(["n0:127.0.0.1:9878", "n1:127.0.0.1:9879"]));
    }

    #[test]
    fn sync_state_sets_print_as_mqadmin() {
        let mut info = BrokerReplicasInfo::default();
        info.replicas_info_table.insert(
            "broker-a".into(),
            ReplicasInfo {
                master_broker_id: Some(1),
                master_address: Some("10.0.0.1:10911".into()),
                master_epoch: 3,
                sync_state_set_epoch: 5,
                in_sync_replicas: vec![replica(1, true)],
                not_in_sync_replicas: vec![replica(2, false)],
            },
        );
        check(
            sync_state_text(&info),
            "\n#brokerName\tbroker-a\n#MasterBrokerId\t1\n#MasterAddr\t10.0.0.1:10911\n#MasterEpoch\t3\n#SyncStateSetEpoch\t5\n#SyncStateSetNums\t1\n\
             \nInSyncReplica:\tReplicaIdentity{brokerName='broker-a', brokerId=1, brokerAddress='10.0.0.1:10911', alive=true}\n\
             \nNotInSyncReplica:\tReplicaIdentity{brokerName='broker-a', brokerId=2, brokerAddress='10.0.0.2:10911', alive=false}\n"
                .to_string(),
        );
        let leaderless = BrokerReplicasInfo { replicas_info_table: [("b".to_string(), ReplicasInfo::default())].into() };
        assert!(sync_state_text(&leaderless).contains("#MasterBrokerId\tnull\n#MasterAddr\tnull\n"), "{}", sync_state_text(&leaderless));
    }

    #[test]
    fn epochs_print_as_mqadmin_with_the_last_ending_at_the_max_offset() {
        let cache = EpochEntryCache {
            cluster_name: "c".into(),
            broker_name: "broker-a".into(),
            broker_id: 2,
            epoch_list: vec![EpochEntry { epoch: 1, start_offset: 0, end_offset: 4096 }, EpochEntry { epoch: 3, start_offset: 4096, end_offset: 0 }],
            max_offset: 9000,
        };
        check(
            epoch_text("10.0.0.2:10911", &cache),
            "\n#clusterName\tc\n#brokerName\tbroker-a\n#brokerAddr\t10.0.0.2:10911\n#brokerId\t2\
             \n#Epoch: EpochEntry{epoch=1, startOffset=0, endOffset=4096}\
             \n#Epoch: EpochEntry{epoch=3, startOffset=4096, endOffset=9000}\n"
                .to_string(),
        );
        check(epoch_text("x", &EpochEntryCache::default()), "\n#clusterName\t\n#brokerName\t\n#brokerAddr\tx\n#brokerId\t0\n".to_string());
    }

    #[test]
    fn election_history_prints_one_row_per_election() {
        use ringmq_client::remoting::controller::{ElectionCandidate, ElectionEntry};
        let h = ElectionHistoryBody {
            history: vec![
                ElectionEntry { master_epoch: 1, old_master: None, new_master: Some(1), trigger: "Broker".into(), candidates: vec![], raft_term: 1, leader_wall_ms: 5 },
                ElectionEntry {
                    master_epoch: 2,
                    old_master: Some(1),
                    new_master: Some(2),
                    trigger: "Controller".into(),
                    candidates: vec![ElectionCandidate { id: 1, alive: false, epoch: 1, max_offset: 10, priority: 0 }, ElectionCandidate { id: 2, alive: true, epoch: 1, max_offset: 10, priority: 0 }],
                    raft_term: 3,
                    leader_wall_ms: 9,
                },
            ],
            epoch_starts: [(2, vec![4096, 0])].into(),
        };
        let text = history_text("broker-a", &h);
        let lines: Vec<Vec<&str>> = text.lines().filter(|l| !l.is_empty()).map(|l| l.split_whitespace().collect()).collect();
        check(lines[0].clone(), vec!["#ElectionHistory", "broker-a"]);
        check(lines[2].clone(), vec!["1", "-", "1", "Broker", "1"]);
        check(lines[3].clone(), vec!["2", "1", "2", "Controller", "3", "1(dead)@1/10", "2@1/10"]);
        check(lines[4].clone(), vec!["#EpochStart", "2", "4096,0"]);
    }

    #[test]
    fn elections_print_as_mqadmin() {
        let header = ElectMasterResponseHeader { master_broker_id: Some(2), master_address: Some("10.0.0.2:10911".into()), master_epoch: Some(4), sync_state_set_epoch: Some(7) };
        let body = ElectMasterResponseBody {
            broker_member_group: Some(BrokerMemberGroup { cluster: "c".into(), broker_name: "broker-a".into(), broker_addrs: [(1, "10.0.0.1:10911".to_string()), (2, "10.0.0.2:10911".to_string())].into() }),
            sync_state_set: vec![2],
        };
        check(
            elect_text("c", "broker-a", &header, &body),
            "#ClusterName\tc\n#BrokerName\tbroker-a\n#BrokerMasterAddr\t10.0.0.2:10911\n#MasterEpoch\t4\n#SyncStateSetEpoch\t7\n\t#Broker\t1\t10.0.0.1:10911\n\t#Broker\t2\t10.0.0.2:10911\n"
                .to_string(),
        );
    }

    #[test]
    fn cluster_names_map_to_broker_sets_and_replica_addresses() {
        let data = |name: &str, addrs: &[(i64, &str)]| BrokerData {
            cluster: "c".into(),
            broker_name: name.into(),
            broker_addrs: addrs.iter().map(|(id, a)| (*id, a.to_string())).collect(),
            ..Default::default()
        };
        let info = ClusterInfo {
            broker_addr_table: [
                ("broker-a".to_string(), data("broker-a", &[(0, "10.0.0.1:10911"), (2, "10.0.0.2:10911")])),
                ("broker-b-s0".to_string(), data("broker-b-s0", &[(0, "10.0.0.3:10911")])),
                ("broker-b-s1".to_string(), data("broker-b-s1", &[(0, "10.0.0.3:10912")])),
                ("plain-sx".to_string(), data("plain-sx", &[(0, "10.0.0.4:10911")])),
            ]
            .into(),
            cluster_addr_table: [("c".to_string(), ["broker-a", "broker-b-s0", "broker-b-s1", "plain-sx"].iter().map(|s| s.to_string()).collect())].into(),
        };
        check(
            broker_sets_of_cluster(&info, "c"),
            Ok(["broker-a", "broker-b", "broker-b-s0", "broker-b-s1", "plain-sx"].iter().map(|s| s.to_string()).collect()),
        );
        check(broker_sets_of_cluster(&info, "nope"), Err("cluster nope is not known to the NameServer".into()));
        check(replica_addresses(&info, &["broker-a".into(), "missing".into()]), vec!["10.0.0.1:10911".to_string(), "10.0.0.2:10911".to_string()]);
    }
}
