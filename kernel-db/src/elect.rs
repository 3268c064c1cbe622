//! NNJIT's majority vote, made robust: the pure election rule, apart from
//! SQL, so that it can be tested (and reasoned about) on plain tallies.

/// How votes become winners (issue 7): a kernel wins at a key only with
/// votes from at least `quorum` distinct sessions; each session counts once
/// (its latest report); kernels flagged wrong by a quorum of sessions, and
/// by no fewer than voted for them, are out;
/// and a standing winner is replaced only by a challenger that leads the
/// votes clearly, or leads them and is faster than it by more than the
/// noise of the comparison (see [`elect`]), so winners do not flap between
/// equals.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct VotePolicy {
    pub quorum: usize,
    /// Least relative speed-up a challenger needs over the incumbent.
    pub min_margin: f64,
    /// A challenger with this much more of the votes (0.25: 25% more)
    /// replaces the incumbent whatever the times say.
    pub vote_margin: f64,
}

impl Default for VotePolicy {
    fn default() -> Self {
        VotePolicy { quorum: 2, min_margin: 0.03, vote_margin: 0.25 }
    }
}

/// How many of a kernel's sessions an election's times come from: its
/// most recent ballots. Votes and session counts are over every session;
/// medians and the paired comparison of a challenger with the incumbent
/// are over each kernel's latest `TIME_WINDOW` ballots, so an election
/// reads a bounded number of rows however large its key's crowd, and
/// reflects what devices measure now.
pub const TIME_WINDOW: usize = 256;

/// One kernel's tally at one key.
#[derive(Clone, Debug, PartialEq)]
pub struct Tally {
    pub kernel_sha256: String,
    /// Summed ranked weights (each session counted once).
    pub votes: i64,
    /// (session, its median time in microseconds), one per session, the
    /// most recent ballot first.
    pub times: Vec<(String, f64)>,
    /// Distinct sessions that flagged the kernel wrong at this key.
    pub flagged_by: usize,
}

impl Tally {
    pub fn sessions(&self) -> usize {
        self.times.len()
    }
    /// Median of the per-session medians of the latest [`TIME_WINDOW`] ballots.
    pub fn median_us(&self) -> f64 {
        recent_median(&self.times)
    }
}

/// The latest [`TIME_WINDOW`] of a kernel's times (most recent first).
fn recent(times: &[(String, f64)]) -> &[(String, f64)] {
    &times[..times.len().min(TIME_WINDOW)]
}

