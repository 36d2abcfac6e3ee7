//! Typed errors with stable codes. A code never changes meaning once published;
//! messages may be reworded.

use std::fmt;

/// Which input a problem is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    Policy,
    Catalog,
    Call,
    Context,
    State,
    Input,
}

impl Origin {
    pub fn as_str(self) -> &'static str {
        match self {
            Origin::Policy => "policy",
            Origin::Catalog => "catalog",
            Origin::Call => "call",
            Origin::Context => "context",
            Origin::State => "state",
            Origin::Input => "input",
        }
    }
}

/// Stable problem codes. `as_str` is the wire form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProblemCode {
    /// Not valid YAML / JSON, or over a parser limit (depth, aliases, size).
    Syntax,
    /// A key the format does not define.
    UnknownKey,
    /// A value of the wrong type or outside its allowed set.
    InvalidValue,
    /// A key that must be there is missing.
    MissingKey,
    /// The same key or tool named twice.
    Duplicate,
    /// `version` / `formatVersion` is not one this engine reads.
    UnsupportedVersion,
    /// The catalog's shape matches none of the accepted forms.
    UnknownCatalogForm,
    /// A tool's `inputSchema` is not a schema the validator can compile.
    InvalidSchema,
    /// The input is larger than the engine accepts.
    TooLarge,
}

impl ProblemCode {
    /// Every problem code (docs/codes.md is generated from this list).
    pub const ALL: [ProblemCode; 9] = [
        ProblemCode::Syntax,
        ProblemCode::UnknownKey,
        ProblemCode::InvalidValue,
        ProblemCode::MissingKey,
        ProblemCode::Duplicate,
        ProblemCode::UnsupportedVersion,
        ProblemCode::UnknownCatalogForm,
        ProblemCode::InvalidSchema,
        ProblemCode::TooLarge,
    ];

    /// What the code means, for docs/codes.md.
    pub fn meaning(self) -> &'static str {
        match self {
            ProblemCode::Syntax => "not valid YAML / JSON, or over a parser limit (depth, aliases, size)",
            ProblemCode::UnknownKey => "a key the format does not define",
            ProblemCode::InvalidValue => "a value of the wrong type or outside its allowed set",
            ProblemCode::MissingKey => "a key that must be there is missing",
            ProblemCode::Duplicate => {
                "an item listed twice (a `requires` or `scopes` entry, a catalog tool); a key written twice is `SYNTAX`"
            }
            ProblemCode::UnsupportedVersion => "`version` / `formatVersion` is not one this engine reads",
            ProblemCode::UnknownCatalogForm => "the catalog's shape matches none of the accepted forms",
            ProblemCode::InvalidSchema => "a tool's `inputSchema` is not a schema the validator can compile",
            ProblemCode::TooLarge => "the input is larger than the engine accepts",
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ProblemCode::Syntax => "SYNTAX",
            ProblemCode::UnknownKey => "UNKNOWN_KEY",
            ProblemCode::InvalidValue => "INVALID_VALUE",
            ProblemCode::MissingKey => "MISSING_KEY",
            ProblemCode::Duplicate => "DUPLICATE",
            ProblemCode::UnsupportedVersion => "UNSUPPORTED_VERSION",
            ProblemCode::UnknownCatalogForm => "UNKNOWN_CATALOG_FORM",
            ProblemCode::InvalidSchema => "INVALID_SCHEMA",
            ProblemCode::TooLarge => "TOO_LARGE",
        }
    }
}

/// A problem in an input, with where it is: 1-based line and column when the
/// input is YAML or a JSON syntax error, and a path (`tools[3].name`) where the
/// position is not known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub code: ProblemCode,
    pub origin: Origin,
    pub message: String,
    pub path: String,
    pub line: u32,
    pub column: u32,
}

impl Problem {
    pub fn new(code: ProblemCode, origin: Origin, message: impl Into<String>) -> Self {
        Problem {
            code,
            origin,
            message: message.into(),
            path: String::new(),
            line: 0,
            column: 0,
        }
    }

    pub fn at(mut self, line: u64, column: u64) -> Self {
        self.line = u32::try_from(line).unwrap_or(u32::MAX);
        self.column = u32::try_from(column).unwrap_or(u32::MAX);
        self
    }

    pub fn with_path(mut self, path: impl Into<String>) -> Self {
        self.path = path.into();
        self
    }

    /// The full wire code: origin-qualified, e.g. `POLICY_UNKNOWN_KEY`.
    pub fn full_code(&self) -> String {
        format!("{}_{}", self.origin.as_str().to_ascii_uppercase(), self.code.as_str())
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line > 0 {
            write!(f, "{}:{}: ", self.line, self.column)?;
        }
        if !self.path.is_empty() {
            write!(f, "{}: ", self.path)?;
        }
        write!(f, "{} ({})", self.message, self.full_code())
    }
}

impl std::error::Error for Problem {}

/// A lint on loaded rules: not an error, but something a reviewer should see.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub severity: Severity,
    /// One of [`FINDING_CODES`].
    pub code: &'static str,
    pub origin: Origin,
    pub message: String,
    pub path: String,
    pub line: u32,
    pub column: u32,
}

/// A policy entry names a tool the catalog does not have.
pub const TOOL_NOT_IN_CATALOG: &str = "POLICY_TOOL_NOT_IN_CATALOG";
/// A policy's stated operation type says the opposite of the catalog's hint.
pub const CONTRADICTS_HINT: &str = "POLICY_CONTRADICTS_HINT";
/// A pinned tool's definition changed: it is held back.
pub const PIN_MISMATCH: &str = "PIN_MISMATCH";
/// A transactional tool runs without a person's confirmation.
pub const TRANSACTIONAL_WITHOUT_CONFIRMATION: &str = "TRANSACTIONAL_WITHOUT_CONFIRMATION";
/// A `requires` entry (or the idempotency key a tool is made to require)
/// names an argument the tool's input schema does not declare.
pub const REQUIRED_ARGUMENT_UNDECLARED: &str = "REQUIRED_ARGUMENT_UNDECLARED";

/// Every code a [`Finding`] of `toolgate check` (and `findings()` in the
/// SDKs) carries, with what it means: `(code, meaning)`.
pub const FINDING_CODES: [(&str, &str); 5] = [
    (
        TOOL_NOT_IN_CATALOG,
        "a `tool_policies` entry names a tool the catalog does not have (the entry does nothing)",
    ),
    (
        CONTRADICTS_HINT,
        "a policy's `operation_type` says the opposite of the catalog's hints (read_only for a tool that writes, transactional for one that only reads)",
    ),
    (
        PIN_MISMATCH,
        "a pinned tool's definition changed since it was pinned: it is held back (`toolgate pin` pins it again)",
    ),
    (
        TRANSACTIONAL_WITHOUT_CONFIRMATION,
        "a transactional tool runs without a person's confirmation (`require_confirmation: false`)",
    ),
    (
        REQUIRED_ARGUMENT_UNDECLARED,
        "a `requires` entry, or the `idempotency_key` of `require_idempotency_key: true`, names an argument the tool's input schema does not declare: a typo, or a tool no call can run when its schema takes no other arguments (or it has none)",
    ),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    Error,
    Warning,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
    }
}
