//! VIEW_BROKER_STATS_DATA (315, mqadmin statsAll / rocketmq-dashboard): one stats key's
//! minute, hour and day figures (`metrics::windows`), summed over the shards — each
//! shard counts the puts and pulls it served, so the arriving shard gathers the others'
//! parts (`ringmqLocalOnly`) and merges them. In shard route mode the asked
//! shard-broker's own figures (`gather_broker_figures`).
//!
//! Names kept: TOPIC_PUT_NUMS / TOPIC_PUT_SIZE (key: topic) and GROUP_GET_NUMS /
//! GROUP_GET_SIZE (key: `topic@group`). Any other name, or a key no shard has counted,
//! is answered as Java answers a missing item: SYSTEM_ERROR "The stats <name> <key> not
//! exist".

use super::admin::{json_response, LOCAL_ONLY_EXT};
use super::{error_response, Shard};
use crate::metrics::windows::{stats_item, StatsName, WindowSum};
use ringmq_client::remoting::admin::BrokerStatsData;
use ringmq_client::remoting::codes::response_code as rs;
use ringmq_client::remoting::command::RemotingCommand;
use std::rc::Rc;

impl<R: crate::rt::Runtime> Shard<R> {
    pub(super) async fn handle_view_stats(self: &Rc<Self>, cmd: &RemotingCommand) -> RemotingCommand {
        let (Some(name_text), Some(key)) = (cmd.ext("statsName"), cmd.ext("statsKey")) else {
            return error_response(cmd, rs::INVALID_PARAMETER, "missing header field statsName or statsKey");
        };
        let not_exist = || error_response(cmd, rs::SYSTEM_ERROR, format!("The stats <{name_text}> <{key}> not exist"));
        let Some(name) = StatsName::parse(name_text) else { return not_exist() };
        let part = |w: Option<[WindowSum; 3]>| match w {
            Some(w) => serde_json::json!(w.iter().map(|x| [x.sum as i64, x.times as i64, x.span_ms]).collect::<Vec<_>>()),
            None => serde_json::Value::Null,
        };
        let mine = self.stats.windows_of(name, key, self.now_ms());
        if cmd.ext(LOCAL_ONLY_EXT).is_some() {
            return json_response(cmd, part(mine).to_string().into_bytes());
        }
        let others = match self.gather_broker_figures(cmd, "1").await {
            Ok(v) => v,
            Err(r) => return r,
        };
        let mut merged: Option<[WindowSum; 3]> = mine;
        for other in others.iter().filter_map(|v| v.as_array()) {
            let mut w = [WindowSum::default(); 3];
            for (i, row) in other.iter().take(3).enumerate() {
                let n = |j: usize| row.get(j).and_then(|v| v.as_i64()).unwrap_or(0);
                w[i] = WindowSum { sum: n(0).max(0) as u64, times: n(1).max(0) as u64, span_ms: n(2) };
            }
            merged = Some(match merged {
                None => w,
                Some(m) => std::array::from_fn(|i| WindowSum {
                    sum: m[i].sum + w[i].sum,
                    times: m[i].times + w[i].times,
                    // Shards sample at their own moments: the longest span covers them all.
                    span_ms: m[i].span_ms.max(w[i].span_ms),
                }),
            });
        }
        let Some(m) = merged else { return not_exist() };
        let data = BrokerStatsData { stats_minute: stats_item(m[0]), stats_hour: stats_item(m[1]), stats_day: stats_item(m[2]) };
        json_response(cmd, data.encode())
    }
}
