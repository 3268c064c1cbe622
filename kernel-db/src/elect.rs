//! NNJIT's majority vote, made robust: the pure election rule, apart from
//! SQL, so that it can be tested (and reasoned about) on plain tallies.

/// How votes become winners (issues 7 and 20): a kernel wins at a key only
/// with votes from at least `quorum` distinct sessions; each session counts
/// once (its latest report); kernels flagged wrong by a quorum of sessions,
/// and by no fewer than voted for them, are out; and a standing winner is
/// replaced only by a challenger that more of the sessions rank above it,
/// clearly more or with times that say it is faster beyond the noise of the
/// comparison (see [`elect_step`]), so winners do not flap between equals.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct VotePolicy {
    pub quorum: usize,
    /// Least relative speed-up a challenger needs over the incumbent.
    pub min_margin: f64,
    /// A challenger ranked above the incumbent by this many more sessions
    /// than rank the incumbent above it (0.25: 25% more) replaces it
    /// whatever the times say.
    pub vote_margin: f64,
}

impl Default for VotePolicy {
    fn default() -> Self {
        VotePolicy { quorum: 2, min_margin: 0.03, vote_margin: 0.25 }
    }
}

/// How many of a kernel's sessions an election's times and rankings come
/// from: its most recent ballots. Votes and session counts are over every
/// session; medians, the paired comparison of a challenger with the
/// incumbent and the count of sessions preferring each are over each
/// kernel's latest `TIME_WINDOW` ballots, so an election reads a bounded
/// number of rows however large its key's crowd, and reflects what devices
/// measure now.
pub const TIME_WINDOW: usize = 256;

/// One session's ballot for one kernel at one key: the weight of the rank
/// it gave the kernel in its latest report, and the time it measured.
#[derive(Clone, Debug, PartialEq)]
pub struct Ballot {
    pub session: String,
    pub weight: i64,
    pub median_us: f64,
}

/// One kernel's tally at one key.
#[derive(Clone, Debug, PartialEq)]
pub struct Tally {
    pub kernel_sha256: String,
    /// Summed ranked weights (each session counted once).
    pub votes: i64,
    /// One per session that ranked the kernel, the most recent first.
    pub ballots: Vec<Ballot>,
    /// Distinct sessions that flagged the kernel wrong at this key.
    pub flagged_by: usize,
}

impl Tally {
    pub fn sessions(&self) -> usize {
        self.ballots.len()
    }
    /// Median of the per-session medians of the latest [`TIME_WINDOW`] ballots.
    pub fn median_us(&self) -> f64 {
        recent_median(&self.ballots)
    }
}

/// The latest [`TIME_WINDOW`] of a kernel's ballots (most recent first).
fn recent(ballots: &[Ballot]) -> &[Ballot] {
    &ballots[..ballots.len().min(TIME_WINDOW)]
}

/// The median time of the latest [`TIME_WINDOW`] of a kernel's ballots.
fn recent_median(ballots: &[Ballot]) -> f64 {
    median(recent(ballots).iter().map(|b| b.median_us).collect())
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 { v[n / 2] } else { 0.5 * (v[n / 2 - 1] + v[n / 2]) }
}

/// The median of `v` and the noise of that median: 1.5 standard errors,
/// estimated robustly from the median absolute deviation.
fn median_and_noise(v: Vec<f64>) -> (f64, f64) {
    let m = median(v.clone());
    let mad = median(v.iter().map(|x| (x - m).abs()).collect());
    (m, 1.5 * 1.4826 * mad / (v.len() as f64).sqrt())
}

/// One kernel's standing at one key, as the running tallies hold it: no
/// per-session ballots, so an election reads them only when it needs them
/// (see [`elect_step`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Standing {
    pub kernel_sha256: String,
    pub votes: i64,
    /// Sessions whose latest report voted for the kernel.
    pub sessions: usize,
    /// Distinct sessions that flagged the kernel wrong at this key.
    pub flagged_by: usize,
}

impl Standing {
    fn eligible(&self, quorum: usize) -> bool {
        self.sessions >= quorum && !flag_excluded(self.flagged_by, self.sessions, quorum)
    }
}

