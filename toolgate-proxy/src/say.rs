//! The gateway's own notices on stderr (start-up settings, reloads, stops,
//! a log it cannot write): always shown, whatever `RUST_LOG` filters, as
//! `toolgate proxy: …` lines, or with `--log-format json` as JSON lines of
//! the structured logs' shape, so a log shipper reading JSON loses none of
//! them (review 28: a reload's failure came as plain text among JSON).

use std::sync::atomic::{AtomicBool, Ordering};

static JSON: AtomicBool = AtomicBool::new(false);

/// How bad a notice is, named as the structured logs name levels.
#[derive(Debug, Clone, Copy)]
pub enum Level {
    Info,
    Warn,
    Error,
}

/// From now on, notices are JSON lines.
pub fn as_json() {
    JSON.store(true, Ordering::SeqCst);
}

pub fn say(level: Level, message: &str) {
    if JSON.load(Ordering::SeqCst) {
        let level = match level {
            Level::Info => "INFO",
            Level::Warn => "WARN",
            Level::Error => "ERROR",
        };
        let line = serde_json::json!({
            "timestamp": crate::audit::rfc3339_now(),
            "level": level,
            "fields": { "message": message },
            "target": "toolgate_proxy",
        });
        eprintln!("{line}");
    } else {
        eprintln!("toolgate proxy: {message}");
    }
}

/// `say!(Warn, "format", args…)`.
macro_rules! say {
    ($level:ident, $($format:tt)*) => {
        $crate::say::say($crate::say::Level::$level, &format!($($format)*))
    };
}
