//! Running tallies elect exactly what the pure rule elects on the full
//! history (issue 20). Random sequences of reports (honest or lying,
//! some failing their output checks, in two candidate spaces, from sessions
//! on three devices of two architectures) and flags are applied to a real
//! database; after every event its winners are compared with [`elect`]
//! over every session's latest report, recounted from the start, with the
//! same incumbents and the same rule for spaces.
//!
//! The migration that introduced the tallies built them from the history
//! already stored: its SQL, run again over a history, must give the rows
//! the running updates gave.
//!
//! Then group commit: reports sent at once share a transaction, each is
//! acknowledged, and one that fails a check fails alone.

mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::*;
use proptest::prelude::*;
use webtune_kernel_db::{
    Ballot, Db, DbError, DeviceKeys, Level, NewMeasurement, NewReport, TIME_WINDOW, Tally, VotePolicy, elect, flag_excluded, random_id,
    ranked_weight,
};

const SESSIONS: usize = 6;
const KERNELS: usize = 4;
const SPACES: [&str; 2] = ["space-a", "space-b"];
const POLICY: VotePolicy = VotePolicy { quorum: 2, min_margin: 0.03, vote_margin: 0.25 };

/// Sessions 0-2 on device d1, 3-4 on d2 (both arch a1), 5 on d3 (arch a2);
/// one vendor.
fn keys_of(session: usize) -> DeviceKeys {
    match session {
        0..=2 => keys("v/a1/d1", "v/a1", "v"),
        3..=4 => keys("v/a1/d2", "v/a1", "v"),
        _ => keys("v/a2/d3", "v/a2", "v"),
    }
}

#[derive(Clone, Debug)]
enum Event {
    /// Kernels fastest first: (kernel, median µs, output check passed).
    Report { session: usize, space: usize, ranked: Vec<(usize, f64, bool)> },
    /// The server's check found `kernel` wrong in a sample from `session`.
    Flag { session: usize, kernel: usize },
}

fn event() -> impl Strategy<Value = Event> {
    let ranked = (
        Just((0..KERNELS).collect::<Vec<_>>()).prop_shuffle(),
        1..=KERNELS,
        prop::collection::vec((1u32..30, prop::bool::weighted(0.85)), KERNELS),
    )
        .prop_map(|(order, n, t)| order[..n].iter().zip(t).map(|(&k, (m, ok))| (k, f64::from(m) * 10.0, ok)).collect::<Vec<_>>());
    prop_oneof![
        8 => (0..SESSIONS, 0..SPACES.len(), ranked).prop_map(|(session, space, ranked)| Event::Report { session, space, ranked }),
        1 => (0..SESSIONS, 0..KERNELS).prop_map(|(session, kernel)| Event::Flag { session, kernel }),
    ]
}

/// A winner as the comparison sees it.
#[derive(Clone, Debug, PartialEq)]
struct Won {
    space: String,
    kernel: String,
    votes: i64,
    total_votes: i64,
    reports: i64,
    best_median_us: f64,
}

/// A stored report: (session, space, [(kernel, weight, median)]).
type Stored = (usize, usize, Vec<(usize, i64, f64)>);

/// The whole history, and the winners the pure rule gives after each event.
#[derive(Default)]
struct Model {
    /// In order.
    reports: Vec<Stored>,
    /// (kernel, session).
    flags: Vec<(usize, usize)>,
    winners: BTreeMap<(Level, String), Won>,
}

