//! Lookups: the best known kernel for a device key (cached), kernel bytes
//! by hash, and the ρ microbenchmark's kernel pairs.
//!
//! Which winner answers is kernel-db's rule ([`webtune_kernel_db::Db::best`]:
//! the device → arch → vendor walk, a winner fitting the asker's candidate
//! space and thread count); this room adds the space and the thread limit
//! the asker's keys imply, the cache, and what answers where no elected
//! winner fits ([`super::FirstAnswer`]): a provisional winner of the key's
//! first sessions ([`webtune_kernel_db::Db::provisional`], issue 40), else
//! the first candidate the device's lite space predicts
//! ([`device::predicted`], issue 37); the portable default only for a
//! lookup without a device key. The answer's `source` and `confidence` say
//! which. A provisional answer changes with reports that change no seat:
//! a report at a key with an empty seat empties this server's cache too
//! (`reports`), and other servers see it within the TTL.

use std::sync::atomic::Ordering;
use std::time::Instant;

use bytes::Bytes;
use webtune_compiler::{Op, Schedule, Target};
use webtune_kernel_db::fallback::Fit;
use webtune_kernel_db::{DeviceKeys, KernelKind, Level, provisional_confidence};
use webtune_tuner::{RHO_MARGIN, rho_primitives, rho_version};

use super::protocol::{BestResponse, RhoKernel, RhoPair, RhoResponse, Source};
use super::{
    Compiled, Error, FirstAnswer, MAX_KEY_LEN, Result, Service, cache_insert, device, kernel_url, kind_of, parse_kind, parse_shape,
};

/// One best-kernel lookup, as asked (validated here).
#[derive(Clone, Debug)]
pub struct Lookup<'a> {
    /// Empty for "no device": the portable default.
    pub device_key: &'a str,
    pub op: &'a str,
    pub shape: &'a str,
    pub target: &'a str,
}

impl Service {
    /// The best known kernel for a device key, with the fallback level that
    /// answered, as JSON (a [`BestResponse`]). Answers are cached for the
    /// TTL, and forgotten at once when a report here changes a seat.
    pub async fn best(&self, q: &Lookup<'_>) -> Result<Bytes> {
        if q.device_key.len() > MAX_KEY_LEN {
            return Err(Error::bad_request(format!("device_key is longer than {MAX_KEY_LEN} bytes")));
        }
        let cache_key = format!("{}\n{}\n{}\n{}", q.device_key, q.op, q.shape, q.target);
        let generation = self.cache_generation();
        let cached = self.best_cache.read().unwrap_or_else(|p| p.into_inner()).get(&cache_key).cloned();
        if let Some((g, at, body)) = cached
            && g == generation
            && at.elapsed() < self.settings.cache_ttl
        {
            self.metrics.best_cache_hits.fetch_add(1, Ordering::Relaxed);
            return Ok(body);
        }
        let (op, target) = parse_kind(q.op, &parse_shape(q.shape)?, q.target)?;
        let kind = kind_of(&op, target);
        let keys = if q.device_key.is_empty() { None } else { self.keys_of(q.device_key).await? };
        let answer = match &keys {
            Some(keys) => self.first_fitting(&op, target, &kind, keys).await?,
            None => {
                let c = self.compile_and_store(&op, target, &Schedule::default_for(&op, target)).await?;
                unvoted(&c, Source::Portable)
            }
        };
        let i = match answer.level {
            Level::Device => 0,
            Level::Arch => 1,
            Level::Vendor => 2,
            Level::Default => 3,
        };
        self.metrics.best[i].fetch_add(1, Ordering::Relaxed);
        self.metrics.best_by_source[answer.source as usize].fetch_add(1, Ordering::Relaxed);
        let body = Bytes::from(serde_json::to_vec(&answer).map_err(Error::internal)?);
        cache_insert(
            &mut self.best_cache.write().unwrap_or_else(|p| p.into_inner()),
            cache_key,
            (generation, Instant::now(), body.clone()),
        );
        Ok(body)
    }

