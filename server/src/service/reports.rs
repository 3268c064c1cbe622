//! Reports: a client's top N, checked and stored.
//!
//! A report moves votes, so nothing in it is believed: every entry needs a
//! fresh ticket of this session for the report's op, shape and target, a
//! plausible time and, when it says its output was right, output samples
//! the service recomputes from the ticket's seed. Wrong samples flag the
//! kernel for the device instead. The answer comes only after the
//! measurements and the re-elected winners committed in one transaction.

use std::sync::atomic::Ordering;

use webtune_kernel_db::{NewMeasurement, NewReport, Session};

use super::protocol::{ReportRequest, ReportResponse, WinnerView};
use super::{Error, MIN_RUNS, Result, Service, device, is_hex, kind_of, parse_kind, plausible, ticket, unix_now, wrong_target};

impl Service {
    /// The tolerance of the stored kernel `sha256` of `op`, where its
    /// schedule widens the op's (`reference::kernel_tolerance`); `None` for
    /// any other kernel, or one the database does not hold.
    async fn kernel_tolerance(&self, op: &webtune_compiler::Op, sha256: &str) -> Result<Option<f64>> {
        let Some((_, meta)) = self.db.kernel_meta(sha256).await? else { return Ok(None) };
        let Ok(meta) = serde_json::from_str::<webtune_compiler::KernelMeta>(&meta) else { return Ok(None) };
        let t = webtune_compiler::reference::kernel_tolerance(op, &meta.config);
        Ok((t > webtune_compiler::reference::tolerance(op)).then_some(t))
    }

