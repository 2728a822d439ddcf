//! The `hearth` CLI (up, down, status, logs, chat, bench, eval). Not built yet: see issue 6.