impl Model {
    fn tallies(&self, space: usize, level: Level, key: &str, sessions: &[String], shas: &[String]) -> Vec<Tally> {
        let mut by_kernel: BTreeMap<usize, Tally> = BTreeMap::new();
        // Each session's latest report with votes, the most recent first
        // (the order `Tally::ballots` keeps).
        let mut latest: Vec<(usize, usize, &Stored)> = (0..SESSIONS)
            .filter(|&s| keys_of(s).key(level) == Some(key))
            .filter_map(|s| {
                self.reports
                    .iter()
                    .enumerate()
                    .rev()
                    .find(|(_, r)| r.0 == s && r.1 == space && r.2.iter().any(|v| v.1 > 0))
                    .map(|(i, r)| (i, s, r))
            })
            .collect();
        latest.sort_by_key(|e| std::cmp::Reverse(e.0));
        for (_, s, r) in latest {
            for &(k, w, m) in r.2.iter().filter(|v| v.1 > 0) {
                let t = by_kernel.entry(k).or_insert_with(|| Tally {
                    kernel_sha256: shas[k].clone(),
                    votes: 0,
                    ballots: vec![],
                    flagged_by: 0,
                });
                t.votes += w;
                t.ballots.push(Ballot { session: sessions[s].clone(), weight: w, median_us: m });
            }
        }
        for (k, t) in &mut by_kernel {
            let flaggers: BTreeSet<usize> =
                self.flags.iter().filter(|f| f.0 == *k && keys_of(f.1).key(level) == Some(key)).map(|f| f.1).collect();
            t.flagged_by = flaggers.len();
        }
        by_kernel.into_values().collect()
    }

    /// Re-elects at one key in `space`, as the database must.
    fn elect(&mut self, space: usize, level: Level, key: &str, sessions: &[String], shas: &[String]) {
        let tallies = self.tallies(space, level, key, sessions, shas);
        let slot = (level, key.to_string());
        let incumbent = self.winners.get(&slot).filter(|w| w.space == SPACES[space]).map(|w| w.kernel.clone());
        match elect(&tallies, incumbent.as_deref(), &POLICY) {
            Some(w) => {
                let won = Won {
                    space: SPACES[space].into(),
                    kernel: w.kernel_sha256.clone(),
                    votes: w.votes,
                    total_votes: tallies.iter().map(|t| t.votes).sum(),
                    reports: tallies.iter().map(|t| t.sessions()).max().unwrap_or(0) as i64,
                    best_median_us: w.median_us(),
                };
                self.winners.insert(slot, won);
            }
            None => {
                // The same space's winner goes only when flags exclude it.
                if let Some(inc) = incumbent {
                    let k = shas.iter().position(|s| *s == inc).unwrap();
                    let sessions = tallies.iter().find(|t| t.kernel_sha256 == inc).map_or(0, |t| t.sessions());
                    let flaggers: BTreeSet<usize> =
                        self.flags.iter().filter(|f| f.0 == k && keys_of(f.1).key(level) == Some(key)).map(|f| f.1).collect();
                    if flag_excluded(flaggers.len(), sessions, POLICY.quorum) {
                        self.winners.remove(&slot);
                    }
                }
            }
        }
    }
}

async fn stored_winners(db: &Db) -> BTreeMap<(Level, String), Won> {
    db.winners(10_000)
        .await
        .unwrap()
        .into_iter()
        .map(|w| {
            let won = Won {
                space: w.space_checksum,
                kernel: w.kernel_sha256,
                votes: w.votes,
                total_votes: w.total_votes,
                reports: w.reports,
                best_median_us: w.best_median_us,
            };
            ((w.level, w.level_key), won)
        })
        .collect()
}

