//! NNJIT's extended space (section 5.3): the exploitation set (winners of
//! similar devices, from the crowd) first, then the exploration set (the
//! lite space, best first).

use std::fmt;

use serde::Serialize;
use webtune_compiler::Schedule;

use crate::space::Space;

/// Where a candidate of the extended space comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// A winner of a similar device (same key, architecture or vendor).
    Exploit,
    /// The lite space.
    Explore,
}

impl Source {
    pub fn name(self) -> &'static str {
        match self {
            Source::Exploit => "exploit",
            Source::Explore => "explore",
        }
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Most exploitation candidates for an exploration set of `explore_len`:
/// about a tenth of it (the paper's ratio), at least one.
pub fn exploit_cap(explore_len: usize) -> usize {
    (explore_len / 10).max(1)
}

/// The extended space: the first [`exploit_cap`] distinct schedules of
/// `exploit` (most similar device first, as the caller orders them), then
/// the lite space without them. A winner that is also in the lite space is
/// moved to the front rather than tried twice. A winner with more threads
/// than any candidate of the lite space is left out: the arch and vendor
/// keys are shared by clients with and without Wasm threads, and a client
/// without them cannot run a threaded kernel at all. Pure: the same inputs
/// give the same list.
pub fn extended_space(exploit: &[Schedule], explore: &Space) -> Vec<(Source, Schedule)> {
    let cap = exploit_cap(explore.schedules.len());
    let threads = explore.schedules.iter().map(|s| s.threads).max().unwrap_or(1);
    let mut out: Vec<(Source, Schedule)> = Vec::with_capacity(cap + explore.schedules.len());
    for s in exploit.iter().filter(|s| s.threads <= threads) {
        if out.len() == cap {
            break;
        }
        if !out.iter().any(|(_, x)| x == s) {
            out.push((Source::Exploit, s.clone()));
        }
    }
    let chosen = out.len();
    for s in &explore.schedules {
        if !out[..chosen].iter().any(|(_, x)| x == s) {
            out.push((Source::Explore, s.clone()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::space::{Relaxation, checksum};
    use webtune_compiler::{Op, Target};

    fn sched(x0: u32) -> Schedule {
        let op = Op::parse("matmul", "64,64,64").unwrap();
        Schedule { x0, x1: 64, ..Schedule::default_for(&op, Target::Wasm) }
    }

    fn space(n: u32) -> Space {
        let schedules: Vec<Schedule> = (0..n).map(|i| sched(1 << (i % 7))).collect::<Vec<_>>();
        let mut uniq = Vec::new();
        for s in schedules {
            if !uniq.contains(&s) {
                uniq.push(s);
            }
        }
        Space { checksum: checksum(&uniq), survivors: uniq.len(), schedules: uniq, naive_size: 0, relaxation: Relaxation::START }
    }

    #[test]
    fn exploit_first_capped_and_deduplicated() {
        let lite = space(7); // x0 = 1, 2, 4, ..., 64
        let winners = vec![sched(3), sched(3), sched(4), sched(5)];
        let ext = extended_space(&winners, &lite);
        // 7 / 10 rounds to 0: at least one winner.
        assert_eq!(ext[0], (Source::Exploit, sched(3)));
        assert_eq!(ext.iter().filter(|(s, _)| *s == Source::Exploit).count(), 1);
        assert_eq!(ext.len(), 8);
        // A winner already in the lite space moves to the front.
        let ext = extended_space(&[sched(4)], &lite);
        assert_eq!(ext.len(), 7);
        assert_eq!(ext[0], (Source::Exploit, sched(4)));
        assert_eq!(ext.iter().filter(|(_, s)| *s == sched(4)).count(), 1);
        // No winners: the lite space as it is.
        let ext = extended_space(&[], &lite);
        assert!(ext.iter().all(|(s, _)| *s == Source::Explore));
        assert_eq!(ext.iter().map(|(_, s)| s.clone()).collect::<Vec<_>>(), lite.schedules);
    }

    #[test]
    fn threaded_winners_only_where_the_lite_space_has_as_many_threads() {
        let lite = space(7);
        let threaded = Schedule { threads: 2, split: Some(webtune_compiler::Split::M), ..sched(2) };
        let ext = extended_space(&[threaded.clone(), sched(3)], &lite);
        assert_eq!(ext[0], (Source::Exploit, sched(3)));
        assert!(ext.iter().all(|(_, s)| s.threads == 1));
        let mut with = lite.clone();
        with.schedules.push(Schedule { threads: 4, split: Some(webtune_compiler::Split::M), ..sched(1) });
        assert_eq!(extended_space(std::slice::from_ref(&threaded), &with)[0], (Source::Exploit, threaded));
    }

    #[test]
    fn cap_is_a_tenth() {
        assert_eq!(exploit_cap(0), 1);
        assert_eq!(exploit_cap(9), 1);
        assert_eq!(exploit_cap(32), 3);
        let lite = space(7);
        let many: Vec<Schedule> = (100..140).map(sched).collect();
        let big = Space { schedules: many.clone(), ..lite.clone() };
        let ext = extended_space(&many, &big);
        assert_eq!(ext.iter().filter(|(s, _)| *s == Source::Exploit).count(), 4);
        assert_eq!(ext.len(), 40);
    }
}