/// Whether flags exclude a kernel: a quorum of sessions raised them, and
/// they are at least as many as the sessions whose samples the server
/// verified for it (`sessions`). A driver that miscomputes on a device
/// class is excluded, while a minority of liars cannot exclude the crowd's
/// winner.
///
/// This is also the one reason a standing winner is removed when an
/// election finds no eligible kernel: a winner that merely lost its quorum
/// (or was imported from a bundle, with no votes here) keeps answering
/// until another kernel is elected, since it was measured best once and the
/// default never was.
pub fn flag_excluded(flagged_by: usize, sessions: usize, quorum: usize) -> bool {
    let q = quorum.max(1);
    flagged_by >= q && flagged_by >= sessions
}

impl From<&Tally> for Standing {
    fn from(t: &Tally) -> Standing {
        Standing { kernel_sha256: t.kernel_sha256.clone(), votes: t.votes, sessions: t.sessions(), flagged_by: t.flagged_by }
    }
}

/// What an election has read beyond the standings: some kernels' medians,
/// some kernels' ballots (most recent first; an election uses the first
/// [`TIME_WINDOW`]), and some kernels' weights in given sessions.
#[derive(Clone, Debug, Default)]
pub struct Evidence {
    pub medians: std::collections::HashMap<String, f64>,
    pub ballots: std::collections::HashMap<String, Vec<Ballot>>,
    /// kernel → session → weight, for the sessions a [`Step::Weights`]
    /// asked about (a session missing from the map gave it no rank).
    pub weights: std::collections::HashMap<String, std::collections::HashMap<String, i64>>,
}

impl Evidence {
    /// `kernel`'s median if read already: asked for, or derived from its
    /// ballots (the same window, so the same value).
    pub fn median(&self, kernel: &str) -> Option<f64> {
        self.medians.get(kernel).copied().or_else(|| self.ballots.get(kernel).map(|b| recent_median(b)))
    }

    /// Everything about every tally (what the pure rule sees).
    pub fn of(tallies: &[Tally]) -> Evidence {
        Evidence {
            medians: tallies.iter().map(|t| (t.kernel_sha256.clone(), t.median_us())).collect(),
            ballots: tallies.iter().map(|t| (t.kernel_sha256.clone(), t.ballots.clone())).collect(),
            weights: tallies
                .iter()
                .map(|t| (t.kernel_sha256.clone(), t.ballots.iter().map(|b| (b.session.clone(), b.weight)).collect()))
                .collect(),
        }
    }
}