/// `durable`: each report is answered once durable ([`Db::store_report`])
/// and the test waits for its count ([`Db::flush_elections`]) before it
/// compares; otherwise once counted ([`Db::record_report`]).
async fn replay(db: Db, events: Vec<Event>, durable: bool) -> Result<(), TestCaseError> {
    let mut shas = Vec::new();
    for n in 0..KERNELS {
        shas.push(kernel(&db, n as u8).await);
    }
    let mut sessions = Vec::new();
    for s in 0..SESSIONS {
        sessions.push(session(&db, &keys_of(s)).await);
    }
    let mut model = Model::default();
    for (i, ev) in events.iter().enumerate() {
        // Reports of one session must be ordered by time; the database
        // breaks ties within a millisecond by report id, the model cannot.
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        match ev {
            Event::Report { session, space, ranked } => {
                let report = NewReport {
                    session_id: sessions[*session].clone(),
                    kind: kind(),
                    space_checksum: SPACES[*space].into(),
                    entries: ranked
                        .iter()
                        .map(|&(k, m, ok)| NewMeasurement {
                            kernel_sha256: shas[k].clone(),
                            ticket: random_id().unwrap(),
                            median_us: m,
                            runs: 10,
                            output_ok: ok,
                        })
                        .collect(),
                };
                if durable {
                    db.store_report(&report, &keys_of(*session), &POLICY).await.unwrap();
                    db.flush_elections().await.unwrap();
                } else {
                    db.record_report(&report, &keys_of(*session), &POLICY).await.unwrap();
                }
                let votes = ranked.iter().enumerate().map(|(r, &(k, m, ok))| (k, ranked_weight(r + 1, ok), m)).collect();
                model.reports.push((*session, *space, votes));
                model.flags.extend(ranked.iter().filter(|v| !v.2).map(|v| (v.0, *session)));
                for level in Level::STORED {
                    let key = keys_of(*session).key(level).unwrap().to_string();
                    model.elect(*space, level, &key, &sessions, &shas);
                }
            }
            Event::Flag { session, kernel } => {
                let k = keys_of(*session);
                db.flag(&shas[*kernel], &kind(), &k, &sessions[*session], &random_id().unwrap(), "server-check", &POLICY).await.unwrap();
                model.flags.push((*kernel, *session));
                for level in Level::STORED {
                    let key = k.key(level).unwrap().to_string();
                    if let Some(w) = model.winners.get(&(level, key.clone())) {
                        let space = SPACES.iter().position(|s| *s == w.space).unwrap();
                        model.elect(space, level, &key, &sessions, &shas);
                    }
                }
            }
        }
        let stored = stored_winners(&db).await;
        prop_assert_eq!(&stored, &model.winners, "after event {} ({:?})", i, ev);
    }
    Ok(())
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn sqlite_running_tallies_elect_what_the_full_history_elects(events in prop::collection::vec(event(), 1..40)) {
        runtime().block_on(async { replay(sqlite().await, events, false).await })?;
    }

    #[test]
    fn sqlite_counted_after_a_durable_answer_elect_what_the_full_history_elects(events in prop::collection::vec(event(), 1..40)) {
        runtime().block_on(async { replay(sqlite().await, events, true).await })?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[test]
    #[ignore = "needs PostgreSQL (scripts/test.sh runs it)"]
    fn postgres_running_tallies_elect_what_the_full_history_elects(events in prop::collection::vec(event(), 1..40)) {
        runtime().block_on(async { replay(postgres().await, events, false).await })?;
    }

    #[test]
    #[ignore = "needs PostgreSQL (scripts/test.sh runs it)"]
    fn postgres_counted_after_a_durable_answer_elect_what_the_full_history_elects(events in prop::collection::vec(event(), 1..40)) {
        runtime().block_on(async { replay(postgres().await, events, true).await })?;
    }
}

/// Forty reports sent at once share transactions; each is acknowledged
/// once stored, and the one that reuses another's ticket is refused alone.
async fn group_commit(db: Db) {
    let shas = [kernel(&db, 1).await, kernel(&db, 2).await];
    let k = keys("v/a1/d1", "v/a1", "v");
    let mut reports = Vec::new();
    for i in 0..40 {
        let s = session(&db, &k).await;
        let ranked = if i % 4 == 0 { [&shas[1], &shas[0]] } else { [&shas[0], &shas[1]] };
        reports.push(NewReport {
            session_id: s,
            kind: kind(),
            space_checksum: "sp".into(),
            entries: ranked
                .iter()
                .enumerate()
                .map(|(r, sha)| NewMeasurement {
                    kernel_sha256: sha.to_string(),
                    ticket: random_id().unwrap(),
                    median_us: 100.0 + r as f64,
                    runs: 10,
                    output_ok: true,
                })
                .collect(),
        });
    }
    // One report quotes another's ticket: it alone is refused.
    reports[7].entries[1].ticket = reports[3].entries[0].ticket.clone();
    let outcomes = futures_join(&db, &reports, &k).await;
    for (i, o) in outcomes.iter().enumerate() {
        if i == 7 {
            assert!(matches!(o, Err(DbError::TicketReused(_))), "report 7: {o:?}");
        } else {
            assert!(o.is_ok(), "report {i}: {o:?}");
        }
    }
    let stats = db.stats().await.unwrap();
    assert_eq!((stats.reports, stats.measurements), (39, 78), "every acknowledged report stored, the refused one not at all");
    let groups = db.group_stats();
    assert_eq!(groups.reports, 40);
    assert!(groups.largest > 1 && groups.groups < 40, "reports sent at once share transactions: {groups:?}");
    let best = db.best(&kind(), &k, Some("sp")).await.unwrap().unwrap();
    assert_eq!(best.winner.kernel_sha256, shas[0]);
    // 29 sessions ranked shas[0] first (5) and 10 second (4).
    assert_eq!((best.winner.votes, best.winner.reports), (29 * 5 + 10 * 4, 39));
}

/// Sends every report at once: each queues its report before any waits.
async fn futures_join(db: &Db, reports: &[NewReport], k: &DeviceKeys) -> Vec<Result<webtune_kernel_db::RecordedReport, DbError>> {
    let mut pending: Vec<_> = reports.iter().map(|r| Box::pin(db.record_report(r, k, &POLICY))).collect();
    let mut done: Vec<Option<Result<_, _>>> = (0..pending.len()).map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut waiting = false;
        for (f, d) in pending.iter_mut().zip(done.iter_mut()).filter(|(_, d)| d.is_none()) {
            match f.as_mut().poll(cx) {
                std::task::Poll::Ready(r) => *d = Some(r),
                std::task::Poll::Pending => waiting = true,
            }
        }
        if waiting { std::task::Poll::Pending } else { std::task::Poll::Ready(()) }
    })
    .await;
    done.into_iter().map(Option::unwrap).collect()
}

