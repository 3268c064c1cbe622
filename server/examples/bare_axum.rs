//! The baseline for the lookup load benchmark: a bare axum handler that
//! answers a fixed JSON body of the same size as a best-kernel answer, on
//! the same runtime settings as `webtune serve`.
//!
//! ```text
//! cargo run --release -p webtune --example bare_axum -- 127.0.0.1:8091 1400
//! ```

use axum::Router;
use axum::http::header;
use axum::routing::get;

fn main() {
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:8091".into());
    let size: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(1400);
    let body: &'static str = Box::leak(format!("{{\"pad\":\"{}\"}}", "x".repeat(size.saturating_sub(10))).into_boxed_str());
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    rt.block_on(async move {
        let app = Router::new().route("/v1/kernels/best", get(move || async move { ([(header::CONTENT_TYPE, "application/json")], body) }));
        let listener = tokio::net::TcpListener::bind(&addr).await.expect("bind");
        println!("bare axum: listening on http://{}", listener.local_addr().expect("addr"));
        axum::serve(listener, app).await.expect("serve");
    });
}
