//! Apache RocketMQ's broker.conf keys that RingMQ does not map onto a setting of its
//! own (`broker_conf.rs` maps those), and what a broker.conf line with one of them means here.
//!
//! Three outcomes for such a key:
//! - **no meaning here** (`Ignored`): tuning of machinery RingMQ does not have — Java
//!   thread pools and their queues, Netty and socket tuning, page-cache, mmap, lock and
//!   transient-store-pool tuning, flush and clean cadences of RocketMQ's own store.
//!   Accepted; the broker logs one start-up warning listing them and why.
//! - **a feature left off** (`Ignored`): `…Enable`/`enable…` switches set to `false` —
//!   RingMQ does not have the feature, which is what the line asks for — except the
//!   switches of what RingMQ always does (`ALWAYS_ON_KEYS`: the key index, timers,
//!   ...), whose `false` is refused.
//! - **refused** (`Refused`): any other Apache key (a feature RingMQ does not implement,
//!   or one switched on) — accepting it would promise what RingMQ does not do — and any
//!   key that is not an Apache key at all, with the closest known key suggested.
//!
//! `APACHE_BROKER_KEYS` is every setter of Apache RocketMQ's BrokerConfig,
//! MessageStoreConfig, NettyServerConfig and NettyClientConfig (what the Java broker's
//! `properties2Object` accepts), taken from github.com/apache/rocketmq at 8fc57f1468.
//!
//! Invariant: a key is classified the same way whatever its line; the suggestion is
//! drawn from keys a broker.conf may hold (RingMQ's mapped ones and Apache's).

/// Why a key without a RingMQ counterpart is accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IgnoredWhy {
    /// Java thread pools, request queues and their waits: RingMQ runs one pinned thread
    /// per core and bounds its own queues.
    ThreadPool,
    /// Netty / socket tuning of the Java remoting layer.
    Network,
    /// Page cache, mmap, lock and transient-pool tuning of RocketMQ's store: RingMQ writes
    /// with O_DIRECT through io_uring and takes no locks on the send path.
    StoreTuning,
    /// Cadences of RocketMQ's flush, clean and persistence threads: RingMQ's own are
    /// `flush_interval_ms` and its fixed store task intervals.
    Cadence,
    /// A feature switch set to false: RingMQ does not have the feature.
    FeatureOff,
    /// A switch of what RingMQ always does, set to true: what it asks for is done.
    AlwaysOn,
    /// RocketMQ 5's auth metadata caches and where Apache keeps its users and ACLs:
    /// RingMQ holds them all on every shard and keeps them in `<store>/config`.
    AuthCache,
}

impl IgnoredWhy {
    pub fn describe(self) -> &'static str {
        match self {
            IgnoredWhy::ThreadPool => "Java thread pools and request queues (RingMQ: one pinned thread per core, bounded queues of its own)",
            IgnoredWhy::Network => "Netty and socket tuning (RingMQ's own network layer)",
            IgnoredWhy::StoreTuning => "page-cache, mmap, lock and transient-pool tuning (RingMQ: O_DIRECT through io_uring, no locks on the send path)",
            IgnoredWhy::Cadence => "RocketMQ's flush/clean/persist thread cadences (RingMQ: flush_interval_ms and fixed store task intervals)",
            IgnoredWhy::FeatureOff => "features switched off that RingMQ does not have",
            IgnoredWhy::AlwaysOn => "switches of what RingMQ always does (the key index, timers, ...), set to true",
            IgnoredWhy::AuthCache => "RocketMQ 5 auth caches and their storage path (RingMQ holds every user and ACL on each shard, saved under <store>/config)",
        }
    }
}

/// What a broker.conf line with a key RingMQ does not map means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unmapped {
    Ignored(IgnoredWhy),
    Refused(String),
}

