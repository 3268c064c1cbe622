//! Model-level latency reports (append only), kept under the keys of the
//! session that sent them, for [`crate::plan`] to choose a target from.

use sqlx::Row;

use crate::{Db, DeviceKeys, Level, NewModelLatency, Result, fallback, now_ms, plan, random_id};

macro_rules! model_latency_sql {
    ($col:literal) => {
        concat!(
            "SELECT session_id, target, median_ms FROM model_latency ",
            "WHERE model = $1 AND batch = $2 AND seq_len = $3 AND ",
            $col,
            " = $4"
        )
    };
}

impl Db {
    /// Stores one model-level latency report (append only) under the keys
    /// of the session it came with.
    pub async fn record_model_latency(&self, r: &NewModelLatency, keys: &DeviceKeys) -> Result<String> {
        let id = random_id()?;
        let _w = self.write.lock().await;
        sqlx::query(
            "INSERT INTO model_latency (id, model, weights_sha256, target, batch, seq_len, median_ms, runs, session_id, \
             device_key, arch_key, vendor_key, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)",
        )
        .bind(&id)
        .bind(&r.model)
        .bind(&r.weights_sha256)
        .bind(&r.target)
        .bind(r.batch)
        .bind(r.seq_len)
        .bind(r.median_ms)
        .bind(r.runs)
        .bind(&r.session_id)
        .bind(&keys.device_key)
        .bind(&keys.arch_key)
        .bind(&keys.vendor_key)
        .bind(now_ms())
        .execute(&self.pool)
        .await?;
        Ok(id)
    }

    /// Every latency report for `model` at one batch and sequence length
    /// whose `level` key is `key` (device, arch or vendor).
    pub async fn model_latencies(&self, model: &str, batch: i64, seq_len: i64, level: Level, key: &str) -> Result<Vec<plan::LatencyRow>> {
        let sql = match level {
            Level::Device => model_latency_sql!("device_key"),
            Level::Arch => model_latency_sql!("arch_key"),
            Level::Vendor => model_latency_sql!("vendor_key"),
            Level::Default => return Ok(vec![]),
        };
        let rows = sqlx::query(sql).bind(model).bind(batch).bind(seq_len).bind(key).fetch_all(&self.pool).await?;
        rows.iter()
            .map(|r| -> Result<plan::LatencyRow> {
                Ok(plan::LatencyRow {
                    session_id: r.try_get("session_id")?,
                    target: r.try_get("target")?,
                    median_ms: r.try_get("median_ms")?,
                })
            })
            .collect()
    }

    /// Which target runs `model` faster at one batch and sequence length on
    /// a device with `keys`: the latencies under its device, arch and vendor
    /// key, summarised per level ([`plan::summarise`]); the most specific
    /// level where a target wins ([`plan::faster`] with `quorum`) decides,
    /// through the same walk as kernel lookups ([`fallback::best`]).
    pub async fn model_choice(&self, model: &str, batch: i64, seq_len: i64, keys: &DeviceKeys, quorum: usize) -> Result<plan::Choice> {
        let mut levels = Vec::new();
        for (level, key) in fallback::levels(keys) {
            let summary = plan::summarise(&self.model_latencies(model, batch, seq_len, level, key).await?);
            levels.push((level, (key.to_string(), summary)));
        }
        let seen = levels.iter().find(|(_, (_, s))| !s.is_empty()).cloned();
        let decided = fallback::best(levels, |_, (_, s)| plan::faster(s, quorum).is_some());
        Ok(match (decided, seen) {
            (Some((level, (key, summary))), _) => {
                let target = plan::faster(&summary, quorum).map(|t| t.target.clone()).unwrap_or_default();
                plan::Choice { level: Some(level), key: Some(key), target: Some(target), summary }
            }
            (None, Some((level, (key, summary)))) => plan::Choice { level: Some(level), key: Some(key), target: None, summary },
            (None, None) => plan::Choice::default(),
        })
    }
}