    /// The answer for a device with `keys`, most trusted first: the elected
    /// winner along the fallback walk that fits its space and threads; else
    /// (with [`FirstAnswer::Provisional`]) the provisional winner of the
    /// key's first sessions along the same walk; else (unless
    /// [`FirstAnswer::Portable`]) the kernel its lite space predicts,
    /// compiled once per schedule and stored like every other kernel.
    async fn first_fitting(&self, op: &Op, target: Target, kind: &KernelKind, keys: &DeviceKeys) -> Result<BestResponse> {
        let space = device::space_for(op, target, keys);
        let max_threads = device::max_threads(keys);
        let fit = Fit { space_checksum: Some(&space.checksum), max_threads: Some(max_threads) };
        if let Some(b) = self.db.best(kind, keys, fit).await? {
            let meta: serde_json::Value = serde_json::from_str(&b.meta_json).map_err(Error::internal)?;
            return Ok(BestResponse {
                level: b.winner.level,
                level_key: Some(b.winner.level_key),
                meta,
                url: kernel_url(&b.winner.kernel_sha256),
                votes: b.winner.votes,
                reports: b.winner.reports,
                space_checksum: Some(b.winner.space_checksum),
                source: Source::Elected,
                confidence: 1.0,
            });
        }
        let first = self.settings.first_answer;
        if first == FirstAnswer::Provisional
            && let Some(p) = self.db.provisional(kind, keys, &space.checksum, Some(max_threads)).await?
        {
            let meta: serde_json::Value = serde_json::from_str(&p.meta_json).map_err(Error::internal)?;
            return Ok(BestResponse {
                level: p.level,
                level_key: Some(p.level_key),
                meta,
                url: kernel_url(&p.kernel_sha256),
                votes: p.votes,
                reports: p.sessions as i64,
                space_checksum: Some(space.checksum.clone()),
                source: Source::Provisional,
                confidence: provisional_confidence(p.sessions, &self.settings.policy),
            });
        }
        let (schedule, source) = match first {
            FirstAnswer::Portable => (Schedule::default_for(op, target), Source::Portable),
            _ => (device::predicted(op, target, keys, &space), Source::Predicted),
        };
        let c = self.compile_and_store(op, target, &schedule).await?;
        Ok(unvoted(&c, source))
    }

    /// Whether a kernel with this hash is stored (content-addressed: a
    /// client's copy is good if it exists here at all).
    pub async fn has_kernel(&self, sha256: &str) -> Result<bool> {
        Ok(self.db.kernel_meta(sha256).await?.is_some())
    }

    /// A kernel's bytes and its target (`wasm` or `wgsl`), or 404.
    pub async fn kernel_bytes(&self, sha256: &str) -> Result<(Vec<u8>, String)> {
        let found = self.db.kernel_bytes(sha256).await?;
        let found = found
            .ok_or_else(|| Error::not_found(format!("no kernel with hash {sha256}; hashes come from /v1/kernels/best or the queue")))?;
        self.metrics.kernel_downloads.fetch_add(1, Ordering::Relaxed);
        Ok(found)
    }

    /// The kernel pairs of the on-device microbenchmark ρ on `target`,
    /// compiled and stored like every other kernel.
    pub async fn rho(&self, target: Target) -> Result<RhoResponse> {
        let mut pairs = Vec::new();
        for p in rho_primitives(target) {
            let base = self.compile_and_store(&p.op, target, &p.base).await?;
            let variant = self.compile_and_store(&p.op, target, &p.variant).await?;
            pairs.push(RhoPair {
                name: p.name.to_string(),
                meaning: p.meaning.to_string(),
                op: p.op.kind().to_string(),
                shape: p.op.shape().to_vec(),
                base: RhoKernel { url: kernel_url(&base.sha256), meta: base.meta.clone() },
                variant: RhoKernel { url: kernel_url(&variant.sha256), meta: variant.meta.clone() },
                needs_relaxed_simd: p.needs_relaxed_simd,
            });
        }
        Ok(RhoResponse { version: rho_version(target), margin: RHO_MARGIN, pairs })
    }
}

/// An answer nobody voted for: the fallback's last level.
fn unvoted(c: &Compiled, source: Source) -> BestResponse {
    BestResponse {
        level: Level::Default,
        level_key: None,
        meta: c.meta.clone(),
        url: kernel_url(&c.sha256),
        votes: 0,
        reports: 0,
        space_checksum: None,
        source,
        confidence: 0.0,
    }
}