/// One step of an election over standings: the winner, or what it must
/// read first. A caller loops, reading what is asked, until `Done`.
#[derive(Clone, Debug, PartialEq)]
pub enum Step<'a> {
    /// The medians of these kernels (the leaders tied on votes).
    Medians(Vec<&'a str>),
    /// The latest [`TIME_WINDOW`] ballots of the challenger and the incumbent.
    Ballots([&'a str; 2]),
    /// The weights this kernel has in these sessions' ballots: sessions
    /// among the other kernel's latest ballots whose ballot for this one,
    /// if any, is older than its own latest [`TIME_WINDOW`].
    Weights(&'a str, Vec<String>),
    /// The winner (`None`: no kernel is eligible).
    Done(Option<&'a str>),
}

/// NNJIT's majority vote, made robust. Eligible kernels have votes from at
/// least `quorum` sessions and are not excluded by flags (a quorum of flags,
/// no fewer than the sessions voting for the kernel). The leader has the
/// most votes (ties: faster median, then smaller hash, so every engine
/// agrees); with no eligible incumbent it wins.
///
/// Otherwise each challenger in turn (the vote leader, then the kernel the
/// most sessions ranked) meets the incumbent, and replaces it only when
/// more sessions rank it
/// above the incumbent than the other way round (a kernel a session did not
/// rank is below every kernel it did), and either `vote_margin` more of
/// them do, or fewer than `quorum` sessions timed both, or it is faster by
/// more than `max(min_margin, noise)` as the median of per-session ratios
/// challenger/incumbent over the sessions that timed both (which cancels
/// the differences between devices of one key).
///
/// Why sessions and not votes decide the duel: liars who all push one slow
/// kernel put their votes on it alone, while honest devices spread theirs
/// over the several kernels that are nearly as fast on them; so a minority
/// of liars can lead the votes, and no single honest kernel need have as
/// many. The kernel the most sessions ranked at all is the honest crowd's
/// (it is in nearly every honest top 5); counted session by session, each
/// honest device that ranked it and not the pushed kernel is one
/// preference against the liars, so an honest majority of the sessions
/// that ranked either holds the winner whatever the liars' votes and fake
/// times say, and unseats a kernel that early liars installed.
/// `None` when no kernel is eligible.
pub fn elect<'a>(tallies: &'a [Tally], incumbent: Option<&str>, policy: &VotePolicy) -> Option<&'a Tally> {
    let standings: Vec<Standing> = tallies.iter().map(Standing::from).collect();
    let evidence = Evidence::of(tallies);
    match elect_step(&standings, incumbent, policy, &evidence) {
        Step::Done(w) => w.and_then(|w| tallies.iter().find(|t| t.kernel_sha256 == w)),
        step => unreachable!("an election with every tally's ballots asked for more: {step:?}"),
    }
}

/// [`elect`] over running tallies: the same rule, asking for medians only
/// to break a tie on votes, and for ballots and weights only when a
/// challenger meets an incumbent. With [`Evidence::of`] the full tallies it
/// answers `Done` at once, which is how [`elect`] is made, so the two
/// cannot disagree.
pub fn elect_step<'a>(standings: &'a [Standing], incumbent: Option<&str>, policy: &VotePolicy, ev: &Evidence) -> Step<'a> {
    let q = policy.quorum.max(1);
    let eligible: Vec<&Standing> = standings.iter().filter(|t| t.eligible(q)).collect();
    let Some(top) = eligible.iter().map(|t| t.votes).max() else { return Step::Done(None) };
    let tied: Vec<&Standing> = eligible.iter().copied().filter(|t| t.votes == top).collect();
    let leader = if tied.len() == 1 {
        tied[0]
    } else {
        let missing: Vec<&str> =
            tied.iter().filter(|t| !ev.medians.contains_key(&t.kernel_sha256)).map(|t| t.kernel_sha256.as_str()).collect();
        if !missing.is_empty() {
            return Step::Medians(missing);
        }
        let m = |t: &Standing| ev.medians[&t.kernel_sha256];
        tied.iter().copied().max_by(|a, b| m(b).total_cmp(&m(a)).then(b.kernel_sha256.cmp(&a.kernel_sha256))).expect("at least two tied")
    };
    let Some(inc) = incumbent.and_then(|i| eligible.iter().copied().find(|t| t.kernel_sha256 == i)) else {
        return Step::Done(Some(&leader.kernel_sha256));
    };
    // The challengers: the vote leader, and the kernel the most sessions
    // ranked (ties: more votes, then the smaller hash).
    let ranked_most = eligible
        .iter()
        .copied()
        .filter(|t| t.kernel_sha256 != inc.kernel_sha256)
        .max_by(|a, b| a.sessions.cmp(&b.sessions).then(a.votes.cmp(&b.votes)).then(b.kernel_sha256.cmp(&a.kernel_sha256)));
    let mut challengers: Vec<&Standing> = Vec::with_capacity(2);
    for c in [Some(leader), ranked_most].into_iter().flatten() {
        if c.kernel_sha256 != inc.kernel_sha256 && !challengers.iter().any(|x| x.kernel_sha256 == c.kernel_sha256) {
            challengers.push(c);
        }
    }
    for c in challengers {
        match duel(&c.kernel_sha256, &inc.kernel_sha256, q, policy, ev) {
            Err(step) => return step,
            Ok(true) => return Step::Done(Some(&c.kernel_sha256)),
            Ok(false) => {}
        }
    }
    Step::Done(Some(&inc.kernel_sha256))
}