    /// Checks and stores `req`, a report of `session`; the winners after it.
    pub async fn record_report(&self, session: &Session, req: &ReportRequest) -> Result<ReportResponse> {
        let (op, target) = parse_kind(&req.op, &req.shape, &req.target)?;
        let kind = kind_of(&op, target);
        let n = req.entries.len();
        if n == 0 || n > webtune_kernel_db::MAX_TOP_N {
            return Err(Error::unprocessable(format!(
                "entries has {n} items; report your top 1 to {} kernels, fastest first",
                webtune_kernel_db::MAX_TOP_N
            )));
        }
        if let Some(own) = device::target_of(&session.keys)
            && own != target
        {
            return Err(wrong_target(&session.keys.device_key, own, target));
        }
        // The checks run in this order, each over every entry before the next:
        // form, ticket (signature, expiry, and the op, shape and target it was
        // issued for), times, and then the output samples; single use is
        // checked before the first sample that disagrees is acted on, and
        // again by the report's own transaction. So a report can flag a kernel
        // only through a fresh ticket of this session, and only for the kind
        // of kernel the ticket names: the samples are recomputed for the
        // ticket's op and shape, never the report's.
        let now = unix_now();
        let mut claims: Vec<ticket::TicketClaims> = Vec::with_capacity(n);
        for (i, e) in req.entries.iter().enumerate() {
            let at = format!("entries[{i}]");
            if !is_hex(&e.sha256, 64) {
                return Err(Error::unprocessable(format!("{at}.sha256 must be 64 lower-case hex digits")));
            }
            if req.entries[..i].iter().any(|p| p.sha256 == e.sha256) {
                return Err(Error::unprocessable(format!("{at}: kernel {} is listed twice", e.sha256)));
            }
            if e.ticket.len() > 512 {
                return Err(Error::unprocessable(format!("{at}.ticket is too long")));
            }
            let c = self.signer.verify(&e.ticket, &session.id, &e.sha256, now).map_err(|t| Error::forbidden(format!("{at}.ticket {t}")))?;
            if c.kind != kind {
                return Err(Error::unprocessable(format!(
                    "{at}: its ticket was issued for {} {} on {}, but the report is for {} {} on {}; \
                     report each queue's kernels with the op, shape and target of that queue",
                    c.kind.op, c.kind.shape, c.kind.target, kind.op, kind.shape, kind.target
                )));
            }
            if let Some(first) = claims.first()
                && first.space_checksum != c.space_checksum
            {
                return Err(Error::unprocessable(format!(
                    "{at} comes from another candidate space than entries[0]; report each queue separately"
                )));
            }
            claims.push(c);
        }
        for (i, e) in req.entries.iter().enumerate() {
            let at = format!("entries[{i}]");
            if !(e.median_us.is_finite() && e.median_us > 0.0 && e.median_us < 3.6e9) {
                return Err(Error::unprocessable(format!("{at}.median_us must be a positive number of microseconds, got {}", e.median_us)));
            }
            if e.runs < MIN_RUNS || e.runs > 1_000_000_000 {
                return Err(Error::unprocessable(format!(
                    "{at}.runs must be between {MIN_RUNS} and 10^9 (a median needs repeated timed runs), got {}",
                    e.runs
                )));
            }
            if let Err(why) = plausible::check(&op, target, &session.keys, e.median_us) {
                self.metrics.implausible_rejected.fetch_add(1, Ordering::Relaxed);
                return Err(Error::unprocessable(format!("{at}.median_us is implausible: {why}")));
            }
            if i > 0 && e.output_ok && req.entries[i - 1].output_ok && e.median_us < req.entries[i - 1].median_us {
                return Err(Error::unprocessable(format!("{at}: entries must be ordered fastest first (by median_us)")));
            }
        }
        for (i, (e, c)) in req.entries.iter().zip(&claims).enumerate() {
            let at = format!("entries[{i}]");
            if !e.output_ok {
                continue;
            }
            let Err((pos, err)) = webtune_compiler::reference::check_samples(&op, c.seed, &e.samples) else { continue };
            // A kernel whose schedule quantises its activations is held to
            // its own, wider tolerance (docs/ops.md, "Tolerance"), read from
            // its stored metadata: only here, where the op's own failed.
            if let Some(tolerance) = self.kernel_tolerance(&op, &e.sha256).await?
                && webtune_compiler::reference::check_samples_within(&op, c.seed, &e.samples, tolerance).is_ok()
            {
                continue;
            }
            // Single use, before the samples count against the kernel: a
            // used ticket is refused here, so it can neither flag nor move
            // the samples' metric. (Reports whose samples all agree are not
            // asked this here, a statement each: their transaction refuses
            // a used ticket with the same answer, `store_group`.)
            let tickets: Vec<&str> = req.entries.iter().map(|e| e.ticket.as_str()).collect();
            if let Some(i) = self.db.tickets_used(&tickets).await? {
                return Err(webtune_kernel_db::DbError::TicketReused(req.entries[i].sha256.clone()).into());
            }
            self.metrics.samples_rejected.fetch_add(1, Ordering::Relaxed);
            let want = webtune_compiler::reference::check_positions(&op, c.seed).len();
            if e.samples.len() != want {
                return Err(Error::unprocessable(format!(
                    "{at}.samples must hold the {want} output values at the candidate's `check` positions, from a run on the ticket's seed; got {}",
                    e.samples.len()
                )));
            }
            // The values are wrong: the kernel miscomputes on this device (or
            // the client lies). Flag it, spending the ticket; a quorum of flags
            // excludes it.
            let reason = format!("server-check: output {pos} off by {err:e}");
            self.db.flag(&e.sha256, &kind, &session.keys, &session.id, &e.ticket, &reason, &self.settings.policy).await?;
            return Err(Error::unprocessable(format!(
                "{at}.samples disagree with the server's recomputation at output {pos} (norm-scaled error {err:.1e}): \
                 the kernel's output is wrong on this device, or it was not run on the inputs of the ticket's seed; \
                 the kernel is flagged for this device"
            )));
        }
        let space = claims.first().map(|c| c.space_checksum.clone()).unwrap_or_default();
        let entries = req
            .entries
            .iter()
            .map(|e| NewMeasurement {
                kernel_sha256: e.sha256.clone(),
                ticket: e.ticket.clone(),
                median_us: e.median_us,
                runs: e.runs as i64,
                output_ok: e.output_ok,
            })
            .collect();
        let report = NewReport { session_id: session.id.clone(), kind, space_checksum: space, entries };
        let counted = self.settings.report_answer == super::ReportAnswer::Counted;
        let rec = if counted {
            self.db.record_report(&report, &session.keys, &self.settings.policy).await?
        } else {
            self.db.store_report(&report, &session.keys, &self.settings.policy).await?
        };
        // Cached lookups are forgotten at once only when a seat changed hands;
        // their vote and report counts may lag by the cache's TTL. (Forgetting
        // them on every report sent every lookup to the database while reports
        // flowed.) A report at a key with an empty seat (fewer than three
        // winners: device, arch, vendor) may move its provisional answer, so
        // it empties the cache too, until the quorum fills the seats. A
        // report answered before it was counted leaves this to the pass
        // that counts it (the elector's epoch, `cache_generation`).
        if counted && (rec.seats_changed || (self.settings.first_answer == super::FirstAnswer::Provisional && rec.winners.len() < 3)) {
            self.generation.fetch_add(1, Ordering::Release);
        }
        self.metrics.measurements_accepted.fetch_add(n as u64, Ordering::Relaxed);
        Ok(ReportResponse {
            report_id: rec.report_id,
            accepted: n,
            winners: rec
                .winners
                .into_iter()
                .map(|w| WinnerView {
                    level: w.level,
                    level_key: w.level_key,
                    sha256: w.kernel_sha256,
                    votes: w.votes,
                    total_votes: w.total_votes,
                    reports: w.reports,
                    best_median_us: w.best_median_us,
                })
                .collect(),
        })
    }
}