/// Keys of RocketMQ's store tuning that have no meaning for RingMQ's store.
const STORE_TUNING_KEYS: &[&str] = &[
    "useReentrantLockWhenPutMessage", "useABSLock", "spinLockCollisionRetreatOptimalDegree", "debugLockEnable",
    "transientStorePoolEnable", "transientStorePoolSize", "fastFailIfNoBufferInStorePool", "writeWithoutMmap",
    "warmMapedFileEnable", "flushLeastPagesWhenWarmMapedFile", "osPageCacheBusyTimeOutMills", "brokerFastFailureEnable",
    "accessMessageInMemoryMaxRatio", "accessMessageInMemoryHotRatio", "dataReadAheadEnable", "transferMsgByHeap",
    "mappedFileSwapEnable", "commitLogSwapMapInterval", "commitLogSwapMapReserveFileNum", "commitLogForceSwapMapInterval",
    "logicQueueSwapMapInterval", "logicQueueSwapMapReserveFileNum", "logicQueueForceSwapMapInterval", "cleanSwapedMapInterval",
    "commitIntervalCommitLog", "commitCommitLogLeastPages", "commitCommitLogThoroughInterval", "flushCommitLogLeastPages",
    "flushCommitLogThoroughInterval", "flushCommitLogTimed", "flushConsumeQueueLeastPages", "flushConsumeQueueThoroughInterval",
    "flushIntervalConsumeQueue", "wakeCommitWhenPutMessage", "wakeFlushWhenPutMessage", "putMsgIndexHightWater",
    "mappedFileSizeConsumeQueue", "putConsumeQueueDataByFileChannel",
    "destroyMapedFileIntervalForcibly", "redeleteHangedFileInterval", "maxBatchDeleteFilesNum",
    "maxRecoveryCommitlogFiles", "recoverConcurrently", "enableAcceleratedRecovery", "checkCRCOnRecover",
];

/// RocketMQ 5 `AuthConfig` keys of its metadata caches and storage path.
const AUTH_CACHE_KEYS: &[&str] = &[
    "authConfigPath", "userCacheMaxNum", "userCacheExpiredSecond", "userCacheRefreshSecond", "aclCacheMaxNum", "aclCacheExpiredSecond",
    "aclCacheRefreshSecond", "statefulAuthenticationCacheMaxNum", "statefulAuthenticationCacheExpiredSecond", "statefulAuthorizationCacheMaxNum",
    "statefulAuthorizationCacheExpiredSecond",
];

/// Cadence keys of RocketMQ's background threads.
const CADENCE_KEYS: &[&str] = &[
    "deleteCommitLogFilesInterval", "deleteConsumeQueueFilesInterval", "cleanResourceInterval", "flushConsumerOffsetInterval",
    "flushConsumerOffsetHistoryInterval", "flushDelayOffsetInterval", "registerBrokerTimeoutMills",
    "haSendHeartbeatInterval", "haHousekeepingInterval", "correctLogicMinOffsetSleepInterval", "correctLogicMinOffsetForceInterval",
    "shutdownWaitTimeSeconds", "updateNameServerAddrPeriod", "fetchNamesrvAddrInterval",
];