#[tokio::test]
async fn sqlite_group_commit() {
    group_commit(sqlite().await).await;
}

#[tokio::test]
#[ignore = "needs PostgreSQL (scripts/test.sh runs it)"]
async fn postgres_group_commit() {
    group_commit(postgres().await).await;
}

/// Snapshot of `ballots` and `tallies`, row by row.
async fn tally_rows(pool: &sqlx::AnyPool) -> Vec<String> {
    use sqlx::Row;
    let mut out = Vec::new();
    let ballots = "SELECT op, shape, target, space_checksum, level, level_key, session_id, kernel_sha256, report_id, weight, median_us \
                   FROM ballot_levels ORDER BY op, shape, target, space_checksum, level, level_key, session_id, kernel_sha256";
    for r in sqlx::query(ballots).fetch_all(pool).await.unwrap() {
        let text: Vec<String> = (0..9).map(|i| r.get::<String, _>(i)).collect();
        out.push(format!("ballot {} {} {}", text.join(" "), r.get::<i64, _>(9), r.get::<f64, _>(10)));
    }
    let tallies = "SELECT op, shape, target, space_checksum, level, level_key, kernel_sha256, votes, sessions FROM tallies \
                   WHERE sessions > 0 ORDER BY op, shape, target, space_checksum, level, level_key, kernel_sha256";
    for r in sqlx::query(tallies).fetch_all(pool).await.unwrap() {
        let text: Vec<String> = (0..7).map(|i| r.get::<String, _>(i)).collect();
        out.push(format!("tally {} {} {}", text.join(" "), r.get::<i64, _>(7), r.get::<i64, _>(8)));
    }
    out
}