/// Whether challenger `c` replaces incumbent `i` (see [`elect`]), or what
/// must be read first.
fn duel<'a>(c: &'a str, i: &'a str, q: usize, policy: &VotePolicy, ev: &Evidence) -> Result<bool, Step<'a>> {
    let (Some(cb), Some(ib)) = (ev.ballots.get(c), ev.ballots.get(i)) else {
        return Err(Step::Ballots([c, i]));
    };
    let (cw, iw) = (recent(cb), recent(ib));
    // Each window's ballots by session.
    let (cm, im): (std::collections::HashMap<&str, &Ballot>, std::collections::HashMap<&str, &Ballot>) =
        (cw.iter().map(|b| (b.session.as_str(), b)).collect(), iw.iter().map(|b| (b.session.as_str(), b)).collect());
    // A session's weight for a kernel. One missing from the kernel's window
    // ranked it, if at all, before that window began: possible only when
    // the window is full, and then read by session (`None` until asked).
    let weight_of = |kernel: &str, window: &std::collections::HashMap<&str, &Ballot>, all: usize, s: &str| -> Option<i64> {
        if let Some(b) = window.get(s) {
            return Some(b.weight);
        }
        if all < TIME_WINDOW {
            return Some(0);
        }
        ev.weights.get(kernel).map(|m| m.get(s).copied().unwrap_or(0))
    };
    let (c_side, i_side) = ((c, &cm, cb.len()), (i, &im, ib.len()));
    for ((kernel, window, all), others) in [(c_side, iw), (i_side, cw)] {
        let missing: Vec<String> =
            others.iter().filter(|b| weight_of(kernel, window, all, &b.session).is_none()).map(|b| b.session.clone()).collect();
        if !missing.is_empty() {
            return Err(Step::Weights(kernel, missing));
        }
    }
    let (mut for_c, mut for_i) = (0usize, 0usize);
    let mut seen = std::collections::HashSet::new();
    for s in cw.iter().chain(iw).map(|b| b.session.as_str()) {
        if !seen.insert(s) {
            continue;
        }
        let wc = weight_of(c_side.0, c_side.1, c_side.2, s).expect("asked for above");
        let wi = weight_of(i_side.0, i_side.1, i_side.2, s).expect("asked for above");
        match wc.cmp(&wi) {
            std::cmp::Ordering::Greater => for_c += 1,
            std::cmp::Ordering::Less => for_i += 1,
            std::cmp::Ordering::Equal => {}
        }
    }
    if for_c <= for_i {
        return Ok(false);
    }
    if for_c as f64 >= for_i as f64 * (1.0 + policy.vote_margin) {
        return Ok(true);
    }
    let paired: Vec<f64> =
        cw.iter().filter_map(|b| im.get(b.session.as_str()).map(|ib| b.median_us / ib.median_us)).filter(|r| r.is_finite()).collect();
    if paired.len() < q {
        // Fewer than a quorum of devices measured both: the majority of
        // sessions decides, and times from different devices (a liar's
        // among them) are never compared.
        return Ok(true);
    }
    let (ratio, noise) = median_and_noise(paired);
    Ok(ratio < 1.0 - noise.max(policy.min_margin))
}

/// The kernel a key serves before it has an elected winner (issue 40): a
/// provisional winner, read from the same running tallies and never
/// stored, so elections (and with them every liar defence above) are
/// unchanged; it only answers lookups where no elected winner does.
///
/// `standings` are the key's kernels in one space, `voters` the distinct
/// sessions whose latest report ranked any kernel there. A kernel is
/// provisional when no session flagged it at the key and a strict majority
/// of the voters ranked it; of those, the one the most sessions ranked, then
/// the most votes, then the smaller hash. So the first honest session's top
/// kernel answers the second device of a class; a lone liar who came first
/// answers only until one session disagrees with it (then no kernel has a
/// majority and the caller falls back to its prediction), and the quorum's
/// election replaces it either way. `None` with no voter, or no majority.
pub fn provisional(standings: &[Standing], voters: usize) -> Option<&Standing> {
    standings
        .iter()
        .filter(|t| t.flagged_by == 0 && t.sessions > 0 && 2 * t.sessions > voters)
        .max_by(|a, b| a.sessions.cmp(&b.sessions).then(a.votes.cmp(&b.votes)).then(b.kernel_sha256.cmp(&a.kernel_sha256)))
}