/// The median of the latest [`TIME_WINDOW`] of a kernel's times.
fn recent_median(times: &[(String, f64)]) -> f64 {
    median(recent(times).iter().map(|t| t.1).collect())
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
/// per-session times, so an election reads them only when it needs them
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
/// some kernels' per-session times (most recent first; an election uses
/// the first [`TIME_WINDOW`]).
#[derive(Clone, Debug, Default)]
pub struct Evidence {
    pub medians: std::collections::HashMap<String, f64>,
    pub times: std::collections::HashMap<String, Vec<(String, f64)>>,
}

impl Evidence {
    /// `kernel`'s median if read already: asked for, or derived from its
    /// times (the same window, so the same value).
    pub fn median(&self, kernel: &str) -> Option<f64> {
        self.medians.get(kernel).copied().or_else(|| self.times.get(kernel).map(|t| recent_median(t)))
    }

    /// Everything about every tally (what the pure rule sees).
    pub fn of(tallies: &[Tally]) -> Evidence {
        Evidence {
            medians: tallies.iter().map(|t| (t.kernel_sha256.clone(), t.median_us())).collect(),
            times: tallies.iter().map(|t| (t.kernel_sha256.clone(), t.times.clone())).collect(),
        }
    }
}

/// One step of an election over standings: the winner, or what it must
/// read first. A caller loops, reading what is asked, until `Done`.
#[derive(Clone, Debug, PartialEq)]
pub enum Step<'a> {
    /// The medians of these kernels (the leaders tied on votes).
    Medians(Vec<&'a str>),
    /// The per-session times of the leader and the incumbent.
    Times([&'a str; 2]),
    /// The winner (`None`: no kernel is eligible).
    Done(Option<&'a str>),
}

/// NNJIT's majority vote, made robust. Eligible kernels have votes from at
/// least `quorum` sessions and are not excluded by flags (a quorum of flags,
/// no fewer than the sessions voting for the kernel). The leader has the
/// most votes (ties: faster median, then smaller hash, so every engine
/// agrees). It replaces an eligible incumbent when it has `vote_margin` more
/// votes, or when it is faster by more than `max(min_margin, noise)`:
/// measured, where possible, as the median of per-session ratios
/// leader/incumbent over sessions that timed both (which cancels the
/// differences between devices of one key), else as the ratio of their
/// medians. The vote margin is what lets an honest majority unseat a winner
/// that a few early liars installed with paired fake times; the time margin
/// is what lets a clearly faster kernel win before the votes pile up.
/// `None` when no kernel is eligible.
pub fn elect<'a>(tallies: &'a [Tally], incumbent: Option<&str>, policy: &VotePolicy) -> Option<&'a Tally> {
    let standings: Vec<Standing> = tallies.iter().map(Standing::from).collect();
    let evidence = Evidence::of(tallies);
    match elect_step(&standings, incumbent, policy, &evidence) {
        Step::Done(w) => w.and_then(|w| tallies.iter().find(|t| t.kernel_sha256 == w)),
        step => unreachable!("an election with every tally's times asked for more: {step:?}"),
    }
}

/// [`elect`] over running tallies: the same rule, asking for medians only
/// to break a tie on votes, and for times only when a challenger without a
/// clear lead in the votes meets an incumbent. With [`Evidence::of`] the
/// full tallies it answers `Done` at once, which is how [`elect`] is made,
/// so the two cannot disagree.
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
    if inc.kernel_sha256 == leader.kernel_sha256 {
        return Step::Done(Some(&inc.kernel_sha256));
    }
    if leader.votes as f64 >= inc.votes as f64 * (1.0 + policy.vote_margin) {
        return Step::Done(Some(&leader.kernel_sha256));
    }
    let (Some(lt), Some(it)) = (ev.times.get(&leader.kernel_sha256), ev.times.get(&inc.kernel_sha256)) else {
        return Step::Times([&leader.kernel_sha256, &inc.kernel_sha256]);
    };
    let (lt, it) = (recent(lt), recent(it));
    let by_session: std::collections::HashMap<&str, f64> = it.iter().map(|(s, t)| (s.as_str(), *t)).collect();
    let paired: Vec<f64> = lt.iter().filter_map(|(s, t)| by_session.get(s.as_str()).map(|ti| t / ti)).filter(|r| r.is_finite()).collect();
    let (ratio, noise) = if paired.len() >= q {
        median_and_noise(paired)
    } else {
        let (l, ln) = median_and_noise(lt.iter().map(|t| t.1).collect());
        let (i, inn) = median_and_noise(it.iter().map(|t| t.1).collect());
        (l / i, ln / l + inn / i)
    };
    let won = if ratio < 1.0 - noise.max(policy.min_margin) { leader } else { inc };
    Step::Done(Some(&won.kernel_sha256))
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

    fn tally(sha: &str, votes: i64, times: &[(&str, f64)]) -> Tally {
        Tally { kernel_sha256: sha.into(), votes, times: times.iter().map(|(s, t)| (s.to_string(), *t)).collect(), flagged_by: 0 }
    }

    #[test]
    fn election_needs_a_quorum_and_ignores_flagged_kernels() {
        let p = VotePolicy { quorum: 2, ..VotePolicy::default() };
        let one = [tally("a", 5, &[("s1", 10.0)])];
        assert!(elect(&one, None, &p).is_none());
        let mut two = vec![tally("a", 9, &[("s1", 10.0), ("s2", 10.5)]), tally("b", 8, &[("s1", 11.0), ("s2", 12.0)])];
        assert_eq!(elect(&two, None, &p).unwrap().kernel_sha256, "a");
        two[0].flagged_by = 2;
        assert_eq!(elect(&two, None, &p).unwrap().kernel_sha256, "b");
        two[1].flagged_by = 2;
        assert!(elect(&two, None, &p).is_none());
    }

    #[test]
    fn times_come_from_the_latest_ballots() {
        let p = VotePolicy { quorum: 2, ..VotePolicy::default() };
        // 300 sessions timed both; the latest 256 find b 20% faster, the
        // 44 oldest found it 3x slower: b takes over, and its median is
        // that of its latest sessions.
        let n = TIME_WINDOW + 44;
        let a: Vec<(String, f64)> = (0..n).map(|i| (format!("s{i:03}"), 100.0)).collect();
        let b: Vec<(String, f64)> = (0..n).map(|i| (format!("s{i:03}"), if i < TIME_WINDOW { 80.0 } else { 300.0 })).collect();
        let t = [
            Tally { kernel_sha256: "a".into(), votes: 1000, times: a, flagged_by: 0 },
            Tally { kernel_sha256: "b".into(), votes: 1001, times: b.clone(), flagged_by: 0 },
        ];
        assert_eq!(elect(&t, Some("a"), &p).unwrap().kernel_sha256, "b");
        assert_eq!(t[1].median_us(), 80.0);
        // The other way round (3x slower lately, faster long ago): a stays.
        let mut turned = t.clone();
        turned[1].times = b.into_iter().map(|(s, v)| (s, if v == 80.0 { 300.0 } else { 80.0 })).collect();
        assert_eq!(elect(&turned, Some("a"), &p).unwrap().kernel_sha256, "a");
        assert_eq!(turned[1].median_us(), 300.0);
    }

    #[test]
    fn challengers_must_be_faster_beyond_noise() {
        let p = VotePolicy { quorum: 2, ..VotePolicy::default() };
        // b leads the votes narrowly and is only 1% faster in every session: a stays.
        let close =
            [tally("a", 8, &[("s1", 100.0), ("s2", 200.0), ("s3", 150.0)]), tally("b", 9, &[("s1", 99.0), ("s2", 198.0), ("s3", 148.5)])];
        assert_eq!(elect(&close, Some("a"), &p).unwrap().kernel_sha256, "a");
        assert_eq!(elect(&close, None, &p).unwrap().kernel_sha256, "b");
        // A clear lead in the votes wins whatever the (possibly faked) times say.
        let mut landslide = close.clone();
        landslide[1].votes = 10;
        assert_eq!(elect(&landslide, Some("a"), &p).unwrap().kernel_sha256, "b");
        // Clearly faster in the sessions that timed both, though the devices
        // themselves differ twofold: b takes over.
        let clear =
            [tally("a", 8, &[("s1", 100.0), ("s2", 200.0), ("s3", 150.0)]), tally("b", 9, &[("s1", 80.0), ("s2", 161.0), ("s3", 119.0)])];
        assert_eq!(elect(&clear, Some("a"), &p).unwrap().kernel_sha256, "b");
        // A faster kernel without the votes does not win.
        let unvoted = [tally("a", 15, &[("s1", 100.0), ("s2", 100.0)]), tally("b", 8, &[("s1", 50.0), ("s2", 50.0)])];
        assert_eq!(elect(&unvoted, Some("a"), &p).unwrap().kernel_sha256, "a");
        // An incumbent that lost its eligibility is replaced outright.
        let mut gone = clear.clone();
        gone[0].flagged_by = 2;
        assert_eq!(elect(&gone, Some("a"), &p).unwrap().kernel_sha256, "b");
    }
}
