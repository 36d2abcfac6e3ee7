//! The audit log: one JSON line per decision.

use serde_json::{Map, Value};
use std::io::Write;
use std::path::Path;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::ProxyError;

/// Where audit lines go: a file, or any writer (tests, the gateway fuzz
/// target).
pub struct Audit {
    file: Mutex<Box<dyn Write + Send>>,
    with_args: bool,
}

impl std::fmt::Debug for Audit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Audit")
            .field("with_args", &self.with_args)
            .finish_non_exhaustive()
    }
}

/// One decision, as written.
#[derive(Debug)]
pub struct Record<'a> {
    pub tool: &'a str,
    /// `None` when allowed.
    pub code: Option<&'a str>,
    pub revision: &'a str,
    pub surface: &'a str,
    /// How confirmation was obtained, when it was: `elicitation` or
    /// `argument`; `declined` when the person declined.
    pub confirmation: Option<&'a str>,
    /// The sealed confirmation's id (MCP 2026-07-28), when one was made or
    /// presented.
    pub seal: Option<&'a str>,
    /// The approval page's id, when a link was given or used.
    pub approval: Option<&'a str>,
    /// The call digest, on approval lines (never argument values).
    pub digest: Option<&'a str>,
    /// An approval event: `link`, `shown`, `approved`, `denied`,
    /// `expired`, `consumed`.
    pub event: Option<&'a str>,
    /// What happened to the call: `forwarded` or `blocked`.
    pub outcome: &'a str,
    pub arguments: Option<&'a Value>,
}

impl Audit {
    pub fn open(path: &Path, with_args: bool) -> Result<Audit, ProxyError> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|source| ProxyError::Audit {
                path: path.to_owned(),
                source,
            })?;
        Ok(Audit::to_writer(Box::new(file), with_args))
    }

    /// Audit lines written to `writer`, one JSON object per line.
    pub fn to_writer(writer: Box<dyn Write + Send>, with_args: bool) -> Audit {
        Audit {
            file: Mutex::new(writer),
            with_args,
        }
    }

    /// Whether lines carry argument values (`--audit-args`): callers copy
    /// the arguments for a record only then.
    pub fn keeps_arguments(&self) -> bool {
        self.with_args
    }

    pub fn write(&self, record: &Record<'_>) {
        let mut line = Map::new();
        line.insert("time".into(), Value::String(rfc3339_now()));
        line.insert("tool".into(), Value::String(record.tool.to_owned()));
        line.insert(
            "decision".into(),
            Value::String(if record.code.is_none() { "allowed" } else { "blocked" }.into()),
        );
        line.insert(
            "code".into(),
            record.code.map_or(Value::Null, |c| Value::String(c.to_owned())),
        );
        line.insert("policy_revision".into(), Value::String(record.revision.to_owned()));
        line.insert("surface".into(), Value::String(record.surface.to_owned()));
        line.insert(
            "confirmation".into(),
            record.confirmation.map_or(Value::Null, |c| Value::String(c.to_owned())),
        );
        if let Some(seal) = record.seal {
            line.insert("seal".into(), Value::String(seal.to_owned()));
        }
        for (key, value) in [
            ("approval", record.approval),
            ("digest", record.digest),
            ("event", record.event),
        ] {
            if let Some(value) = value {
                line.insert(key.into(), Value::String(value.to_owned()));
            }
        }
        line.insert("outcome".into(), Value::String(record.outcome.to_owned()));
        if self.with_args {
            line.insert("arguments".into(), record.arguments.cloned().unwrap_or(Value::Null));
        }
        let mut text = Value::Object(line).to_string();
        text.push('\n');
        let mut file = self.file.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        // An audit write failure must not turn into an allowed call or a
        // crash; it is reported on stderr.
        if let Err(e) = file.write_all(text.as_bytes()).and_then(|()| file.flush()) {
            eprintln!("toolgate proxy: could not write the audit log: {e}");
        }
    }
}

/// The current time as RFC 3339 UTC with milliseconds.
pub fn rfc3339_now() -> String {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    rfc3339_ms(u64::try_from(now.as_millis()).unwrap_or(u64::MAX))
}

/// Milliseconds since the Unix epoch as RFC 3339 UTC with milliseconds.
pub fn rfc3339_ms(ms: u64) -> String {
    let secs = ms / 1000;
    let millis = ms % 1000;
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

/// Howard Hinnant's days-to-civil algorithm.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    (y, u32::try_from(m).unwrap_or(1), u32::try_from(d).unwrap_or(1))
}

#[cfg(test)]
mod tests {
    #[test]
    fn civil_dates() {
        assert_eq!(super::civil_from_days(0), (1970, 1, 1));
        assert_eq!(super::civil_from_days(19_723), (2024, 1, 1));
        assert_eq!(super::civil_from_days(20_513), (2026, 3, 1));
        let now = super::rfc3339_now();
        assert_eq!(now.len(), "2026-01-01T00:00:00.000Z".len());
    }
}
