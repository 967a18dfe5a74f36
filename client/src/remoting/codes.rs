//! Request, response and language codes, numbered exactly as Apache RocketMQ's
//! `RequestCode`, `ResponseCode` and `LanguageCode` (DESIGN.md §6 is authoritative for
//! the ones it lists).
//!
//! Invariant: every constant appears once in its table, so `name(code)` is total over
//! the table and codes never collide within one table (checked by tests).

macro_rules! code_table {
    ($(#[$m:meta])* $vis:vis mod $module:ident { $($name:ident = $value:expr,)* }) => {
        $(#[$m])*
        $vis mod $module {
            $(pub const $name: i32 = $value;)*

            /// Every `(name, code)` of the table, for logs and admin tools.
            pub const ALL: &[(&str, i32)] = &[$((stringify!($name), $name),)*];

            /// The constant's name, for logs.
            pub fn name(code: i32) -> Option<&'static str> {
                ALL.iter().find(|(_, c)| *c == code).map(|(n, _)| *n)
            }
        }
    };
}

code_table! {
    /// Request codes (`RequestCode.java`).
    pub mod request_code {
        SEND_MESSAGE = 10,
        PULL_MESSAGE = 11,
        QUERY_MESSAGE = 12,
        QUERY_BROKER_OFFSET = 13,
        QUERY_CONSUMER_OFFSET = 14,
        UPDATE_CONSUMER_OFFSET = 15,
        UPDATE_AND_CREATE_TOPIC = 17,
        GET_ALL_TOPIC_CONFIG = 21,
        GET_TOPIC_CONFIG_LIST = 22,
        GET_TOPIC_NAME_LIST = 23,
        UPDATE_BROKER_CONFIG = 25,
        GET_BROKER_CONFIG = 26,
        TRIGGER_DELETE_FILES = 27,
        GET_BROKER_RUNTIME_INFO = 28,
        SEARCH_OFFSET_BY_TIMESTAMP = 29,
        GET_MAX_OFFSET = 30,
        GET_MIN_OFFSET = 31,
        GET_EARLIEST_MSG_STORETIME = 32,
        VIEW_MESSAGE_BY_ID = 33,
        HEART_BEAT = 34,
        UNREGISTER_CLIENT = 35,
        CONSUMER_SEND_MSG_BACK = 36,
        END_TRANSACTION = 37,
        GET_CONSUMER_LIST_BY_GROUP = 38,
        CHECK_TRANSACTION_STATE = 39,
        NOTIFY_CONSUMER_IDS_CHANGED = 40,
        LOCK_BATCH_MQ = 41,
        UNLOCK_BATCH_MQ = 42,
        GET_ALL_CONSUMER_OFFSET = 43,
        GET_ALL_DELAY_OFFSET = 45,
        CHECK_CLIENT_CONFIG = 46,
        PUT_KV_CONFIG = 100,
        GET_KV_CONFIG = 101,
        DELETE_KV_CONFIG = 102,
        REGISTER_BROKER = 103,
        UNREGISTER_BROKER = 104,
        GET_ROUTEINFO_BY_TOPIC = 105,
        GET_BROKER_CLUSTER_INFO = 106,
        UPDATE_AND_CREATE_SUBSCRIPTIONGROUP = 200,
        GET_ALL_SUBSCRIPTIONGROUP_CONFIG = 201,
        GET_TOPIC_STATS_INFO = 202,
        GET_CONSUMER_CONNECTION_LIST = 203,
        GET_PRODUCER_CONNECTION_LIST = 204,
        WIPE_WRITE_PERM_OF_BROKER = 205,
        GET_ALL_TOPIC_LIST_FROM_NAMESERVER = 206,
        DELETE_SUBSCRIPTIONGROUP = 207,
        GET_CONSUME_STATS = 208,
        DELETE_TOPIC_IN_BROKER = 215,
        DELETE_TOPIC_IN_NAMESRV = 216,
        REGISTER_TOPIC_IN_NAMESRV = 217,
        GET_KVLIST_BY_NAMESPACE = 219,
        RESET_CONSUMER_CLIENT_OFFSET = 220,
        INVOKE_BROKER_TO_RESET_OFFSET = 222,
        GET_TOPICS_BY_CLUSTER = 224,
        QUERY_TOPIC_CONSUME_BY_WHO = 300,
        GET_SYSTEM_TOPIC_LIST_FROM_NS = 304,
        GET_CONSUMER_RUNNING_INFO = 307,
        CONSUME_MESSAGE_DIRECTLY = 309,
        SEND_MESSAGE_V2 = 310,
        VIEW_BROKER_STATS_DATA = 315,
        UPDATE_NAMESRV_CONFIG = 318,
        GET_NAMESRV_CONFIG = 319,
        SEND_BATCH_MESSAGE = 320,
        QUERY_CONSUME_QUEUE = 321,
        QUERY_DATA_VERSION = 322,
        SEND_REPLY_MESSAGE = 324,
        SEND_REPLY_MESSAGE_V2 = 325,
        PUSH_REPLY_MESSAGE_TO_CLIENT = 326,
        ADD_WRITE_PERM_OF_BROKER = 327,
        GET_TOPIC_CONFIG = 351,
        GET_SUBSCRIPTIONGROUP_CONFIG = 352,
        LITE_PULL_MESSAGE = 361,
        GET_BROKER_MEMBER_GROUP = 901,
        // Controller mode (RocketMQ 5, docs/design/controller.md §2.3-2.4).
        BROKER_HEARTBEAT = 904,
        EXCHANGE_BROKER_HA_INFO = 906,
        CONTROLLER_ALTER_SYNC_STATE_SET = 1001,
        CONTROLLER_ELECT_MASTER = 1002,
        CONTROLLER_REGISTER_BROKER = 1003,
        CONTROLLER_GET_REPLICA_INFO = 1004,
        CONTROLLER_GET_METADATA_INFO = 1005,
        CONTROLLER_GET_SYNC_STATE_DATA = 1006,
        GET_BROKER_EPOCH_CACHE = 1007,
        NOTIFY_BROKER_ROLE_CHANGED = 1008,
        UPDATE_CONTROLLER_CONFIG = 1009,
        GET_CONTROLLER_CONFIG = 1010,
        CLEAN_BROKER_DATA = 1011,
        CONTROLLER_GET_NEXT_BROKER_ID = 1012,
        CONTROLLER_APPLY_BROKER_ID = 1013,
        // POP consumption (RocketMQ 5, numbers of Apache 5.3.3; issue 28).
        POP_MESSAGE = 200050,
        ACK_MESSAGE = 200051,
        PEEK_MESSAGE = 200052,
        CHANGE_MESSAGE_INVISIBLETIME = 200053,
        NOTIFICATION = 200054,
        POLLING_INFO = 200055,
        BATCH_ACK_MESSAGE = 200151,
        AUTH_CREATE_USER = 3001,
        AUTH_UPDATE_USER = 3002,
        AUTH_DELETE_USER = 3003,
        AUTH_GET_USER = 3004,
        AUTH_LIST_USER = 3005,
        AUTH_CREATE_ACL = 3006,
        AUTH_UPDATE_ACL = 3007,
        AUTH_DELETE_ACL = 3008,
        AUTH_GET_ACL = 3009,
        AUTH_LIST_ACL = 3010,
    }
}

code_table! {
    /// Response codes (`ResponseCode.java` and `RemotingSysResponseCode.java`).
    pub mod response_code {
        SUCCESS = 0,
        SYSTEM_ERROR = 1,
        SYSTEM_BUSY = 2,
        REQUEST_CODE_NOT_SUPPORTED = 3,
        TRANSACTION_FAILED = 4,
        FLUSH_DISK_TIMEOUT = 10,
        SLAVE_NOT_AVAILABLE = 11,
        FLUSH_SLAVE_TIMEOUT = 12,
        MESSAGE_ILLEGAL = 13,
        SERVICE_NOT_AVAILABLE = 14,
        VERSION_NOT_SUPPORTED = 15,
        NO_PERMISSION = 16,
        TOPIC_NOT_EXIST = 17,
        TOPIC_EXIST_ALREADY = 18,
        PULL_NOT_FOUND = 19,
        PULL_RETRY_IMMEDIATELY = 20,
        PULL_OFFSET_MOVED = 21,
        QUERY_NOT_FOUND = 22,
        SUBSCRIPTION_PARSE_FAILED = 23,
        SUBSCRIPTION_NOT_EXIST = 24,
        SUBSCRIPTION_NOT_LATEST = 25,
        SUBSCRIPTION_GROUP_NOT_EXIST = 26,
        FILTER_DATA_NOT_EXIST = 27,
        FILTER_DATA_NOT_LATEST = 28,
        INVALID_PARAMETER = 29,
        TRANSACTION_SHOULD_COMMIT = 200,
        TRANSACTION_SHOULD_ROLLBACK = 201,
        TRANSACTION_STATE_UNKNOW = 202,
        TRANSACTION_STATE_GROUP_WRONG = 203,
        NO_BUYER_ID = 204,
        NOT_IN_CURRENT_UNIT = 205,
        CONSUMER_NOT_ONLINE = 206,
        CONSUME_MSG_TIMEOUT = 207,
        NO_MESSAGE = 208,
        FLOW_CONTROL = 215,
        NOT_LEADER_FOR_QUEUE = 501,
        ILLEGAL_OPERATION = 604,
        // Controller mode (`ResponseCode.java:103-128`).
        CONTROLLER_FENCED_MASTER_EPOCH = 2000,
        CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH = 2001,
        CONTROLLER_INVALID_MASTER = 2002,
        CONTROLLER_INVALID_REPLICAS = 2003,
        CONTROLLER_MASTER_NOT_AVAILABLE = 2004,
        CONTROLLER_INVALID_REQUEST = 2005,
        CONTROLLER_BROKER_NOT_ALIVE = 2006,
        CONTROLLER_NOT_LEADER = 2007,
        CONTROLLER_BROKER_METADATA_NOT_EXIST = 2008,
        CONTROLLER_INVALID_CLEAN_BROKER_METADATA = 2009,
        CONTROLLER_BROKER_NEED_TO_BE_REGISTERED = 2010,
        CONTROLLER_MASTER_STILL_EXIST = 2011,
        CONTROLLER_ELECT_MASTER_FAILED = 2012,
        CONTROLLER_ALTER_SYNC_STATE_SET_FAILED = 2013,
        CONTROLLER_BROKER_ID_INVALID = 2014,
        CONTROLLER_JRAFT_INTERNAL_ERROR = 2015,
        CONTROLLER_BROKER_LIVE_INFO_NOT_EXISTS = 2016,
    }
}

/// `LanguageCode` names in ordinal order: the ROCKETMQ binary header carries the
/// ordinal as an i8, the JSON header the name.
pub const LANGUAGE_NAMES: [&str; 13] =
    ["JAVA", "CPP", "DOTNET", "PYTHON", "DELPHI", "ERLANG", "RUBY", "OTHER", "HTTP", "GO", "PHP", "OMS", "RUST"];

/// The code binary headers carry for a language this table does not know.
pub const LANGUAGE_OTHER_CODE: u8 = 7;

/// Binary code of a language name; unknown names map to OTHER rather than failing
/// because the language is informational only.
pub fn language_code(name: &str) -> u8 {
    LANGUAGE_NAMES.iter().position(|n| *n == name).map_or(LANGUAGE_OTHER_CODE, |i| i as u8)
}

pub fn language_name(code: i64) -> Option<&'static str> {
    usize::try_from(code).ok().and_then(|i| LANGUAGE_NAMES.get(i).copied())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn check(table: &[(&str, i32)], name: &str, expected: i32) {
        let got = table.iter().find(|(n, _)| *n == name).map(|(_, c)| *c);
        assert_eq!(got, Some(expected), "code of {name}");
    }

    #[test]
    fn design_md_request_codes() {
        let t = request_code::ALL;
        for (name, code) in [
            ("SEND_MESSAGE", 10),
            ("PULL_MESSAGE", 11),
            ("QUERY_MESSAGE", 12),
            ("QUERY_CONSUMER_OFFSET", 14),
            ("UPDATE_CONSUMER_OFFSET", 15),
            ("UPDATE_AND_CREATE_TOPIC", 17),
            ("SEARCH_OFFSET_BY_TIMESTAMP", 29),
            ("GET_MAX_OFFSET", 30),
            ("GET_MIN_OFFSET", 31),
            ("GET_EARLIEST_MSG_STORETIME", 32),
            ("VIEW_MESSAGE_BY_ID", 33),
            ("HEART_BEAT", 34),
            ("UNREGISTER_CLIENT", 35),
            ("CONSUMER_SEND_MSG_BACK", 36),
            ("END_TRANSACTION", 37),
            ("GET_CONSUMER_LIST_BY_GROUP", 38),
            ("CHECK_TRANSACTION_STATE", 39),
            ("NOTIFY_CONSUMER_IDS_CHANGED", 40),
            ("LOCK_BATCH_MQ", 41),
            ("UNLOCK_BATCH_MQ", 42),
            ("PUT_KV_CONFIG", 100),
            ("GET_KV_CONFIG", 101),
            ("DELETE_KV_CONFIG", 102),
            ("REGISTER_BROKER", 103),
            ("UNREGISTER_BROKER", 104),
            ("GET_ROUTEINFO_BY_TOPIC", 105),
            ("GET_BROKER_CLUSTER_INFO", 106),
            ("UPDATE_AND_CREATE_SUBSCRIPTIONGROUP", 200),
            ("SEND_MESSAGE_V2", 310),
            ("SEND_BATCH_MESSAGE", 320),
            ("GET_BROKER_RUNTIME_INFO", 28),
            ("GET_ALL_TOPIC_CONFIG", 21),
            ("UPDATE_BROKER_CONFIG", 25),
            ("GET_BROKER_CONFIG", 26),
            ("GET_TOPIC_STATS_INFO", 202),
            ("GET_CONSUMER_CONNECTION_LIST", 203),
            ("GET_TOPICS_BY_CLUSTER", 224),
            ("GET_CONSUME_STATS", 208),
            ("DELETE_TOPIC_IN_BROKER", 215),
            ("GET_ALL_SUBSCRIPTIONGROUP_CONFIG", 201),
            ("DELETE_TOPIC_IN_NAMESRV", 216),
            ("GET_KVLIST_BY_NAMESPACE", 219),
            ("QUERY_DATA_VERSION", 322),
            ("LITE_PULL_MESSAGE", 361),
            ("GET_ALL_TOPIC_LIST_FROM_NAMESERVER", 206),
            ("RESET_CONSUMER_CLIENT_OFFSET", 220),
            ("INVOKE_BROKER_TO_RESET_OFFSET", 222),
            ("GET_CONSUMER_RUNNING_INFO", 307),
            ("CONSUME_MESSAGE_DIRECTLY", 309),
            ("VIEW_BROKER_STATS_DATA", 315),
        ] {
            check(t, name, code);
        }
    }

    #[test]
    fn design_md_response_codes() {
        let t = response_code::ALL;
        for (name, code) in [
            ("SUCCESS", 0),
            ("SYSTEM_ERROR", 1),
            ("SYSTEM_BUSY", 2),
            ("REQUEST_CODE_NOT_SUPPORTED", 3),
            ("FLUSH_DISK_TIMEOUT", 10),
            ("SLAVE_NOT_AVAILABLE", 11),
            ("FLUSH_SLAVE_TIMEOUT", 12),
            ("MESSAGE_ILLEGAL", 13),
            ("SERVICE_NOT_AVAILABLE", 14),
            ("NO_PERMISSION", 16),
            ("TOPIC_NOT_EXIST", 17),
            ("PULL_NOT_FOUND", 19),
            ("PULL_RETRY_IMMEDIATELY", 20),
            ("PULL_OFFSET_MOVED", 21),
            ("QUERY_NOT_FOUND", 22),
            ("SUBSCRIPTION_NOT_EXIST", 24),
            ("INVALID_PARAMETER", 29),
            ("CONSUMER_NOT_ONLINE", 206),
            ("CONSUME_MSG_TIMEOUT", 207),
        ] {
            check(t, name, code);
        }
    }

    #[test]
    fn tables_have_unique_codes() {
        for table in [request_code::ALL, response_code::ALL] {
            let codes: HashSet<i32> = table.iter().map(|(_, c)| *c).collect();
            assert_eq!(codes.len(), table.len());
        }
        assert_eq!(request_code::name(34), Some("HEART_BEAT"));
        assert_eq!(response_code::name(-5), None);
    }

    #[test]
    fn languages() {
        for (name, code) in [
            ("JAVA", 0),
            ("CPP", 1),
            ("DOTNET", 2),
            ("PYTHON", 3),
            ("DELPHI", 4),
            ("ERLANG", 5),
            ("RUBY", 6),
            ("OTHER", 7),
            ("HTTP", 8),
            ("GO", 9),
            ("PHP", 10),
            ("OMS", 11),
            ("RUST", 12),
            ("NODE", 7),
        ] {
            assert_eq!(language_code(name), code, "{name}");
        }
        assert_eq!(language_name(12), Some("RUST"));
        assert_eq!(language_name(13), None);
        assert_eq!(language_name(-1), None);
    }

    /// The POP codes as Apache 5.3.3 numbers them (the release the 5.x SDKs' proxy speaks).
    #[test]
    fn pop_codes_match_apache_5_3_3() {
        for (name, code) in [
            ("POP_MESSAGE", 200050),
            ("ACK_MESSAGE", 200051),
            ("PEEK_MESSAGE", 200052),
            ("CHANGE_MESSAGE_INVISIBLETIME", 200053),
            ("NOTIFICATION", 200054),
            ("POLLING_INFO", 200055),
            ("BATCH_ACK_MESSAGE", 200151),
        ] {
            assert_eq!(request_code::ALL.iter().find(|(n, _)| *n == name).map(|(_, c)| *c), Some(code), "{name}");
        }
    }

    /// Every controller-mode code with its number in Apache's `RequestCode.java` /
    /// `ResponseCode.java` at 8fc57f1468 (docs/design/controller.md §2.3).
    #[test]
    fn controller_codes_match_apache() {
        for (name, code) in [
            ("BROKER_HEARTBEAT", 904),
            ("EXCHANGE_BROKER_HA_INFO", 906),
            ("CONTROLLER_ALTER_SYNC_STATE_SET", 1001),
            ("CONTROLLER_ELECT_MASTER", 1002),
            ("CONTROLLER_REGISTER_BROKER", 1003),
            ("CONTROLLER_GET_REPLICA_INFO", 1004),
            ("CONTROLLER_GET_METADATA_INFO", 1005),
            ("CONTROLLER_GET_SYNC_STATE_DATA", 1006),
            ("GET_BROKER_EPOCH_CACHE", 1007),
            ("NOTIFY_BROKER_ROLE_CHANGED", 1008),
            ("UPDATE_CONTROLLER_CONFIG", 1009),
            ("GET_CONTROLLER_CONFIG", 1010),
            ("CLEAN_BROKER_DATA", 1011),
            ("CONTROLLER_GET_NEXT_BROKER_ID", 1012),
            ("CONTROLLER_APPLY_BROKER_ID", 1013),
        ] {
            check(request_code::ALL, name, code);
        }
        for (name, code) in [
            ("CONTROLLER_FENCED_MASTER_EPOCH", 2000),
            ("CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH", 2001),
            ("CONTROLLER_INVALID_MASTER", 2002),
            ("CONTROLLER_INVALID_REPLICAS", 2003),
            ("CONTROLLER_MASTER_NOT_AVAILABLE", 2004),
            ("CONTROLLER_INVALID_REQUEST", 2005),
            ("CONTROLLER_BROKER_NOT_ALIVE", 2006),
            ("CONTROLLER_NOT_LEADER", 2007),
            ("CONTROLLER_BROKER_METADATA_NOT_EXIST", 2008),
            ("CONTROLLER_INVALID_CLEAN_BROKER_METADATA", 2009),
            ("CONTROLLER_BROKER_NEED_TO_BE_REGISTERED", 2010),
            ("CONTROLLER_MASTER_STILL_EXIST", 2011),
            ("CONTROLLER_ELECT_MASTER_FAILED", 2012),
            ("CONTROLLER_ALTER_SYNC_STATE_SET_FAILED", 2013),
            ("CONTROLLER_BROKER_ID_INVALID", 2014),
            ("CONTROLLER_JRAFT_INTERNAL_ERROR", 2015),
            ("CONTROLLER_BROKER_LIVE_INFO_NOT_EXISTS", 2016),
        ] {
            check(response_code::ALL, name, code);
        }
        let controller_responses = response_code::ALL.iter().filter(|(n, _)| n.starts_with("CONTROLLER_")).count();
        assert_eq!(controller_responses, 17, "2000..=2016, no more, no fewer");
    }
}
