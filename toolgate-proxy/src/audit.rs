//! The audit log: one JSON line per decision, and the approval page's
//! lines about what a person did there ([`PAGE`]).

use serde_json::{Map, Value};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::ProxyError;

/// The `outcome` of the approval page's lines (`shown`, `approved`,
/// `denied`, `expired`): not decisions, so they carry `decision: null`.
pub const PAGE: &str = "page";

/// Where audit lines go: a file, or any writer (tests, the gateway fuzz
/// target).
pub struct Audit {
    file: Mutex<Box<dyn Write + Send>>,
    with_args: bool,
    /// `toolgate_audit_write_failures`, when the gateway keeps metrics.
    failures: Option<prometheus_client::metrics::counter::Counter>,
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
    /// The authenticated caller (the token's subject); empty when the
    /// gateway does not authenticate callers (then not written).
    pub caller: &'a str,
    /// Shadow mode: the policy would have blocked this forwarded call.
    pub would_block: bool,
}

/// When the audit file is rotated: the current file becomes `FILE.1`, the
/// one before `FILE.2`, and so on; the oldest beyond the kept count goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rotation {
    Never,
    /// Before a line would take the file past this many bytes.
    Size(u64),
    /// At the first line of a new UTC day.
    Daily,
}

impl Rotation {
    /// `--audit-rotate`: `daily`, or a size such as `10MB`, `512KB`, `1GB`
    /// or a plain byte count.
    pub fn parse(text: &str) -> Result<Rotation, String> {
        let text = text.trim();
        if text.eq_ignore_ascii_case("daily") {
            return Ok(Rotation::Daily);
        }
        let upper = text.to_ascii_uppercase();
        let (digits, unit) = match upper.find(|c: char| !c.is_ascii_digit()) {
            Some(at) => upper.split_at(at),
            None => (upper.as_str(), ""),
        };
        let scale: u64 = match unit.trim() {
            "" | "B" => 1,
            "KB" | "K" => 1 << 10,
            "MB" | "M" => 1 << 20,
            "GB" | "G" => 1 << 30,
            _ => return Err(format!("--audit-rotate {text:?}: give `daily` or a size like 10MB")),
        };
        match digits.parse::<u64>() {
            Ok(n) if n > 0 => Ok(Rotation::Size(n.saturating_mul(scale))),
            _ => Err(format!("--audit-rotate {text:?}: give `daily` or a size like 10MB")),
        }
    }
}

/// An append-only audit file that rotates itself.
struct RotatingFile {
    path: PathBuf,
    file: std::fs::File,
    rotation: Rotation,
    keep: u32,
    size: u64,
    day: u64,
}

/// A tool name as an audit line holds it: a caller may name a made-up tool
/// of megabytes, longer than the engine lets any catalog name be; written whole, a few such calls
/// would fill the audit volume or rotate earlier lines away. Longer names
/// are cut (at a character boundary) and say how long they were.
fn bounded_name(name: &str) -> String {
    if name.len() <= policy_core::catalog::MAX_TOOL_NAME_BYTES {
        return name.to_owned();
    }
    let mut end = policy_core::catalog::MAX_TOOL_NAME_BYTES;
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", name.get(..end).unwrap_or_default(), name.len())
}

fn utc_day() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
        / 86_400
}

/// Created readable by its owner only: the lines name callers and, with
/// `--audit-args`, hold argument values. (An existing file keeps its mode:
/// the operator may have widened it on purpose.)
fn open_append(path: &Path) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.create(true).append(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path)
}

impl RotatingFile {
    fn numbered(&self, n: u32) -> PathBuf {
        let mut name = self.path.clone().into_os_string();
        name.push(format!(".{n}"));
        PathBuf::from(name)
    }

    fn rotate(&mut self) -> std::io::Result<()> {
        let _ = std::fs::remove_file(self.numbered(self.keep));
        for n in (1..self.keep).rev() {
            let from = self.numbered(n);
            if from.exists() {
                std::fs::rename(&from, self.numbered(n + 1))?;
            }
        }
        std::fs::rename(&self.path, self.numbered(1))?;
        self.file = open_append(&self.path)?;
        self.size = 0;
        Ok(())
    }
}

impl Write for RotatingFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let due = match self.rotation {
            Rotation::Never => false,
            Rotation::Size(max) => self.size > 0 && self.size.saturating_add(buf.len() as u64) > max,
            Rotation::Daily => utc_day() != self.day,
        };
        if due {
            self.day = utc_day();
            if let Err(e) = self.rotate() {
                // Lines keep going to the current file rather than nowhere.
                say!(Warn, "rotating the audit log {} failed: {e}", self.path.display());
            }
        }
        let written = self.file.write(buf)?;
        self.size = self.size.saturating_add(written as u64);
        Ok(written)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

impl Audit {
    pub fn open(path: &Path, with_args: bool) -> Result<Audit, ProxyError> {
        Audit::open_rotating(path, with_args, Rotation::Never, 0)
    }

    /// `--audit FILE` with `--audit-rotate` and `--audit-keep`; `-` is
    /// standard output (JSON lines for a log shipper).
    pub fn open_rotating(path: &Path, with_args: bool, rotation: Rotation, keep: u32) -> Result<Audit, ProxyError> {
        if path == Path::new("-") {
            return Ok(Audit::to_writer(Box::new(std::io::stdout()), with_args));
        }
        let error = |source| ProxyError::Audit {
            path: path.to_owned(),
            source,
        };
        let file = open_append(path).map_err(error)?;
        let size = file.metadata().map_err(error)?.len();
        Ok(Audit::to_writer(
            Box::new(RotatingFile {
                path: path.to_owned(),
                file,
                rotation,
                keep: keep.max(1),
                size,
                day: utc_day(),
            }),
            with_args,
        ))
    }