/// How sure a lookup's answer is, from 0 to 1: a provisional winner's
/// sessions over the quorum (below 1: at the quorum it would be elected).
pub fn provisional_confidence(sessions: usize, policy: &VotePolicy) -> f64 {
    let q = policy.quorum.max(1);
    (sessions.min(q.saturating_sub(1)) as f64) / q as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ranked_weight;

    #[test]
    fn weights_are_ranked() {
        assert_eq!((1..=5).map(|r| ranked_weight(r, true)).collect::<Vec<_>>(), [5, 4, 3, 2, 1]);
        assert_eq!(ranked_weight(1, false), 0);
        assert_eq!(ranked_weight(6, true), 0);
    }

    /// A tally from (session, weight, time) ballots, most recent first.
    fn tally(sha: &str, ballots: &[(&str, i64, f64)]) -> Tally {
        Tally {
            kernel_sha256: sha.into(),
            votes: ballots.iter().map(|b| b.1).sum(),
            ballots: ballots.iter().map(|&(s, weight, median_us)| Ballot { session: s.into(), weight, median_us }).collect(),
            flagged_by: 0,
        }
    }

    #[test]
    fn election_needs_a_quorum_and_ignores_flagged_kernels() {
        let p = VotePolicy { quorum: 2, ..VotePolicy::default() };
        let one = [tally("a", &[("s1", 5, 10.0)])];
        assert!(elect(&one, None, &p).is_none());
        let mut two = vec![tally("a", &[("s1", 5, 10.0), ("s2", 4, 10.5)]), tally("b", &[("s1", 4, 11.0), ("s2", 5, 12.0)])];
        two[1].votes = 8;
        assert_eq!(elect(&two, None, &p).unwrap().kernel_sha256, "a");
        two[0].flagged_by = 2;
        assert_eq!(elect(&two, None, &p).unwrap().kernel_sha256, "b");
        two[1].flagged_by = 2;
        assert!(elect(&two, None, &p).is_none());
    }

    #[test]
    fn times_come_from_the_latest_ballots() {
        let p = VotePolicy { quorum: 2, ..VotePolicy::default() };
        // 300 sessions ranked a and b; of the latest 256, 129 rank b first
        // and 127 a (no clear majority, so the times decide) and find b 20%
        // faster; the 44 oldest found it 3x slower: b takes over, and its
        // median is that of its latest sessions.
        let history = |recent_b: f64, old_b: f64| {
            let mut h = ranked("old", TIME_WINDOW - 212, ("a", 100.0), ("b", old_b));
            h.extend(ranked("b", 129, ("b", recent_b), ("a", 100.0)));
            h.extend(ranked("a", 127, ("a", 100.0), ("b", recent_b)));
            tallies(&h)
        };
        let t = history(80.0, 300.0);
        assert_eq!(elect(&t, Some("a"), &p).unwrap().kernel_sha256, "b");
        assert_eq!(t[1].median_us(), 80.0);
        // The other way round (3x slower lately, faster long ago): a stays.
        let turned = history(300.0, 80.0);
        assert_eq!(elect(&turned, Some("a"), &p).unwrap().kernel_sha256, "a");
        assert_eq!(turned[1].median_us(), 300.0);
    }

    /// `n` sessions `{prefix}{i}` ranking `first` above `second`, with these times.
    fn ranked(prefix: &str, n: usize, first: (&str, f64), second: (&str, f64)) -> Vec<(String, String, i64, f64)> {
        (0..n)
            .flat_map(|i| {
                [(format!("{prefix}{i}"), first.0.to_string(), 5, first.1), (format!("{prefix}{i}"), second.0.to_string(), 4, second.1)]
            })
            .collect()
    }

    #[test]
    fn challengers_must_be_faster_beyond_noise() {
        let p = VotePolicy { quorum: 2, ..VotePolicy::default() };
        // b leads narrowly (9 sessions rank it first, 8 rank a first) and
        // is only 1% faster in every session: a stays.
        let mut close = ranked("b", 9, ("b", 99.0), ("a", 100.0));
        close.extend(ranked("a", 8, ("a", 100.0), ("b", 99.0)));
        let close = tallies(&close);
        assert_eq!(elect(&close, Some("a"), &p).unwrap().kernel_sha256, "a");
        assert_eq!(elect(&close, None, &p).unwrap().kernel_sha256, "b");
        // 25% more sessions ranking b first win whatever the (possibly faked) times say.
        let mut landslide = ranked("b", 10, ("b", 101.0), ("a", 100.0));
        landslide.extend(ranked("a", 8, ("a", 100.0), ("b", 101.0)));
        assert_eq!(elect(&tallies(&landslide), Some("a"), &p).unwrap().kernel_sha256, "b");
        // Clearly faster in the sessions that timed both, though the devices
        // themselves differ twofold: b takes over.
        let mut clear = Vec::new();
        for (i, (ta, tb)) in [(100.0, 80.0), (200.0, 161.0), (150.0, 119.0), (120.0, 97.0)].into_iter().enumerate() {
            clear.extend(ranked(&format!("s{i}-"), 1, ("b", tb), ("a", ta)));
        }
        clear.extend(ranked("t", 3, ("a", 100.0), ("b", 80.0)));
        let clear = tallies(&clear);
        assert_eq!(elect(&clear, Some("a"), &p).unwrap().kernel_sha256, "b");
        // A faster kernel that fewer sessions rank above the incumbent does not win.
        let mut unvoted = ranked("a", 3, ("a", 100.0), ("b", 50.0));
        unvoted.extend(ranked("b", 2, ("b", 50.0), ("a", 100.0)));
        assert_eq!(elect(&tallies(&unvoted), Some("a"), &p).unwrap().kernel_sha256, "a");
        // An incumbent that lost its eligibility is replaced outright.
        let mut gone = clear.clone();
        gone[0].flagged_by = 2;
        assert_eq!(elect(&gone, Some("a"), &p).unwrap().kernel_sha256, "b");
    }

    /// `n` sessions named `{prefix}{i}`, each giving `kernels[j]` weight 5 - j.
    fn sessions(prefix: &str, n: usize, kernels: &[&str], time: impl Fn(&str) -> f64) -> Vec<(String, String, i64, f64)> {
        (0..n)
            .flat_map(|i| kernels.iter().enumerate().map(move |(j, k)| (format!("{prefix}{i}"), k.to_string(), 5 - j as i64)))
            .map(|(s, k, w)| {
                let t = time(&k);
                (s, k, w, t)
            })
            .collect()
    }

    fn tallies(ballots: &[(String, String, i64, f64)]) -> Vec<Tally> {
        let mut by: std::collections::BTreeMap<&str, Tally> = std::collections::BTreeMap::new();
        // Most recent first: later entries of `ballots` are more recent.
        for (s, k, w, t) in ballots.iter().rev() {
            let e = by.entry(k).or_insert_with(|| Tally { kernel_sha256: k.clone(), votes: 0, ballots: vec![], flagged_by: 0 });
            e.votes += w;
            e.ballots.push(Ballot { session: s.clone(), weight: *w, median_us: *t });
        }
        by.into_values().collect()
    }

    #[test]
    fn liars_who_lead_the_votes_do_not_unseat_the_best_kernel() {
        let p = VotePolicy { quorum: 3, ..VotePolicy::default() };
        let truth = |k: &str| match k {
            "best" => 100.0,
            "near1" => 101.0,
            "near2" => 102.0,
            "near3" => 103.0,
            _ => 300.0,
        };
        // 55 honest devices split their first places among four nearly
        // equal kernels; 45 liars rank the slowest kernel first with a fake
        // time under the best, then four other slow kernels.
        let mut b = Vec::new();
        for (i, order) in [
            ["best", "near1", "near2", "near3"],
            ["near1", "near2", "near3", "best"],
            ["near2", "near3", "best", "near1"],
            ["near3", "best", "near1", "near2"],
        ]
        .iter()
        .cycle()
        .take(55)
        .enumerate()
        {
            let mut order = order.to_vec();
            order.push("slow5");
            b.extend(sessions(&format!("h{i}-"), 1, &order, truth));
        }
        b.extend(sessions("liar", 45, &["pushed", "slow1", "slow2", "slow3", "slow4"], |k| if k == "pushed" { 80.0 } else { truth(k) }));
        let t = tallies(&b);
        let votes = |k: &str| t.iter().find(|x| x.kernel_sha256 == k).unwrap().votes;
        assert!(votes("pushed") > votes("best"), "the liars lead the votes: {} against {}", votes("pushed"), votes("best"));
        assert_eq!(elect(&t, None, &p).unwrap().kernel_sha256, "pushed", "with no incumbent the votes decide");
        // Every honest session ranks best above pushed, every liar the other way: best stays.
        assert_eq!(elect(&t, Some("best"), &p).unwrap().kernel_sha256, "best");
        // Had the liars come first and installed their kernel, the honest
        // majority unseats it through the kernel the most sessions ranked,
        // though the liars still lead the votes.
        let winner = elect(&t, Some("pushed"), &p).unwrap().kernel_sha256.clone();
        assert_ne!(winner, "pushed");
        assert!(truth(&winner) <= 103.0, "{winner}");
        // With more liars than honest sessions, they win: the rule counts sessions.
        let mut b2 = b.clone();
        b2.extend(sessions("more", 11, &["pushed", "slow1", "slow2", "slow3", "slow4"], |_| 80.0));
        assert_eq!(elect(&tallies(&b2), Some("best"), &p).unwrap().kernel_sha256, "pushed");
    }

    #[test]
    fn the_kernel_most_sessions_rank_meets_the_liars_kernel() {
        // Twelve kernels within 2% of each other: every honest device ranks
        // `best` (its rank varies) and four others, a different four each
        // time, so no other kernel gathers many sessions; 45 liars rank
        // `pushed` first. With `pushed` installed by early liars, the vote
        // runner-up alone would lose to it (fewer sessions rank it than the
        // liars), but `best`, in every honest top 5, unseats it.
        let p = VotePolicy { quorum: 3, ..VotePolicy::default() };
        let near: Vec<String> = (0..11).map(|k| format!("near{k}")).collect();
        let mut b = Vec::new();
        for i in 0..55 {
            let mut order: Vec<&str> = (0..4).map(|j| near[(i * 4 + j) % 11].as_str()).collect();
            order.insert(i % 5, "best");
            b.extend(sessions(&format!("h{i}-"), 1, &order, |k| if k == "best" { 100.0 } else { 101.0 }));
        }
        b.extend(sessions("liar", 45, &["pushed", "slow1", "slow2", "slow3", "slow4"], |k| if k == "pushed" { 80.0 } else { 300.0 }));
        let t = tallies(&b);
        let standing = |k: &str| Standing::from(t.iter().find(|x| x.kernel_sha256 == k).unwrap());
        assert!(standing("pushed").votes > standing("best").votes, "the liars lead the votes");
        assert!(near.iter().all(|n| standing(n).sessions < 45), "no near kernel has as many sessions as the liars");
        assert_eq!(elect(&t, Some("pushed"), &p).unwrap().kernel_sha256, "best");
        assert_eq!(elect(&t, Some("best"), &p).unwrap().kernel_sha256, "best");
    }

    #[test]
    fn a_provisional_winner_needs_a_majority_of_the_first_sessions_and_no_flag() {
        let st =
            |sha: &str, votes: i64, sessions: usize, flagged_by: usize| Standing { kernel_sha256: sha.into(), votes, sessions, flagged_by };
        let name = |s: Option<&Standing>| s.map(|s| s.kernel_sha256.clone());
        // Nobody voted: nothing.
        assert_eq!(name(provisional(&[], 0)), None);
        // One session: its top kernel (5 votes) over the rest of its top 5.
        let one = [st("a", 4, 1, 0), st("b", 5, 1, 0), st("c", 3, 1, 0)];
        assert_eq!(name(provisional(&one, 1)), Some("b".into()));
        // A liar came first, an honest session disagrees: no kernel has a
        // strict majority, so no provisional winner (the caller predicts).
        let split = [st("pushed", 5, 1, 0), st("best", 5, 1, 0), st("slow1", 4, 1, 0)];
        assert_eq!(name(provisional(&split, 2)), None);
        // Two of three sessions ranked `best`: it stands, though `pushed` has more votes.
        let two = [st("pushed", 5, 1, 0), st("best", 9, 2, 0), st("near", 8, 2, 0)];
        assert_eq!(name(provisional(&two, 3)), Some("best".into()));
        // A flag at the key takes a kernel out, however many ranked it.
        let flagged = [st("a", 10, 2, 1), st("b", 4, 2, 0)];
        assert_eq!(name(provisional(&flagged, 2)), Some("b".into()));
        // Ties: most votes, then the smaller hash (every engine agrees).
        assert_eq!(name(provisional(&[st("y", 5, 1, 0), st("x", 5, 1, 0)], 1)), Some("x".into()));
        // Confidence: sessions over the quorum, below 1.
        let p = VotePolicy { quorum: 3, ..VotePolicy::default() };
        assert_eq!(provisional_confidence(1, &p), 1.0 / 3.0);
        assert_eq!(provisional_confidence(2, &p), 2.0 / 3.0);
        assert_eq!(provisional_confidence(7, &p), 2.0 / 3.0);
        assert_eq!(provisional_confidence(1, &VotePolicy { quorum: 1, ..p }), 0.0);
    }

    /// Issue 40's check that the provisional rule weakens no defence: it
    /// reads the tallies and never the election, so on the 45% liar crowd
    /// the elected winner is the same whatever it says; and before the
    /// quorum, liars who came first hold the provisional seat only while
    /// every voter is a liar.
    #[test]
    fn provisional_winners_leave_the_liar_defences_as_they_were() {
        let p = VotePolicy { quorum: 3, ..VotePolicy::default() };
        let liar = |i: usize| sessions(&format!("liar{i}-"), 1, &["pushed", "slow1", "slow2", "slow3", "slow4"], |_| 80.0);
        let honest = |i: usize| sessions(&format!("h{i}-"), 1, &["best", "near1", "near2", "near3", "slow5"], |_| 100.0);
        let voters = |b: &[(String, String, i64, f64)]| b.iter().map(|x| &x.0).collect::<std::collections::HashSet<_>>().len();
        // A liar first: it holds the provisional seat alone (no quorum
        // yet); the first honest session leaves no kernel a majority, the
        // second gives `best` two sessions of three.
        let mut b = liar(0);
        let st = |b: &[(String, String, i64, f64)]| tallies(b).iter().map(Standing::from).collect::<Vec<_>>();
        assert_eq!(provisional(&st(&b), voters(&b)).unwrap().kernel_sha256, "pushed");
        b.extend(honest(0));
        assert!(provisional(&st(&b), voters(&b)).is_none(), "one liar and one honest session: no majority");
        b.extend(honest(1));
        assert_eq!(provisional(&st(&b), voters(&b)).unwrap().kernel_sha256, "best");
        // The election over the 45% liar crowd is untouched: `best` stays.
        let mut crowd = Vec::new();
        for i in 0..55 {
            crowd.extend(honest(i));
        }
        for i in 0..45 {
            crowd.extend(liar(i));
        }
        let t = tallies(&crowd);
        assert_eq!(elect(&t, Some("best"), &p).unwrap().kernel_sha256, "best");
        assert_eq!(provisional(&st(&crowd), voters(&crowd)).unwrap().kernel_sha256, "best");
    }

    #[test]
    fn rankings_older_than_a_window_are_read_by_session() {
        // `a` leads with more sessions than the window; `b`, the incumbent,
        // has as many as it. The sessions of `b`'s window whose ballot for `a`, if
        // any, is older than `a`'s window are asked for, and count as they
        // ranked it.
        let p = VotePolicy { quorum: 2, ..VotePolicy::default() };
        let mut b = sessions("old", 60, &["a", "b"], |_| 100.0);
        b.extend(sessions("x", TIME_WINDOW - 60, &["b"], |_| 90.0));
        b.extend(sessions("new", TIME_WINDOW, &["a"], |_| 100.0));
        let t = tallies(&b);
        let standings: Vec<Standing> = t.iter().map(Standing::from).collect();
        let windows =
            Evidence { ballots: t.iter().map(|x| (x.kernel_sha256.clone(), recent(&x.ballots).to_vec())).collect(), ..Evidence::default() };
        match elect_step(&standings, Some("b"), &p, &windows) {
            Step::Weights("a", asked) => assert_eq!(asked.len(), TIME_WINDOW, "b's old and x sessions"),
            other => panic!("expected a question about a's older ballots, got {other:?}"),
        }
        // The 60 old sessions rank a above b: 316 sessions to 196, a takes over.
        assert_eq!(elect(&t, Some("b"), &p).unwrap().kernel_sha256, "a");
        // Counted as if they had not ranked a, it would be 256 to 256, and b would stay.
        let mut answered = windows.clone();
        answered.weights.insert("a".into(), std::collections::HashMap::new());
        match elect_step(&standings, Some("b"), &p, &answered) {
            Step::Weights("b", asked) => assert_eq!(asked.len(), TIME_WINDOW, "a's new sessions, b's window being full"),
            other => panic!("expected a question about b's older ballots, got {other:?}"),
        }
        answered.weights.insert("b".into(), std::collections::HashMap::new());
        assert_eq!(elect_step(&standings, Some("b"), &p, &answered), Step::Done(Some("b")));
    }
}
