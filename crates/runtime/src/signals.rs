//! A process told to stop: SIGINT (Ctrl-C) or SIGTERM sets a flag a supervising loop polls
//! (`cluster up`, which must stop its daemons before it exits).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A flag set once the process receives SIGINT or SIGTERM (watched on a thread of its own).
pub fn stop_flag() -> std::io::Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let set = stop.clone();
    std::thread::spawn(move || {
        runtime.block_on(async {
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                    .expect("a SIGTERM handler");
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        });
        set.store(true, Ordering::SeqCst);
    });
    Ok(stop)
}