/// Every setter of Apache RocketMQ's broker-side configuration classes.
pub const APACHE_BROKER_KEYS: &[&str] = &[
    "accessMessageInMemoryHotRatio", "accessMessageInMemoryMaxRatio", "accountStatsEnable", "accountStatsPrintZeroValues", "ackMessageThreadPoolNums", "ackThreadPoolQueueCapacity",
    "aclEnable", "adminBrokerThreadPoolNums", "adminBrokerThreadPoolQueueCapacity", "allAckInSyncStateSet", "allowRecallWhenBrokerNotWriteable", "appendAckAsync",
    "appendCkAsync", "asyncLearner", "asyncSendEnable", "autoCreateSubscriptionGroup", "autoCreateTopicEnable", "autoDeleteUnusedStats",
    "autoMessageVersionOnTopicLen", "batchDispatchRequestThreadPoolNums", "bindAddress", "bitMapLengthConsumeQueueExt", "bottomMostCompressionTypeForConsumeQueueStore", "broadcastOffsetExpireMaxSecond",
    "broadcastOffsetExpireSecond", "brokerElectionPriority", "brokerFastFailureEnable", "brokerHeartbeatInterval", "brokerIP1", "brokerIP2",
    "brokerNotActiveTimeoutMillis", "brokerPermission", "brokerRole", "brokerTopicEnable", "cgColdReadThreshold", "channelExpiredTimeout",
    "channelNotActiveInterval", "checkCRCOnRecover", "checkSyncStateSetPeriod", "cleanFileForciblyEnable", "cleanOfflineBrokerInterval", "cleanResourceInterval",
    "cleanRocksDBDirtyCQIntervalMin", "cleanSwapedMapInterval", "clearRetryTopicWhenDeleteTopic", "clientAsyncSemaphoreValue", "clientCallbackExecutorThreads", "clientChannelMaxIdleTimeSeconds",
    "clientCloseSocketIfTimeout", "clientManageThreadPoolNums", "clientManagerThreadPoolQueueCapacity", "clientOnewaySemaphoreValue", "clientPooledByteBufAllocatorEnable", "clientSocketRcvBufSize",
    "clientSocketSndBufSize", "clientWorkerThreads", "clusterTopicEnable", "coldCtrStrategyEnable", "coldDataFlowControlEnable", "coldDataScanEnable",
    "combineAssignOffsetCQType", "combineCQEnableCheckSelf", "combineCQLoadingCQTypes", "combineCQMaxExtraSearchCommitLogFiles", "combineCQPreferCQType", "commercialBaseCount",
    "commercialSizePerMsg", "commitCommitLogLeastPages", "commitCommitLogThoroughInterval", "commitIntervalCommitLog", "commitLogForceSwapMapInterval", "commitLogSwapMapInterval",
    "commitLogSwapMapReserveFileNum", "compactionCqMappedFileSize", "compactionMappedFileSize", "compactionScheduleInternal", "compactionThreadNum", "compatibleWithOldNameSrv",
    "compressedRegister", "configBlackList", "configManagerVersion", "connectTimeoutMillis", "consumerFallbehindThreshold", "consumerManageThreadPoolNums",
    "consumerManagerThreadPoolQueueCapacity", "consumerOffsetUpdateVersionStep", "controllerAddr", "controllerHeartBeatTimeoutMills", "correctLogicMinOffsetForceInterval", "correctLogicMinOffsetSleepInterval",
    "dataReadAheadEnable", "debugLockEnable", "defaultMessageRequestMode", "defaultPopShareQueueNum", "defaultQueryMaxNum", "defaultTopicQueueNums",
    "delayOffsetUpdateVersionStep", "deleteCommitLogFilesInterval", "deleteConsumeQueueFilesInterval", "deleteFileBatchMax", "deleteWhen", "destroyMapedFileIntervalForcibly",
    "disableCallbackExecutor", "disableConsumeIfConsumerReadSlowly", "disableNettyWorkerGroup", "disappearTimeAfterStart", "diskFallRecorded", "diskMaxUsedSpaceRatio",
    "diskSpaceCleanForciblyRatio", "diskSpaceWarningLevelRatio", "dispatchCqCacheNum", "dispatchCqThreads", "dispatchFromSenderThread", "duplicationEnable",
    "enableAcceleratedRecovery", "enableAsyncReput", "enableAutoInSyncReplicas", "enableBatchPush", "enableBroadcastOffsetStore", "enableBuildConsumeQueueConcurrently",
    "enableCalcFilterBitMap", "enableCleanExpiredOffset", "enableCompaction", "enableConnectionMetrics", "enableConsumeQueueExt", "enableControllerMode",
    "enableCreateSysGroup", "enableDLegerCommitLog", "enableDetailStat", "enableFastChannelEventProcess", "enableLagAndDlqMetrics", "enableLmq",
    "enableLmqStats", "enableLogConsumeQueueRepeatedlyBuildWhenRecover", "enableMessageStoreMetrics", "enableMixedMessageType", "enableMultiDispatch", "enableNetWorkFlowControl",
    "enableNotifyAfterPopOrderLockRelease", "enableNotifyBeforePopCalculateLag", "enablePopBatchAck", "enablePopBufferMerge", "enablePopLog", "enablePopMessageThreshold",
    "enablePopMetrics", "enablePropertyFilter", "enableReconnectForGoAway", "enableRegisterProducer", "enableRemoteEscape", "enableRemotingMetrics",
    "enableRequestMetrics", "enableRetryTopicV2", "enableRocksDBLog", "enableRunningFlagsInFlush", "enableScheduleAsyncDeliver", "enableScheduleMessageStats",
    "enableShutdownGracefully", "enableSingleTopicRegister", "enableSkipLongAwaitingAck", "enableSlaveActingMaster", "enableSplitMetadata", "enableSplitRegistration",
    "enableStatsMetrics", "enableTransactionMetrics", "enabledAppendPropCRC", "endTransactionPoolQueueCapacity", "endTransactionThreadPoolNums", "estimateAccumulation",
    "expectConsumerNumUseFilter", "fastFailIfNoBufferInStorePool", "fetchControllerAddrByDnsLookup", "fetchNameSrvAddrByDnsLookup", "fetchNamesrvAddrByAddressServer", "fetchNamesrvAddrInterval",
    "fileReservedTime", "filterDataCleanTimeSpan", "filterSupportRetry", "flushCommitLogLeastPages", "flushCommitLogThoroughInterval", "flushCommitLogTimed",
    "flushConsumeQueueLeastPages", "flushConsumeQueueThoroughInterval", "flushConsumerOffsetHistoryInterval", "flushConsumerOffsetInterval", "flushDelayOffsetInterval", "flushDiskType",
    "flushIntervalCommitLog", "flushIntervalConsumeQueue", "flushLeastPagesWhenWarmMapedFile", "forceRegister", "forceVerifyPropCRC", "forwardTimeout",
    "globalColdReadThreshold", "haFlowControlEnable", "haHousekeepingInterval", "haListenPort", "haMasterAddress", "haMaxGapNotInSync",
    "haMaxTimeSlaveNotCatchup", "haSendHeartbeatInterval", "haTransferBatchSize", "heartbeatThreadPoolNums", "heartbeatThreadPoolQueueCapacity", "highSpeedMode",
    "inSyncReplicas", "initPopOffsetByCheckMsgInMem", "isolateLogEnable", "listenPort", "litePullMessageEnable", "litePullMessageThreadPoolNums",
    "litePullThreadPoolQueueCapacity", "loadBalancePollNameServerInterval", "loadBalanceProcessorThreadPoolNums", "loadBalanceThreadPoolQueueCapacity", "lockInStrictMode", "logicQueueForceSwapMapInterval",
    "logicQueueSwapMapInterval", "logicQueueSwapMapReserveFileNum", "logicalDiskSpaceCleanForciblyThreshold", "longPollingEnable", "mappedFileSizeCommitLog", "mappedFileSizeConsumeQueue",
    "mappedFileSizeConsumeQueueExt", "mappedFileSizeTimerLog", "mappedFileSwapEnable", "mapperFileSizeBatchConsumeQueue", "maxAsyncPutMessageRequests", "maxBatchDeleteFilesNum",
    "maxChecksumRange", "maxConsumeQueueScan", "maxErrorRateOfBloomFilter", "maxFilterMessageSize", "maxHaTransferByteInSecond", "maxHashSlotNum",
    "maxIndexNum", "maxLmqConsumeQueueNum", "maxMessageSize", "maxMsgsNumBatch", "maxOffsetMapSize", "maxPopPollingSize",
    "maxReconnectIntervalTimeSeconds", "maxRecoveryCommitlogFiles", "maxSlaveResendLength", "maxStatsIdleTimeInMinutes", "maxTopicLength", "maxTransferBytesOnMessageInDisk",
    "maxTransferBytesOnMessageInMemory", "maxTransferCountOnMessageInDisk", "maxTransferCountOnMessageInMemory", "memTableFlushIntervalMs", "messageDelayLevel", "messageIndexEnable",
    "messageIndexSafe", "messageStorePlugIn", "metricGrpcExporterIntervalInMills", "metricGrpcExporterTimeOutInMills", "metricLoggingExporterIntervalInMills", "metricsExporterType",
    "metricsGrpcExporterHeader", "metricsGrpcExporterTarget", "metricsInDelta", "metricsLabel", "metricsOtelCardinalityLimit", "metricsPromExporterHost",
    "metricsPromExporterPort", "minInSyncReplicas", "msgTraceTopicName", "namesrvAddr", "notifyConsumerIdsChangedEnable", "offsetCheckInSlave",
    "osPageCacheBusyTimeOutMills", "popCkMaxBufferSize", "popCkOffsetMaxQueueSize", "popCkStayBufferTime", "popCkStayBufferTimeOut", "popConsumerFSServiceInit",
    "popConsumerKVServiceEnable", "popConsumerKVServiceInit", "popConsumerKVServiceLog", "popFromRetryProbability", "popInflightMessageThreshold", "popLongPollingForceNotifyInterval",
    "popPollingMapExpireTimeSeconds", "popPollingMapSize", "popPollingSize", "popResponseReturnActualRetryTopic", "popReviveMaxAttemptTimes", "popReviveMaxReturnSizePerRead",
    "preferredLeaderId", "printChannelGroups", "printChannelGroupsMinNum", "processReplyMessageThreadPoolNums", "pullBatchMaxMessageCount", "pullMessageThreadPoolNums",
    "pullThreadPoolQueueCapacity", "putConsumeQueueDataByFileChannel", "putMessageFutureThreadPoolNums", "putMessageTimeout", "putMsgIndexHightWater", "putThreadPoolQueueCapacity",
    "queryMessageThreadPoolNums", "queryThreadPoolQueueCapacity", "readOnlyCommitLogStorePaths", "readUnCommitted", "realTimeNotifyConsumerChange", "realTimePersistRocksDBConfig",
    "recallMessageEnable", "recheckReputOffsetFromCq", "recoverConcurrently", "recoverThreadPoolNums", "redeleteHangedFileInterval", "regionId",
    "registerBrokerTimeoutMills", "registerNameServerPeriod", "rejectPullConsumerEnable", "rejectTransactionMessage", "replicasPerDiskPartition", "replyThreadPoolQueueCapacity",
    "retrieveMessageFromPopRetryTopicV1", "reviveAckWaitMs", "reviveInterval", "reviveMaxSlow", "reviveQueueNum", "reviveScanTime",
    "rocksdbCQDoubleWriteEnable", "rocksdbCompressionType", "rocksdbFlushWalFrequency", "rocksdbWalFileRollingThreshold", "sampleCountThreshold", "sampleSteps",
    "scanAvailableNameSrv", "scheduleAsyncDeliverMaxPendingLimit", "scheduleAsyncDeliverMaxResendNum2Blocked", "searchBcqByCacheEnable", "sendHeartbeatTimeoutMillis", "sendMessageThreadPoolNums",
    "sendThreadPoolQueueCapacity", "serverAsyncSemaphoreValue", "serverCallbackExecutorThreads", "serverChannelMaxIdleTimeSeconds", "serverLoadBalancerEnable", "serverNettyWorkerGroupEnable",
    "serverOnewaySemaphoreValue", "serverPooledByteBufAllocatorEnable", "serverSelectorThreads", "serverSocketBacklog", "serverSocketRcvBufSize", "serverSocketSndBufSize",
    "serverWorkerThreads", "shortPollingTimeMills", "shutdownWaitTimeSeconds", "skipPreOnline", "skipWhenCKRePutReachMaxTimes", "slaveReadEnable",
    "slaveTimeout", "socksProxyConfig", "spinLockCollisionRetreatOptimalDegree", "splitMetadataSize", "splitRegistrationSize", "startAcceptSendRequestTimeStamp",
    "statRocksDBCQIntervalSec", "storePathBrokerIdentity", "storePathCommitLog", "storePathDLedgerCommitLog", "storePathEpochFile", "storePathRootDir",
    "storeReplyMessageEnable", "storeType", "subscriptionExpiredTimeout", "syncBrokerMemberGroupPeriod", "syncBrokerMetadataPeriod", "syncControllerMetadataPeriod",
    "syncFlushTimeout", "syncFromLastFile", "syncMasterFlushOffsetWhenStartup", "timerColdDataCheckIntervalMs", "timerCongestNumEachSlot", "timerEnableCheckMetrics",
    "timerEnableRetryUntilSuccess", "timerFlushIntervalMs", "timerGetMessageThreadNum", "timerInterceptDelayLevel", "timerMaxDelaySec", "timerMetricSmallThreshold",
    "timerPrecisionMs", "timerProgressLogIntervalMs", "timerPutMessageThreadNum", "timerRollWindowSlot", "timerSkipUnknownError", "timerStopEnqueue",
    "timerWheelEnable", "topicQueueLockNum", "totalReplicas", "traceOn", "traceTopicEnable", "transactionCheckInterval",
    "transactionCheckMax", "transactionMetricFlushInterval", "transactionOpBatchInterval", "transactionOpMsgMaxSize", "transactionTimeOut", "transferMsgByHeap",
    "transientStorePoolEnable", "transientStorePoolSize", "travelCqFileNumWhenGetMessage", "updateNameServerAddrPeriod", "useABSLock", "useEpollNativeSelector",
    "usePIDColdCtrStrategy", "useReentrantLockWhenPutMessage", "useServerSideResetOffset", "useStaticSubscription", "useTLS", "validateSystemTopicWhenUpdateTopic",
    "waitTimeMillsInAckQueue", "waitTimeMillsInAdminBrokerQueue", "waitTimeMillsInHeartbeatQueue", "waitTimeMillsInLitePullQueue", "waitTimeMillsInPullQueue", "waitTimeMillsInSendQueue",
    "waitTimeMillsInTransactionQueue", "wakeCommitWhenPutMessage", "wakeFlushWhenPutMessage", "warmMapedFileEnable", "writeBufferHighWaterMark", "writeBufferLowWaterMark",
    "writeWithoutMmap",
];

