//! Ctrl-C as a flag every stage can check or wait on, so an interrupted run stops sending,
//! abandons what is in flight and still reports what finished.

use tokio::sync::watch;

/// Set once Ctrl-C was pressed.
#[derive(Debug, Clone)]
pub struct Stop(watch::Receiver<bool>);

impl Stop {
    /// Listens for Ctrl-C from now on.
    pub fn on_ctrl_c() -> Self {
        let (tx, rx) = watch::channel(false);
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                let _ = tx.send(true);
            }
        });
        Self(rx)
    }

    pub fn is_set(&self) -> bool {
        *self.0.borrow()
    }

    /// Resolves once Ctrl-C was pressed (never, if the listener is gone).
    pub async fn wait(&mut self) {
        if self.0.wait_for(|s| *s).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}
