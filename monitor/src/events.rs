//! Docker's event stream for the followed container's labels: `die` (with the exit code),
//! `oom`, `start` and `destroy`, handed to the log follower, which writes the restart markers.
//! The stream is re-subscribed from the last event's time when it breaks, so none is missed.

use std::collections::HashMap;
use std::time::Duration;

use bollard::query_parameters::EventsOptions;
use bollard::Docker;
use futures_util::StreamExt;
use tokio::sync::{mpsc, watch};

use crate::docker::Selector;
use crate::follow::Msg;

/// A container lifecycle event.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    Died { id: String, exit_code: Option<i64> },
    Oom { id: String },
    Started { id: String },
    Destroyed { id: String },
}

/// Forwards events to `tx` until `shutdown` turns true or the follower is gone.
pub async fn run(
    docker: Docker,
    sel: Selector,
    tx: mpsc::UnboundedSender<Msg>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut since: Option<i64> = None;
    loop {
        let filters = HashMap::from([
            ("type".to_owned(), vec!["container".to_owned()]),
            ("label".to_owned(), vec![sel.label_filter()]),
        ]);
        let options = EventsOptions {
            since: since.map(|s| s.to_string()),
            until: None,
            filters: Some(filters),
        };
        let mut stream = docker.events(Some(options));
        tracing::debug!("subscribed to Docker events for {}", sel.label_filter());
        loop {
            tokio::select! {
                _ = shutdown.changed() => return,
                item = stream.next() => match item {
                    Some(Ok(m)) => {
                        if let Some(t) = m.time {
                            since = Some(t);
                        }
                        let id = m.actor.as_ref().and_then(|a| a.id.clone()).unwrap_or_default();
                        let attr = |k: &str| {
                            m.actor.as_ref()?.attributes.as_ref()?.get(k).cloned()
                        };
                        let event = match m.action.as_deref() {
                            Some("die") => Event::Died {
                                id,
                                exit_code: attr("exitCode").and_then(|c| c.parse().ok()),
                            },
                            Some("oom") => Event::Oom { id },
                            Some("start") => Event::Started { id },
                            Some("destroy") => Event::Destroyed { id },
                            _ => continue,
                        };
                        tracing::debug!("Docker event {event:?}");
                        if tx.send(Msg::Docker(event)).is_err() {
                            return;
                        }
                    }
                    Some(Err(e)) => {
                        tracing::warn!("Docker events: {e}; subscribing again");
                        break;
                    }
                    None => break,
                },
            }
        }
        tokio::select! {
            _ = shutdown.changed() => return,
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
}
