//! toolgate's policy engine: decides whether an MCP `tools/call` may run and
//! which tools a surface may publish in `tools/list`.
//!
//! Pure and deterministic: no I/O, no clock, no randomness. The same inputs
//! give the same bytes out, natively and inside the WebAssembly component.
//!
//! ```
//! use policy_core::{Rules, Context};
//! let catalog = r#"{"tools":[{"name":"lookup","annotations":{"readOnlyHint":true}}]}"#;
//! let rules = Rules::load(None, catalog).unwrap();
//! let decision = rules.evaluate_json(br#"{"name":"lookup","arguments":{}}"#, "{}");
//! assert!(decision.ok);
//! ```

pub mod catalog;
pub mod classify;
pub mod context;
pub mod decision;
pub mod display;
pub mod error;
pub mod evaluate;
pub mod expose;
pub mod json;
pub mod pipeline;
pub mod policy;
pub mod rules;
pub mod schemas;
pub mod text;
pub mod turn;
pub mod yaml;

pub use classify::{Classification, PolicySource};
pub use context::{Context, Surface};
pub use decision::{Code, Decision};
pub use display::escape_for_person;
pub use error::{Finding, Origin, Problem, ProblemCode, Severity};
pub use pipeline::{Confirmation, OpenedSeal, Outcome};
pub use policy::OperationType;
pub use rules::Rules;

/// The WIT contract this engine implements (`toolgate:policy@…`).
pub const CONTRACT_VERSION: &str = "0.2.0";