async fn running_tallies_equal_a_recount(url: String) {
    let db = Db::connect(&url).await.unwrap();
    let shas = [kernel(&db, 1).await, kernel(&db, 2).await, kernel(&db, 3).await];
    let mut sessions = Vec::new();
    for s in 0..SESSIONS {
        sessions.push(session(&db, &keys_of(s)).await);
    }
    // Sessions report several times, in both spaces, some entries failing.
    for i in 0..30usize {
        let s = (i * 7) % SESSIONS;
        let ranked: Vec<&String> = [&shas[i % 3], &shas[(i + 1) % 3], &shas[(i + 2) % 3]][..1 + i % 3].to_vec();
        let report = NewReport {
            session_id: sessions[s].clone(),
            kind: kind(),
            space_checksum: SPACES[i % 2].into(),
            entries: ranked
                .iter()
                .enumerate()
                .map(|(r, sha)| NewMeasurement {
                    kernel_sha256: sha.to_string(),
                    ticket: random_id().unwrap(),
                    median_us: 50.0 + ((i * 13 + r * 5) % 17) as f64,
                    runs: 10,
                    output_ok: (i + r) % 5 != 0,
                })
                .collect(),
        };
        db.record_report(&report, &keys_of(s), &POLICY).await.unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
    sqlx::any::install_default_drivers();
    let pool = sqlx::AnyPool::connect(&url).await.unwrap();
    let running = tally_rows(&pool).await;
    assert!(running.len() > 20, "{running:?}");
    sqlx::raw_sql(webtune_kernel_db::RECOUNT_SQL).execute(&pool).await.unwrap();
    assert_eq!(tally_rows(&pool).await, running);
}

#[tokio::test]
async fn sqlite_running_tallies_equal_a_recount() {
    running_tallies_equal_a_recount(sqlite_url()).await;
}

#[tokio::test]
#[ignore = "needs PostgreSQL (scripts/test.sh runs it)"]
async fn postgres_running_tallies_equal_a_recount() {
    running_tallies_equal_a_recount(postgres_url().await).await;
}

/// Elections read times from each kernel's latest `TIME_WINDOW` ballots:
/// with more sessions than that, the winner's median is the one of its
/// most recent sessions, as the pure rule says.
async fn time_window(db: Db) {
    let sha = kernel(&db, 1).await;
    let k = keys("v/a1/d1", "v/a1", "v");
    let n = TIME_WINDOW + 44;
    let mut tallies = Tally { kernel_sha256: sha.clone(), votes: 0, ballots: vec![], flagged_by: 0 };
    for i in 0..n {
        let s = session(&db, &k).await;
        // The oldest sessions measured it much slower.
        let t = if i < n - TIME_WINDOW { 5000.0 } else { 1000.0 + (i * 37 % 101) as f64 };
        let report = NewReport {
            session_id: s.clone(),
            kind: kind(),
            space_checksum: "sp".into(),
            entries: vec![NewMeasurement {
                kernel_sha256: sha.clone(),
                ticket: random_id().unwrap(),
                median_us: t,
                runs: 10,
                output_ok: true,
            }],
        };
        db.record_report(&report, &k, &POLICY).await.unwrap();
        tallies.votes += 5;
        tallies.ballots.insert(0, Ballot { session: s, weight: 5, median_us: t });
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
    let best = db.best(&kind(), &k, Some("sp")).await.unwrap().unwrap().winner;
    assert_eq!((best.votes, best.reports), (5 * n as i64, n as i64));
    let all: Vec<f64> = tallies.ballots.iter().map(|b| b.median_us).collect();
    let mut sorted = all.clone();
    sorted.sort_by(f64::total_cmp);
    assert_ne!(tallies.median_us(), 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]), "the window must matter in this test");
    assert_eq!(best.best_median_us, tallies.median_us());
}