fn is_thread_pool(key: &str) -> bool {
    key.ends_with("ThreadPoolNums")
        || key.ends_with("QueueCapacity")
        || key.ends_with("Threads")
        || key.ends_with("ThreadNum")
        || key.ends_with("ThreadPoolQueueCapacity")
        || key.starts_with("waitTimeMillsIn")
        || key == "compactionThreadNum"
}

fn is_network(key: &str) -> bool {
    key.ends_with("SemaphoreValue")
        || key.ends_with("BufSize")
        || key.ends_with("PooledByteBufAllocatorEnable")
        || matches!(
            key,
            "serverSocketBacklog" | "useEpollNativeSelector" | "serverNettyWorkerGroupEnable" | "disableNettyWorkerGroup"
                | "writeBufferHighWaterMark" | "writeBufferLowWaterMark" | "connectTimeoutMillis" | "clientChannelMaxIdleTimeSeconds"
                | "clientCloseSocketIfTimeout" | "disableCallbackExecutor" | "enableReconnectForGoAway" | "maxReconnectIntervalTimeSeconds"
                | "channelNotActiveInterval" | "enableFastChannelEventProcess"
        )
}

/// Switches for what RingMQ always does: `false` asks for something it cannot do, so
/// such a line is refused rather than taken as "a feature left off".
const ALWAYS_ON_KEYS: &[&str] = &[
    "messageIndexEnable",
    "notifyConsumerIdsChangedEnable",
    "litePullMessageEnable",
    "enableRegisterProducer",
    "timerWheelEnable",
];

