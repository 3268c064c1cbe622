//! The candidate queue of a session for one op, shape and target.
//!
//! The queue is NNJIT's extended space (`webtune_tuner::extended_space`):
//! first the exploitation set (winners already voted for this device's key,
//! architecture or vendor, in that order, at most a tenth of the lite
//! space), then the exploration set (the lite space, best first). Each
//! candidate is compiled just in time on the rayon pool (cached by its
//! inputs, stored by its hash) and handed out with a ticket; the edge
//! streams them and closes with the count. [`Queue::next`] is pulled one
//! candidate at a time, so the compiler runs only as far ahead as the
//! edge asks.

use std::collections::HashSet;
use std::sync::atomic::Ordering;

use webtune_compiler::{Op, Schedule, Target};
use webtune_kernel_db::{KernelKind, Session};

use super::protocol::{CandidateEvent, QueueDone};
use super::ticket::TICKET_TTL_S;
use super::{Result, Service, device, kernel_url, kind_of, parse_kind, parse_shape, unix_now, wrong_target};

/// What a queue hands out next.
#[derive(Debug)]
pub enum Item {
    Candidate(Box<CandidateEvent>),
    /// The last item: how many were listed and how many skipped.
    Done(QueueDone),
}

/// A session's queue for one kind of kernel, pulled with [`Queue::next`].
#[derive(Debug)]
pub struct Queue {
    session_id: String,
    op: Op,
    target: Target,
    kind: KernelKind,
    space_checksum: String,
    list: std::iter::Enumerate<std::vec::IntoIter<(&'static str, Schedule)>>,
    total: usize,
    skipped: usize,
    /// Each kernel once per queue: two schedules may compile to the same
    /// bytes, and a winner of the exploitation set may be in the lite
    /// space too; a client reporting both would list one kernel twice.
    streamed: HashSet<String>,
    done: bool,
}

impl Service {
    /// The queue of `session` for `op`, `shape` and `target`.
    pub async fn queue(&self, session: &Session, op: &str, shape: &str, target: &str) -> Result<Queue> {
        let (op, target) = parse_kind(op, &parse_shape(shape)?, target)?;
        if let Some(own) = device::target_of(&session.keys)
            && own != target
        {
            return Err(wrong_target(&session.keys.device_key, own, target));
        }
        let space = device::space_for(&op, target, &session.keys);
        let kind = kind_of(&op, target);

        // Exploitation set: the crowd's winners for similar devices (device,
        // arch, vendor), whatever space they were voted in; the tuner merges
        // them in front of the lite space, about a tenth of its size.
        let winners: Vec<Schedule> = self
            .db
            .winners_for(&kind, &session.keys)
            .await?
            .into_iter()
            .filter_map(|b| {
                let config = serde_json::from_str::<serde_json::Value>(&b.meta_json)
                    .map_err(|e| e.to_string())
                    .and_then(|m| m.get("config").cloned().ok_or_else(|| "no `config`".to_string()))
                    .and_then(|c| serde_json::from_value::<Schedule>(c).map_err(|e| e.to_string()));
                // A winner this server cannot read is left out of the queue, and
                // said so: logged and counted, never dropped silently.
                config
                    .inspect_err(|e| {
                        eprintln!(
                            "webtune serve: winner {} of {kind} at {} is left out of the queue: its metadata does not parse: {e}",
                            b.winner.kernel_sha256, b.winner.level_key
                        );
                        self.metrics.unreadable_winners.fetch_add(1, Ordering::Relaxed);
                    })
                    .ok()
            })
            .collect();
        let list = device::extended(&winners, &space);
        Ok(Queue {
            session_id: session.id.clone(),
            op,
            target,
            kind,
            space_checksum: space.checksum,
            total: list.len(),
            list: list.into_iter().enumerate(),
            skipped: 0,
            streamed: HashSet::new(),
            done: false,
        })
    }
}

impl Queue {
    /// The next candidate, compiled and stored, with its ticket; then one
    /// `Done`; then `None`.
    pub async fn next(&mut self, svc: &Service) -> Option<Item> {
        if self.done {
            return None;
        }
        for (index, (source, schedule)) in self.list.by_ref() {
            let c = match svc.compile_and_store(&self.op, self.target, &schedule).await {
                Ok(c) => c,
                Err(e) => {
                    // Already logged when internal; a schedule the compiler
                    // refuses is skipped rather than ending the queue.
                    eprintln!("webtune serve: queue skipped a candidate for {}: {}", self.op, e.message);
                    self.skipped += 1;
                    continue;
                }
            };
            if !self.streamed.insert(c.sha256.clone()) {
                self.skipped += 1;
                continue;
            }
            // Seeds need not be secret (the client regenerates the inputs
            // from them), but they must not repeat across sessions; a
            // failing random generator ends the queue rather than fall
            // back to a guessable value.
            let seed = match webtune_kernel_db::random_id() {
                Ok(id) => u64::from_str_radix(&id[..15], 16).expect("random_id is hex"),
                Err(e) => {
                    eprintln!("webtune serve: queue for {} ended after {index} candidates: {e}", self.op);
                    break;
                }
            };
            let expiry = unix_now() + TICKET_TTL_S;
            return Some(Item::Candidate(Box::new(CandidateEvent {
                index,
                total: self.total,
                source: source.to_string(),
                sha256: c.sha256.clone(),
                url: kernel_url(&c.sha256),
                meta: c.meta.clone(),
                ticket: svc.signer.issue(&self.session_id, &c.sha256, &self.kind, &self.space_checksum, seed, expiry),
                seed,
                check: webtune_compiler::reference::check_positions(&self.op, seed),
                space_checksum: self.space_checksum.clone(),
            })));
        }
        self.done = true;
        Some(Item::Done(QueueDone { total: self.total, skipped: self.skipped }))
    }
}