#[tokio::test]
async fn sqlite_time_window() {
    time_window(sqlite().await).await;
}

#[tokio::test]
#[ignore = "needs PostgreSQL (scripts/test.sh runs it)"]
async fn postgres_time_window() {
    time_window(postgres().await).await;
}

/// Duels past the window (issue 20): 700 sessions of one key rank three
/// kernels, the crowd's favourite changing twice over, so that
/// kernels hold more ballots than `TIME_WINDOW` and an election must read,
/// session by session, rankings older than a kernel's window. After every
/// report the database's winner is the pure rule's on the full history, and
/// the report says whether the seat changed hands.
async fn duels_past_the_window(db: Db) {
    let shas = [kernel(&db, 1).await, kernel(&db, 2).await, kernel(&db, 3).await];
    let k = keys("v/a1/d1", "v/a1", "v");
    let mut tallies: Vec<Tally> =
        shas.iter().map(|s| Tally { kernel_sha256: s.clone(), votes: 0, ballots: vec![], flagged_by: 0 }).collect();
    let (mut incumbent, mut changes) = (None::<String>, 0);
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    for i in 0..700 {
        let s = session(&db, &k).await;
        let favourite = [0, 1, 1, 2, 2, 2, 0][i / 100];
        let other = (favourite + 1 + (next() % 2) as usize) % 3;
        let ranked: Vec<usize> = match next() % 5 {
            0..=2 => vec![favourite],
            3 => vec![favourite, other],
            _ => vec![other, favourite],
        };
        let time = |k: usize, n: u64| [100.0, 96.0, 93.0][k] * (1.0 + (n % 7) as f64 / 100.0);
        let entries: Vec<(usize, f64)> = ranked.iter().map(|&x| (x, time(x, next()))).collect();
        let mut sorted = entries.clone();
        sorted.sort_by(|a, b| a.1.total_cmp(&b.1));
        let report = NewReport {
            session_id: s.clone(),
            kind: kind(),
            space_checksum: "sp".into(),
            entries: entries
                .iter()
                .map(|&(x, t)| NewMeasurement {
                    kernel_sha256: shas[x].clone(),
                    ticket: random_id().unwrap(),
                    median_us: t,
                    runs: 10,
                    output_ok: true,
                })
                .collect(),
        };
        let rec = db.record_report(&report, &k, &POLICY).await.unwrap();
        for (r, &(x, t)) in entries.iter().enumerate() {
            let weight = ranked_weight(r + 1, true);
            tallies[x].votes += weight;
            tallies[x].ballots.insert(0, Ballot { session: s.clone(), weight, median_us: t });
        }
        let present: Vec<Tally> = tallies.iter().filter(|t| t.sessions() > 0).cloned().collect();
        let want = elect(&present, incumbent.as_deref(), &POLICY).map(|t| t.kernel_sha256.clone());
        let got = db.best(&kind(), &k, Some("sp")).await.unwrap().map(|b| b.winner.kernel_sha256);
        assert_eq!(got, want, "after report {i}");
        // The three keys hold the same sessions, so their seats change together.
        assert_eq!(rec.seats_changed, want != incumbent, "after report {i}: which seats changed hands");
        if want != incumbent && incumbent.is_some() {
            changes += 1;
        }
        incumbent = want;
    }
    assert!(tallies.iter().any(|t| t.sessions() > TIME_WINDOW), "a kernel must hold more ballots than the window");
    assert!(changes >= 2, "the favourite changes, and so must the winner: {changes} changes");
}

#[tokio::test]
async fn sqlite_duels_past_the_window() {
    duels_past_the_window(sqlite().await).await;
}

#[tokio::test]
#[ignore = "needs PostgreSQL (scripts/test.sh runs it)"]
async fn postgres_duels_past_the_window() {
    duels_past_the_window(postgres().await).await;
}