fn is_feature_switch(key: &str) -> bool {
    key.starts_with("enable") || key.ends_with("Enable") || key.ends_with("Enabled") || key.ends_with("On")
}

/// What a broker.conf `key=value` means when `broker_conf.rs` does not map `key`.
/// `mapped` are the keys it does map (for the suggestion).
pub fn classify(key: &str, value: &str, mapped: &[&'static str]) -> Unmapped {
    if let Some(outcome) = classify_replication(key, value) {
        return outcome;
    }
    if is_thread_pool(key) && APACHE_BROKER_KEYS.contains(&key) {
        return Unmapped::Ignored(IgnoredWhy::ThreadPool);
    }
    if is_network(key) && APACHE_BROKER_KEYS.contains(&key) {
        return Unmapped::Ignored(IgnoredWhy::Network);
    }
    if STORE_TUNING_KEYS.contains(&key) {
        return Unmapped::Ignored(IgnoredWhy::StoreTuning);
    }
    if CADENCE_KEYS.contains(&key) {
        return Unmapped::Ignored(IgnoredWhy::Cadence);
    }
    if AUTH_CACHE_KEYS.contains(&key) {
        return Unmapped::Ignored(IgnoredWhy::AuthCache);
    }
    if APACHE_BROKER_KEYS.contains(&key) {
        if ALWAYS_ON_KEYS.contains(&key) {
            if value.trim().eq_ignore_ascii_case("true") {
                return Unmapped::Ignored(IgnoredWhy::AlwaysOn);
            }
            return Unmapped::Refused(format!("RingMQ always does what `{key}` switches on and cannot turn it off; remove `{key}={value}`"));
        }
        if is_feature_switch(key) && value.trim().eq_ignore_ascii_case("false") {
            return Unmapped::Ignored(IgnoredWhy::FeatureOff);
        }
        return Unmapped::Refused(format!(
            "`{key}` is an Apache RocketMQ setting RingMQ does not implement; remove the line (RingMQ would not honour `{key}={value}`)"
        ));
    }
    match closest(key, mapped) {
        Some(s) => Unmapped::Refused(format!("unknown key `{key}` (did you mean `{s}`?)")),
        None => Unmapped::Refused(format!("unknown key `{key}`: neither a RingMQ nor an Apache RocketMQ broker setting")),
    }
}

/// Replication and controller-mode keys RingMQ does not map, each with why
/// (docs/design/controller.md §4); `None` for any other key.
fn classify_replication(key: &str, value: &str) -> Option<Unmapped> {
    let on = value.trim().eq_ignore_ascii_case("true");
    let refused = |why: &str| Some(Unmapped::Refused(format!("`{key}={value}`: {why}")));
    match key {
        "enableDLegerCommitLog" if on => refused(
            "DLedger CommitLog mode is not supported; use controller mode (enableControllerMode=true, controllerAddr=...) for automatic failover",
        ),
        "fetchControllerAddrByDnsLookup" if on => refused("looking the controllers up by DNS is not implemented; list them in controllerAddr (`;`-separated)"),
        "enableAutoInSyncReplicas" if on => {
            refused("shrinking inSyncReplicas to the SyncStateSet is not implemented; use allAckInSyncStateSet=true and minInSyncReplicas")
        }
        "asyncLearner" if on => refused("asynchronous learners (replicas never in the SyncStateSet) are not implemented"),
        "fetchControllerAddrByDnsLookup" | "asyncLearner" => Some(Unmapped::Ignored(IgnoredWhy::FeatureOff)),
        "enableElectUncleanMaster" => {
            refused("a controller setting, not a broker one: set it in the controller's configuration (ringmq-controller's file or the NameServer's [controller] table)")
        }
        "storePathEpochFile" => refused("RingMQ keeps one epoch file per shard (<store>/shard-<i>/epochFileCheckpoint); remove the line"),
        _ => None,
    }
}

/// The known key nearest to `key` (case-insensitive edit distance), if one is near enough
/// to be a likely typo: at most a third of the key's length.
fn closest(key: &str, mapped: &[&'static str]) -> Option<&'static str> {
    let lower = key.to_ascii_lowercase();
    mapped
        .iter()
        .chain(APACHE_BROKER_KEYS.iter())
        .map(|&c| (edit_distance(&lower, &c.to_ascii_lowercase()), c))
        .min_by_key(|&(d, _)| d)
        .filter(|&(d, _)| d <= (key.len() / 3).max(1))
        .map(|(_, c)| c)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != *cb)).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_classified() {
        let mapped = ["brokerName", "flushDiskType", "listenPort"];
        // check(key, value, expected: Ok(why) or Err(words in the refusal))
        let check = |key: &str, value: &str, want: Result<IgnoredWhy, &str>| match (classify(key, value, &mapped), want) {
            (Unmapped::Ignored(w), Ok(want)) => assert_eq!(w, want, "{key}"),
            (Unmapped::Refused(r), Err(words)) => assert!(r.contains(words), "{key}: {r}"),
            (got, want) => panic!("{key}={value}: got {got:?}, want {want:?}"),
        };
        check("sendMessageThreadPoolNums", "16", Ok(IgnoredWhy::ThreadPool));
        check("pullThreadPoolQueueCapacity", "100000", Ok(IgnoredWhy::ThreadPool));
        check("waitTimeMillsInSendQueue", "200", Ok(IgnoredWhy::ThreadPool));
        check("serverWorkerThreads", "8", Ok(IgnoredWhy::ThreadPool));
        check("serverSocketSndBufSize", "131072", Ok(IgnoredWhy::Network));
        check("serverPooledByteBufAllocatorEnable", "true", Ok(IgnoredWhy::Network));
        check("useReentrantLockWhenPutMessage", "true", Ok(IgnoredWhy::StoreTuning));
        check("transientStorePoolEnable", "true", Ok(IgnoredWhy::StoreTuning));
        check("osPageCacheBusyTimeOutMills", "1000", Ok(IgnoredWhy::StoreTuning));
        check("flushConsumerOffsetInterval", "5000", Ok(IgnoredWhy::Cadence));
        check("enablePopMetrics", "FALSE", Ok(IgnoredWhy::FeatureOff));
        check("userCacheMaxNum", "1000", Ok(IgnoredWhy::AuthCache));
        check("authConfigPath", "/home/rocketmq/store/config", Ok(IgnoredWhy::AuthCache));
        check("statefulAuthorizationCacheExpiredSecond", "60", Ok(IgnoredWhy::AuthCache));
        // Mapped since the plain ACL (issue 26) and runtime long polling (issue 25) are built: `broker_conf.rs` reads them.
        assert!(crate::config::BROKER_CONF_KEYS.contains(&"aclEnable"));
        assert!(crate::config::BROKER_CONF_KEYS.contains(&"longPollingEnable"));
        check("messageIndexEnable", "false", Err("cannot turn it off"));
        check("messageIndexEnable", "true", Ok(IgnoredWhy::AlwaysOn));
        check("timerWheelEnable", "TRUE", Ok(IgnoredWhy::AlwaysOn));
        check("timerWheelEnable", "no", Err("cannot turn it off"));
        // Mapped since request-reply (issue 24, item 6) is built: `broker_conf.rs` reads it
        // (a RingMQ setting, so `classify` never sees it; `conf_every_key` checks it).
        assert!(crate::config::BROKER_CONF_KEYS.contains(&"storeReplyMessageEnable"));
        check("enablePopMetrics", "true", Err("does not implement"));
        check("enableDLegerCommitLog", "true", Err("DLedger CommitLog mode is not supported; use controller mode (enableControllerMode=true"));
        check("enableDLegerCommitLog", "false", Ok(IgnoredWhy::FeatureOff));
        // Controller mode's unimplemented corners (design §4), each refused with why.
        check("fetchControllerAddrByDnsLookup", "true", Err("list them in controllerAddr"));
        check("fetchControllerAddrByDnsLookup", "false", Ok(IgnoredWhy::FeatureOff));
        check("enableAutoInSyncReplicas", "TRUE", Err("allAckInSyncStateSet=true"));
        check("enableAutoInSyncReplicas", "false", Ok(IgnoredWhy::FeatureOff));
        check("asyncLearner", "true", Err("asynchronous learners"));
        check("asyncLearner", "false", Ok(IgnoredWhy::FeatureOff));
        check("enableElectUncleanMaster", "false", Err("a controller setting, not a broker one"));
        check("enableElectUncleanMaster", "true", Err("controller's configuration"));
        check("storePathEpochFile", "/x/epoch", Err("one epoch file per shard"));
        for key in ["enableControllerMode", "controllerAddr", "brokerHeartbeatInterval", "syncBrokerMetadataPeriod", "masterLeaseEnable", "inSyncReplicas"] {
            assert!(crate::config::BROKER_CONF_KEYS.contains(&key), "{key} is mapped");
        }
        check("storePathIndex", "/x", Err("neither a RingMQ nor an Apache"));
        check("brokerNmae", "a", Err("did you mean `brokerName`?"));
        check("flushDiskTyp", "ASYNC_FLUSH", Err("did you mean `flushDiskType`?"));
        check("sendMessageThreadPoolNum", "4", Err("did you mean `sendMessageThreadPoolNums`?"));
        check("zzz", "1", Err("neither"));
    }

    /// A key broker.conf maps is never also listed as one without meaning here.
    #[test]
    fn mapped_keys_are_not_listed_as_ignored() {
        for key in crate::config::BROKER_CONF_KEYS {
            assert!(!STORE_TUNING_KEYS.contains(key) && !CADENCE_KEYS.contains(key) && !ALWAYS_ON_KEYS.contains(key), "{key} is mapped and listed as ignored");
        }
    }

    #[test]
    fn edit_distances() {
        // check(a, b, distance)
        let check = |a: &str, b: &str, d: usize| assert_eq!(edit_distance(a, b), d, "{a} {b}");
        check("", "", 0);
        check("abc", "abc", 0);
        check("abc", "abd", 1);
        check("brokernmae", "brokername", 2);
        check("abc", "", 3);
        check("flushdisktyp", "flushdisktype", 1);
    }
}
