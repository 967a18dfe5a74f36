//! `ControllerState` cases after Apache's `ReplicasInfoManagerTest` (one `check` per
//! case: a script of requests with the code each must answer, then the set's final
//! master, epochs and SyncStateSet), and the apply-determinism property.

use super::*;
use crate::policy::LiveInfo;
use proptest::prelude::*;
use std::cell::RefCell;

/// Every registered replica is alive unless killed.
#[derive(Default)]
struct Harness {
    state: ControllerState,
    dead: RefCell<BTreeSet<i64>>,
    unclean: bool,
}

impl Liveness for Harness {
    fn live(&self, _c: &str, _n: &str, id: i64) -> Option<LiveInfo> {
        (!self.dead.borrow().contains(&id)).then_some(LiveInfo { epoch: 0, max_offset: id, priority: i32::MAX })
    }
}

#[derive(Debug, Clone)]
enum Req {
    /// 1013 for broker `id` of set "b" at "10.0.0.<id>:10911".
    ApplyId(i64),
    /// 1013 with another check code (another process claiming the id).
    ApplyIdOther(i64),
    /// 1003 from broker `id` at the given address.
    Register(i64, &'static str),
    /// 1002 from broker `id` (designate = false).
    Elect(i64),
    /// 1002 from the admin for broker `id` (designate = true).
    ElectDesignated(i64),
    /// 1002 from the controller (`brokerId` -1).
    ElectByController,
    /// 1001: master, master epoch, sss epoch, new set.
    Alter(i64, i32, i32, &'static [i64]),
    /// 1011 with ids ("" = whole set), isCleanLivingBroker.
    Clean(&'static str, bool),
    /// The replica stops heartbeating.
    Kill(i64),
    /// The replica heartbeats again.
    Revive(i64),
    /// Unclean election switched on.
    Unclean,
}

fn run(h: &mut Harness, req: &Req) -> CmdOutcome {
    let addr = |id: i64| format!("10.0.0.{id}:10911");
    let planned: Result<Cmd, CmdOutcome> = match req {
        Req::ApplyId(id) | Req::ApplyIdOther(id) => {
            let tag = if matches!(req, Req::ApplyIdOther(_)) { "other" } else { "1" };
            Ok(ControllerState::plan_apply_broker_id(&ApplyBrokerIdRequestHeader {
                cluster_name: "c".into(),
                broker_name: "b".into(),
                applied_broker_id: *id,
                register_check_code: format!("{};{tag}", addr(*id)),
            }))
        }
        Req::Register(id, address) => {
            let req = RegisterBrokerToControllerRequestHeader {
                cluster_name: "c".into(),
                broker_name: "b".into(),
                broker_id: *id,
                broker_address: address.to_string(),
                invoke_time: None,
            };
            match h.state.register_broker(&req, h) {
                Ok((answer, None)) => return answer,
                Ok((_, Some(cmd))) => Ok(cmd),
                Err(refusal) => Err(refusal),
            }
        }
        Req::Elect(id) | Req::ElectDesignated(id) => {
            let designate = matches!(req, Req::ElectDesignated(_));
            let req = ElectMasterRequestHeader {
                cluster_name: "c".into(),
                broker_name: "b".into(),
                broker_id: *id,
                designate_elect: designate,
                invoke_time: None,
            };
            h.state.plan_elect(&req, h.unclean, h, 1, 0)
        }
        Req::ElectByController => {
            let req = ElectMasterRequestHeader {
                cluster_name: "c".into(),
                broker_name: "b".into(),
                broker_id: CONTROLLER_TRIGGER_ID,
                designate_elect: false,
                invoke_time: None,
            };
            h.state.plan_elect(&req, h.unclean, h, 1, 0)
        }
        Req::Alter(master, master_epoch, sss_epoch, set) => {
            let req = AlterSyncStateSetRequestHeader {
                broker_name: "b".into(),
                master_broker_id: *master,
                master_epoch: *master_epoch,
                invoke_time: None,
            };
            let body = SyncStateSet { sync_state_set: set.to_vec(), sync_state_set_epoch: *sss_epoch };
            h.state.plan_alter(&req, &body, h)
        }
        Req::Clean(ids, living) => {
            let req = CleanControllerBrokerDataRequestHeader {
                cluster_name: Some("c".into()),
                broker_name: "b".into(),
                broker_controller_ids_to_clean: Some(ids.to_string()),
                is_clean_living_broker: *living,
                invoke_time: None,
            };
            h.state.plan_clean(&req, h)
        }
        Req::Kill(id) => {
            h.dead.borrow_mut().insert(*id);
            return CmdOutcome::success();
        }
        Req::Revive(id) => {
            h.dead.borrow_mut().remove(id);
            return CmdOutcome::success();
        }
        Req::Unclean => {
            h.unclean = true;
            return CmdOutcome::success();
        }
    };
    match planned {
        Ok(cmd) => h.state.apply(&cmd),
        Err(refusal) => refusal,
    }
}

/// The set's final (master, master epoch, SyncStateSet, sss epoch); `None` = no set.
type Final = Option<(Option<i64>, i32, &'static [i64], i32)>;

fn check(case: &str, steps: &[(Req, i32)], expected: Final) {
    let mut h = Harness::default();
    for (i, (req, code)) in steps.iter().enumerate() {
        let out = run(&mut h, req);
        assert_eq!(out.code, *code, "{case}: step {i} {req:?} answered {:?}", out.remark);
    }
    let got = h.state.set("b").map(|s| (s.master, s.master_epoch, s.sync_state_set.iter().copied().collect::<Vec<_>>(), s.sss_epoch));
    let expected = expected.map(|(m, me, sss, se)| (m, me, sss.to_vec(), se));
    assert_eq!(got, expected, "{case}");
}

use ringmq_client::remoting::codes::response_code::*;

fn three_registered() -> Vec<(Req, i32)> {
    vec![(Req::ApplyId(1), SUCCESS), (Req::ApplyId(2), SUCCESS), (Req::ApplyId(3), SUCCESS)]
}

fn with(mut base: Vec<(Req, i32)>, more: &[(Req, i32)]) -> Vec<(Req, i32)> {
    base.extend_from_slice(more);
    base
}

#[test]
fn replicas_info_manager_cases() {
    check("register: a new set needs id 1", &[(Req::ApplyId(2), CONTROLLER_BROKER_ID_INVALID)], None);
    check("register three", &three_registered(), Some((None, 0, &[], 0)));
    check(
        "apply the same id twice: same check code is idempotent, another is refused",
        &with(three_registered(), &[(Req::ApplyId(2), SUCCESS), (Req::ApplyIdOther(2), CONTROLLER_BROKER_ID_INVALID)]),
        Some((None, 0, &[], 0)),
    );
    check(
        "register (1003) before apply is refused; after, answers; a moved broker is updated",
        &with(
            vec![(Req::Register(1, "x:1"), CONTROLLER_BROKER_NEED_TO_BE_REGISTERED)],
            &[(Req::ApplyId(1), SUCCESS), (Req::Register(1, "10.0.0.1:10911"), SUCCESS), (Req::Register(1, "moved:1"), SUCCESS)],
        ),
        Some((None, 0, &[], 0)),
    );
    check("elect before register", &[(Req::Elect(1), CONTROLLER_BROKER_NEED_TO_BE_REGISTERED)], None);
    check("elect first time = requester", &with(three_registered(), &[(Req::Elect(2), SUCCESS)]), Some((Some(2), 1, &[2], 1)));
    check(
        "elect again with the master alive: MASTER_STILL_EXIST, nothing changes",
        &with(three_registered(), &[(Req::Elect(1), SUCCESS), (Req::Elect(2), CONTROLLER_MASTER_STILL_EXIST)]),
        Some((Some(1), 1, &[1], 1)),
    );
    check(
        "alter SyncStateSet, then elect from it only when the master dies",
        &with(
            three_registered(),
            &[
                (Req::Elect(1), SUCCESS),
                (Req::Alter(1, 1, 1, &[1, 2]), SUCCESS),
                (Req::Kill(1), SUCCESS),
                (Req::ElectByController, SUCCESS),
            ],
        ),
        Some((Some(2), 2, &[2], 3)),
    );
    check(
        "unclean off: no alive SyncStateSet member → controller clears the master (2004)",
        &with(three_registered(), &[(Req::Elect(1), SUCCESS), (Req::Kill(1), SUCCESS), (Req::ElectByController, CONTROLLER_MASTER_NOT_AVAILABLE)]),
        Some((None, 2, &[1], 1)),
    );
    check(
        "unclean off: a broker asking gets ELECT_MASTER_FAILED and nothing changes",
        &with(three_registered(), &[(Req::Elect(1), SUCCESS), (Req::Kill(1), SUCCESS), (Req::Elect(3), CONTROLLER_ELECT_MASTER_FAILED)]),
        Some((Some(1), 1, &[1], 1)),
    );
    check(
        "unclean on: the best alive replica (largest offset here)",
        &with(
            three_registered(),
            &[(Req::Elect(1), SUCCESS), (Req::Kill(1), SUCCESS), (Req::Unclean, SUCCESS), (Req::ElectByController, SUCCESS)],
        ),
        Some((Some(3), 2, &[3], 2)),
    );
    check(
        "designated election: eligible wins over the alive master, ineligible fails",
        &with(
            three_registered(),
            &[
                (Req::Elect(1), SUCCESS),
                (Req::Alter(1, 1, 1, &[1, 2]), SUCCESS),
                (Req::ElectDesignated(3), CONTROLLER_ELECT_MASTER_FAILED),
                (Req::ElectDesignated(2), SUCCESS),
            ],
        ),
        Some((Some(2), 2, &[2], 3)),
    );
    check(
        "alter with stale epochs and bad sets",
        &with(
            three_registered(),
            &[
                (Req::Alter(1, 0, 0, &[1, 2]), CONTROLLER_INVALID_MASTER),
                (Req::Elect(1), SUCCESS),
                (Req::Alter(1, 1, 1, &[1]), CONTROLLER_ALTER_SYNC_STATE_SET_FAILED),
                (Req::Alter(2, 1, 1, &[1, 2]), CONTROLLER_INVALID_MASTER),
                (Req::Alter(1, 0, 1, &[1, 2]), CONTROLLER_FENCED_MASTER_EPOCH),
                (Req::Alter(1, 1, 0, &[1, 2]), CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH),
                (Req::Alter(1, 1, 1, &[1, 9]), CONTROLLER_INVALID_REPLICAS),
                (Req::Alter(1, 1, 1, &[2, 3]), CONTROLLER_ALTER_SYNC_STATE_SET_FAILED),
                (Req::Kill(3), SUCCESS),
                (Req::Alter(1, 1, 1, &[1, 3]), CONTROLLER_BROKER_NOT_ALIVE),
                (Req::Alter(1, 1, 1, &[1, 2]), SUCCESS),
                (Req::Alter(1, 1, 1, &[1]), CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH),
            ],
        ),
        Some((Some(1), 1, &[1, 2], 2)),
    );
    // Apache `testRegisterWithOldMasterInactive`: only broker 3 alive, it asks for itself.
    check(
        "old master inactive: the asking SyncStateSet member is elected",
        &with(
            three_registered(),
            &[
                (Req::Elect(1), SUCCESS),
                (Req::Alter(1, 1, 1, &[1, 2, 3]), SUCCESS),
                (Req::Kill(1), SUCCESS),
                (Req::Kill(2), SUCCESS),
                (Req::Elect(3), SUCCESS),
            ],
        ),
        Some((Some(3), 2, &[3], 3)),
    );
    // Apache `testElectMaster` (admin part): the designated broker must be alive; the
    // alive old master designated again is MASTER_STILL_EXIST.
    check(
        "admin designation: dead refused, old master still exists, alive elected",
        &with(
            three_registered(),
            &[
                (Req::Elect(2), SUCCESS),
                (Req::Alter(2, 1, 1, &[1, 2, 3]), SUCCESS),
                (Req::Kill(1), SUCCESS),
                (Req::ElectDesignated(1), CONTROLLER_ELECT_MASTER_FAILED),
                (Req::ElectDesignated(2), CONTROLLER_MASTER_STILL_EXIST),
                (Req::Revive(1), SUCCESS),
                (Req::Kill(2), SUCCESS),
                (Req::ElectDesignated(1), SUCCESS),
            ],
        ),
        Some((Some(1), 2, &[1], 3)),
    );
    // Apache `testAllReplicasShutdownAndRestart`, then the old master returns.
    check(
        "all replicas down: master cleared (2004); the returning member is elected",
        &with(
            three_registered(),
            &[
                (Req::Elect(1), SUCCESS),
                (Req::Kill(1), SUCCESS),
                (Req::Kill(2), SUCCESS),
                (Req::Kill(3), SUCCESS),
                (Req::ElectByController, CONTROLLER_MASTER_NOT_AVAILABLE),
                (Req::Revive(2), SUCCESS),
                (Req::Elect(2), CONTROLLER_ELECT_MASTER_FAILED),
                (Req::Revive(1), SUCCESS),
                (Req::Elect(1), SUCCESS),
            ],
        ),
        Some((Some(1), 3, &[1], 2)),
    );
    check(
        "clean: refused while the master lives, a living id refused, dead ids removed",
        &with(
            three_registered(),
            &[
                (Req::Elect(1), SUCCESS),
                (Req::Alter(1, 1, 1, &[1, 2]), SUCCESS),
                (Req::Clean("", false), CONTROLLER_INVALID_CLEAN_BROKER_METADATA),
                (Req::Clean("2", false), CONTROLLER_INVALID_CLEAN_BROKER_METADATA),
                (Req::Clean("x;2", true), CONTROLLER_INVALID_CLEAN_BROKER_METADATA),
                (Req::Kill(2), SUCCESS),
                (Req::Clean("2", false), SUCCESS),
            ],
        ),
        Some((Some(1), 1, &[1], 2)),
    );
    check(
        "clean the living set on request; then it is gone",
        &with(
            three_registered(),
            &[(Req::Elect(1), SUCCESS), (Req::Clean("", true), SUCCESS), (Req::Clean("", true), CONTROLLER_INVALID_CLEAN_BROKER_METADATA)],
        ),
        None,
    );
}

#[test]
fn next_broker_id_and_reads() {
    let mut h = Harness::default();
    let next = |s: &ControllerState| s.next_broker_id("c", "b").ext.iter().find(|(k, _)| k == "nextBrokerId").map(|(_, v)| v.clone());
    assert_eq!(next(&h.state).as_deref(), Some("1"));
    for (req, _) in three_registered() {
        run(&mut h, &req);
    }
    assert_eq!(next(&h.state).as_deref(), Some("4"));
    assert_eq!(h.state.replica_info("nope").code, CONTROLLER_BROKER_METADATA_NOT_EXIST);
    run(&mut h, &Req::Elect(1));
    let info = h.state.replica_info("b");
    assert!(info.ext.contains(&("masterAddress".to_string(), "10.0.0.1:10911".to_string())), "{info:?}");
    let data = h.state.sync_state_data(&["b".to_string(), "nope".to_string()], &h);
    let body = BrokerReplicasInfo::decode(&data.body).expect("body");
    let b = &body.replicas_info_table["b"];
    assert_eq!((b.master_broker_id, b.in_sync_replicas.len(), b.not_in_sync_replicas.len()), (Some(1), 1, 2));
    assert_eq!(body.replicas_info_table.len(), 1);
}

#[test]
fn bounds_hold() {
    let mut h = Harness::default();
    for id in 1..=(REPLICAS_PER_SET_MAX as i64 + 1) {
        let out = run(&mut h, &Req::ApplyId(id));
        let expected = if id as usize <= REPLICAS_PER_SET_MAX { SUCCESS } else { CONTROLLER_BROKER_ID_INVALID };
        assert_eq!(out.code, expected, "id {id}");
    }
    run(&mut h, &Req::Elect(1));
    for _ in 0..(ELECTION_HISTORY_MAX + 5) {
        let mut designate = 2;
        if h.state.set("b").and_then(|s| s.master) == Some(2) {
            designate = 1;
        }
        let set = h.state.set("b").expect("set");
        let (m, me, se) = (set.master.expect("master"), set.master_epoch, set.sss_epoch);
        assert_eq!(h.state.apply(&Cmd::AlterSyncStateSet { name: "b".into(), master: m, master_epoch: me, sss_epoch: se, new_set: BTreeSet::from([1, 2]) }).code, SUCCESS);
        assert_eq!(run(&mut h, &Req::ElectDesignated(designate)).code, SUCCESS);
    }
    assert_eq!(h.state.set("b").expect("set").history.len(), ELECTION_HISTORY_MAX);
}

fn arb_cmd() -> impl Strategy<Value = Cmd> {
    let name = prop_oneof![Just("a".to_string()), Just("b".to_string())];
    let id = 0i64..5;
    let epoch = 0i32..6;
    let ids = proptest::collection::btree_set(0i64..5, 0..4);
    prop_oneof![
        (name.clone(), id.clone(), 0u8..2).prop_map(|(name, id, code)| Cmd::ApplyBrokerId {
            cluster: "c".into(),
            name,
            id,
            address: format!("h{id}"),
            check_code: format!("h{id};{code}"),
        }),
        (name.clone(), id.clone()).prop_map(|(name, id)| Cmd::UpdateBrokerAddress { cluster: "c".into(), name, id, address: "moved".into() }),
        (name.clone(), id.clone(), epoch.clone(), epoch.clone(), ids.clone()).prop_map(|(name, master, master_epoch, sss_epoch, new_set)| {
            Cmd::AlterSyncStateSet { name, master, master_epoch, sss_epoch, new_set }
        }),
        (name.clone(), epoch.clone(), epoch.clone(), proptest::option::of(id.clone())).prop_map(|(name, me, se, new_master)| {
            Cmd::ElectMaster {
                name,
                expect_master_epoch: me,
                expect_sss_epoch: se,
                new_master,
                record: ElectionRecord {
                    master_epoch: 0,
                    old_master: None,
                    new_master,
                    trigger: Trigger::Controller,
                    candidates: vec![],
                    raft_term: 1,
                    leader_wall_ms: 0,
                },
            }
        }),
        (name.clone(), proptest::option::of(ids)).prop_map(|(name, ids)| Cmd::CleanBrokerData { name, ids }),
        (name, epoch).prop_map(|(name, epoch)| Cmd::RecordEpochStart { name, epoch, starts: vec![7] }),
    ]
}

proptest! {
    /// Two nodes applying the same log hold the same state and answer the same; epochs
    /// never decrease while a set exists; masters and SyncStateSets hold replicas only.
    #[test]
    fn apply_is_deterministic_and_epochs_never_decrease(cmds in proptest::collection::vec(arb_cmd(), 0..60)) {
        let (mut a, mut b) = (ControllerState::default(), ControllerState::default());
        for cmd in &cmds {
            let before = a.clone();
            let (oa, ob) = (a.apply(cmd), b.apply(cmd));
            prop_assert_eq!(&oa, &ob);
            prop_assert_eq!(&a, &b);
            // 2004 is the one answer that changes state: the master is cleared.
            if !oa.is_success() && oa.code != CONTROLLER_MASTER_NOT_AVAILABLE {
                prop_assert_eq!(&a, &before, "a refused command changes nothing");
            }
            for (name, set) in &a.sets {
                if let Some(old) = before.sets.get(name) {
                    prop_assert!(set.master_epoch >= old.master_epoch && set.sss_epoch >= old.sss_epoch);
                }
                if let Some(m) = set.master {
                    prop_assert!(set.replicas.contains_key(&m));
                }
                prop_assert!(set.sync_state_set.iter().all(|id| set.replicas.contains_key(id)));
                prop_assert!(set.history.len() <= ELECTION_HISTORY_MAX && set.epoch_starts.len() <= EPOCH_STARTS_MAX);
            }
            let json = serde_json::to_vec(&a).expect("snapshot");
            let back: ControllerState = serde_json::from_slice(&json).expect("snapshot back");
            prop_assert_eq!(&back, &a);
        }
    }
}
