//! The candidate queue: `GET /v1/sessions/{id}/queue?op=&shape=&target=`,
//! streamed as Server-Sent Events.
//!
//! The queue is NNJIT's extended space (`webtune_tuner::extended_space`):
//! first the exploitation set (winners already voted for this device's key,
//! architecture or vendor, in that order, at most a tenth of the lite
//! space), then the exploration set (the lite space, best first). Each
//! candidate is compiled just in time on the rayon pool (cached by its
//! inputs, stored by its hash) and sent as one `candidate` event with a
//! ticket; a final `done` event closes the queue. A bounded channel keeps the
//! compiler at most a couple of kernels ahead of the client, and a client
//! that disconnects stops the producer at its next send.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::response::IntoResponse;
use axum::response::sse::{Event, KeepAlive, Sse};
use webtune_compiler::Schedule;

use super::error::ApiResult;
use super::limits::{self, Slot};
use super::protocol::{CandidateEvent, ErrorBody, KernelQuery, QueueDone};
use super::ticket::TICKET_TTL_S;
use super::{App, device, kernel_url, kind_of, parse_kind, parse_shape, query, session_of, unix_now};

/// Candidates compiled ahead of the client.
const AHEAD: usize = 2;

/// Candidate queue as Server-Sent Events: `candidate` events (data:
/// CandidateEvent JSON), then one `done` event (data: QueueDone JSON).
#[utoipa::path(get, path = "/v1/sessions/{id}/queue", params(("id" = String, Path, pattern = "^[0-9a-f]{32}$"), KernelQuery), responses(
    (status = 200, description = "Event stream of `candidate` (CandidateEvent) and `done` (QueueDone) events", body = String, content_type = "text/event-stream"),
    (status = 400, response = ErrorBody), (status = 404, response = ErrorBody), (status = 422, response = ErrorBody), (status = 429, response = ErrorBody), (status = 503, response = ErrorBody)))]
pub async fn queue(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
    q: Result<Query<KernelQuery>, QueryRejection>,
) -> ApiResult<axum::response::Response> {
    let session = session_of(&app, &id).await?;
    let q = query(q)?;
    if let Err(wait) = app.per_session.take(&id) {
        app.metrics.rate_limited.fetch_add(1, Ordering::Relaxed);
        return Ok(limits::too_many("too many queues from this session", wait));
    }
    // Bounded: a few queues per session, a bounded number in all. The slots
    // travel with the producer task and are released when it ends, which a
    // client that disconnects causes at the next candidate.
    let per_session = {
        let mut map = app.session_queues.lock().unwrap_or_else(|p| p.into_inner());
        if map.len() > 100_000 {
            map.retain(|_, n| n.load(Ordering::Acquire) > 0);
        }
        map.entry(id.clone()).or_default().clone()
    };
    let Some(session_slot) = Slot::try_take(&per_session, app.config.limits.max_queues_per_session) else {
        return Ok(limits::too_many(
            "this session already streams its limit of queues; finish or close one",
            std::time::Duration::from_secs(1),
        ));
    };
    let Some(global_slot) = Slot::try_take(&app.queues, app.config.limits.max_queues) else {
        app.metrics.overloaded.fetch_add(1, Ordering::Relaxed);
        return Ok(limits::overloaded("the server streams its limit of candidate queues"));
    };
    let (op, target) = parse_kind(&q.op, &parse_shape(&q.shape)?, &q.target)?;
    if let Some(own) = device::target_of(&session.keys)
        && own != target
    {
        return Err(super::wrong_target(&session.keys.device_key, own, target));
    }
    let space = device::space_for(&op, target, &session.keys);
    let kind = kind_of(&op, target);

    // Exploitation set: the crowd's winners for similar devices (device,
    // arch, vendor), whatever space they were voted in; the tuner merges
    // them in front of the lite space, about a tenth of its size.
    let winners: Vec<Schedule> = app
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
                    app.metrics.unreadable_winners.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                })
                .ok()
        })
        .collect();
    let list = device::extended(&winners, &space);

    let (tx, rx) = tokio::sync::mpsc::channel::<Event>(AHEAD);
    let total = list.len();
    tokio::spawn(async move {
        let _slots = (session_slot, global_slot);
        let mut skipped = 0;
        // Each kernel once per queue: two schedules may compile to the same
        // bytes, and a winner of the exploitation set may be in the lite
        // space too; a client reporting both would list one kernel twice.
        let mut streamed = std::collections::HashSet::new();
        for (index, (source, schedule)) in list.into_iter().enumerate() {
            let c = match app.compile_and_store(&op, target, &schedule).await {
                Ok(c) => c,
                Err(e) => {
                    // Already logged when internal; a schedule the compiler
                    // refuses is skipped rather than ending the queue.
                    eprintln!("webtune serve: queue skipped a candidate for {}: {}", op, e.message);
                    skipped += 1;
                    continue;
                }
            };
            if !streamed.insert(c.sha256.clone()) {
                skipped += 1;
                continue;
            }
            // Seeds need not be secret (the client regenerates the inputs
            // from them), but they must not repeat across sessions; a
            // failing random generator ends the queue rather than fall
            // back to a guessable value.
            let seed = match webtune_kernel_db::random_id() {
                Ok(id) => u64::from_str_radix(&id[..15], 16).expect("random_id is hex"),
                Err(e) => {
                    eprintln!("webtune serve: queue for {op} ended after {index} candidates: {e}");
                    break;
                }
            };
            let expiry = unix_now() + TICKET_TTL_S;
            let ev = CandidateEvent {
                index,
                total,
                source: source.to_string(),
                sha256: c.sha256.clone(),
                url: kernel_url(&c.sha256),
                meta: c.meta.clone(),
                ticket: app.signer.issue(&session.id, &c.sha256, &kind, &space.checksum, seed, expiry),
                seed,
                check: webtune_compiler::reference::check_positions(&op, seed),
                space_checksum: space.checksum.clone(),
            };
            let Ok(data) = serde_json::to_string(&ev) else { continue };
            if tx.send(Event::default().event("candidate").id(index.to_string()).data(data)).await.is_err() {
                return; // the client went away
            }
            app.metrics.candidates_streamed.fetch_add(1, Ordering::Relaxed);
        }
        let done = serde_json::to_string(&QueueDone { total, skipped }).unwrap_or_default();
        let _ = tx.send(Event::default().event("done").data(done)).await;
    });
    let stream = futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|e| (Ok::<_, Infallible>(e), rx)) });
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()).into_response())
}