    /// Audit lines written to `writer`, one JSON object per line.
    pub fn to_writer(writer: Box<dyn Write + Send>, with_args: bool) -> Audit {
        Audit {
            file: Mutex::new(writer),
            with_args,
            failures: None,
        }
    }

    /// Counts every line that cannot be written in `counter`.
    pub fn counting_failures(mut self, counter: prometheus_client::metrics::counter::Counter) -> Audit {
        self.failures = Some(counter);
        self
    }

    /// Whether lines carry argument values (`--audit-args`): callers copy
    /// the arguments for a record only then.
    pub fn keeps_arguments(&self) -> bool {
        self.with_args
    }

    pub fn write(&self, record: &Record<'_>) {
        let mut line = Map::new();
        line.insert("time".into(), Value::String(rfc3339_now()));
        line.insert("tool".into(), Value::String(bounded_name(record.tool)));
        // The engine's decision: a call it allowed whose sending then failed
        // (`upstream_failed`, `not_sent`) has the host's code on its line, and
        // may have run; review 22 found consumers counting it as refused.
        let allowed = record.code.is_none() || matches!(record.outcome, "upstream_failed" | "not_sent");
        // A person's act on the approval page is no decision: counting
        // lines by `decision` counts decisions only (review 29).
        let decision = match record.outcome {
            PAGE => Value::Null,
            _ if allowed => Value::String("allowed".into()),
            _ => Value::String("blocked".into()),
        };
        line.insert("decision".into(), decision);
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
        if !record.caller.is_empty() {
            line.insert("caller".into(), Value::String(record.caller.to_owned()));
        }
        if record.would_block {
            line.insert("would_block".into(), Value::Bool(true));
        }
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
            say!(Warn, "could not write the audit log: {e}");
            if let Some(failures) = &self.failures {
                failures.inc();
            }
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
    /// An allowed, forwarded call's line.
    fn forwarded<'a>(tool: &'a str, caller: &'a str) -> super::Record<'a> {
        super::Record {
            tool,
            code: None,
            revision: "r",
            surface: "confirming",
            confirmation: None,
            seal: None,
            approval: None,
            digest: None,
            event: None,
            outcome: "forwarded",
            arguments: None,
            caller,
            would_block: false,
        }
    }

    /// A full disk: every line fails, each is counted, nothing panics.
    #[test]
    fn a_line_that_cannot_be_written_is_counted() {
        struct Full;
        impl std::io::Write for Full {
            fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
                Err(std::io::Error::from(std::io::ErrorKind::StorageFull))
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let metrics = crate::metrics::Metrics::new();
        let audit = super::Audit::to_writer(Box::new(Full), false).counting_failures(metrics.audit_write_failures());
        for _ in 0..2 {
            audit.write(&forwarded("t", ""));
        }
        assert!(
            metrics.render().contains("toolgate_audit_write_failures_total 2"),
            "{}",
            metrics.render()
        );
    }

    use super::*;

    #[test]
    fn rotation_sizes() {
        assert_eq!(Rotation::parse("daily"), Ok(Rotation::Daily));
        assert_eq!(Rotation::parse("10MB"), Ok(Rotation::Size(10 << 20)));
        assert_eq!(Rotation::parse("512"), Ok(Rotation::Size(512)));
        assert!(Rotation::parse("0").is_err());
        assert!(Rotation::parse("ten").is_err());
    }

    #[test]
    fn rotates_by_size_and_keeps_the_newest() {
        let dir = std::env::temp_dir().join(format!("toolgate-audit-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("audit.jsonl");
        let audit = Audit::open_rotating(&path, false, Rotation::Size(300), 2).unwrap();
        for n in 0..12 {
            let tool = format!("tool{n}");
            audit.write(&forwarded(&tool, "alice"));
        }
        let current = std::fs::read_to_string(&path).unwrap();
        assert!(current.contains("\"tool11\""), "{current}");
        assert!(current.contains("\"caller\":\"alice\""));
        assert!(std::fs::metadata(&path).unwrap().len() <= 300);
        assert!(dir.join("audit.jsonl.1").exists());
        assert!(dir.join("audit.jsonl.2").exists());
        assert!(!dir.join("audit.jsonl.3").exists());
        #[cfg(unix)]
        for file in ["audit.jsonl", "audit.jsonl.1"] {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.join(file)).unwrap().permissions().mode();
            assert_eq!(mode & 0o077, 0, "{file}: {mode:o}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
    #[test]
    fn made_up_tool_names_are_cut_in_audit_lines() {
        assert_eq!(bounded_name("send"), "send");
        let longest = "a".repeat(policy_core::catalog::MAX_TOOL_NAME_BYTES);
        assert_eq!(bounded_name(&longest), longest);
        let huge = "é".repeat(2_000_000);
        let cut = bounded_name(&huge);
        assert!(cut.len() < 300 && cut.ends_with("… (4000000 bytes)"), "{}", cut.len());
    }

    #[test]
    fn civil_dates() {
        assert_eq!(super::civil_from_days(0), (1970, 1, 1));
        assert_eq!(super::civil_from_days(19_723), (2024, 1, 1));
        assert_eq!(super::civil_from_days(20_513), (2026, 3, 1));
        let now = super::rfc3339_now();
        assert_eq!(now.len(), "2026-01-01T00:00:00.000Z".len());
    }
}
