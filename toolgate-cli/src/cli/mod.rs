use anyhow::{Context as _, Result, anyhow};
use clap::{Args, Parser, Subcommand};
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use toolgate::{Context, Engine, Error, RuleSet};
use toolgate_proxy::SurfaceArg;

mod demo;
mod init;
mod policy_test;

/// Usage errors (bad flags), as sysexits' EX_USAGE.
const EXIT_USAGE: u8 = 64;
/// An input (policy, catalog, test file, server) could not be read or loaded.
const EXIT_LOAD: u8 = 2;
/// The answer is no: a check found an error, a test failed, a call was
/// denied under `--fail-on-deny`.
const EXIT_NO: u8 = 1;
/// stdout was closed by its reader (128 + SIGPIPE, as a shell reports it).
const EXIT_BROKEN_PIPE: u8 = 141;

const EXIT_CODES: &str = "\
Exit codes (every command):
  0   done: every test passed, no error found, every call allowed (or no --fail-on-deny)
  1   the answer is no: `check` found an error (any finding with --strict), a `test` case failed, `eval --fail-on-deny` saw a denial,
      `pin` left a pin stale (held back until its entry is reviewed)
      (`proxy`: the gateway stopped on an error)
  2   an input could not be read or loaded (policy, catalog, test file, server, `proxy`'s --store or --audit file); the message names it,
      as FILE:LINE:COL where it has a position
  64  usage error (a flag or argument is wrong)
  141 the reader of its output went away (`toolgate demo | head`): nothing more is said
Errors are one line on stderr: `toolgate: [FILE:LINE:COL: ]message (CODE)` for what the engine refused
(docs/codes.md), `toolgate: cannot read FILE: reason` for a file it could not read.";

#[derive(Parser, Debug)]
#[command(
    name = "toolgate",
    version,
    about = "The tool-call policy engine for MCP: decides whether a tools/call may run.",
    after_help = EXIT_CODES
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Decides calls: JSON lines on stdin (or one `--call`), one decision per line on stdout.
    /// The contract's `evaluate`: a call's own `confirmed: true` counts as confirmed (a policy
    /// author's view; in front of a model, use `toolgate proxy` or an SDK's `decide`).
    Eval(EvalArgs),
    /// Prints the MCP tools/list result this context may see.
    List(RulesArgs),
    /// Validates a policy: alone (syntax, keys, types), against a catalog file, or against a live
    /// server (`-- SERVER_CMD…` / `--upstream URL`): file:line:col findings.
    Check(CheckArgs),
    /// Runs policy test files (calls + context -> expected code).
    Test(TestArgs),
    /// Writes a starter policy for a live server: every tool it lists, classified, writes confirmed,
    /// each pinned (`-- SERVER_CMD…` or `--upstream URL`).
    Init(InitArgs),
    /// Updates the pins of a policy to a live server's current tool definitions.
    Pin(PinArgs),
    /// Runs the bundled retail example through the turn state machine.
    Demo {
        /// Also print every turn state and decision in full, among the narrative: lines
        /// `  state {…}` and `    decision {…}`, the JSON after the word.
        #[arg(long)]
        json: bool,
    },
    /// MCP gateway: put the policy in front of any MCP server
    /// (`toolgate proxy --help`). Everything after `proxy` goes to the
    /// gateway as it is, `--` included.
    #[command(disable_help_flag = true)]
    Proxy {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<std::ffi::OsString>,
    },
    /// Loads a policy and catalog once and writes the engine with them
    /// already loaded (a prepared component): a later load of exactly these
    /// texts is ready at once in every runtime; any other text loads as
    /// ever. Prints the files written.
    Prepare(PrepareArgs),
    /// Compiles the component for this machine and ships it beside this
    /// executable, where every later start loads it instead of compiling
    /// (packaging runs this once per binary). Prints the file written.
    Precompile {
        /// Another place: a directory gets the file under the name the
        /// engine looks for; any other path is written as is (load it with
        /// the SDK's `Engine::from_precompiled_file`).
        out: Option<PathBuf>,
    },
}

#[derive(Args, Debug)]
struct RulesArgs {
    /// The policy file (tool_policies.yaml). Without it the catalog's own fields decide.
    #[arg(long)]
    policy: Option<PathBuf>,
    /// The catalog: an MCP tools/list result, a published catalog, or a legacy tools.yaml.
    #[arg(long)]
    catalog: PathBuf,
    /// confirming (the caller can carry a human confirmation) or direct.
    #[arg(long, value_enum, default_value_t = SurfaceArg::Confirming)]
    surface: SurfaceArg,
    /// Granted scopes, comma-separated. Absent: no scope check. "": none granted.
    #[arg(long)]
    scopes: Option<String>,
    /// The route's allowlist of tool names, comma-separated. Absent: all.
    #[arg(long)]
    allow: Option<String>,
    /// A directory `toolgate prepare` wrote: its engine is used (the same decisions; ready at
    /// once when --policy and --catalog are the texts it was prepared with).
    #[arg(long, value_name = "DIR")]
    prepared: Option<PathBuf>,
}

#[derive(Args, Debug)]
struct PrepareArgs {
    /// The policy file. Without it the catalog's own fields decide.
    #[arg(long)]
    policy: Option<PathBuf>,
    /// The catalog file.
    #[arg(long)]
    catalog: PathBuf,
    /// The directory to write: toolgate_policy.wasm (the prepared component: the Rust SDK's
    /// `Engine::from_prepared_dir`, `--prepared DIR` here, Python's `TOOLGATE_COMPONENT`) and
    /// toolgate_policy.core.wasm (its core module: `Toolgate.load({ module })` in Node and workers).
    #[arg(long)]
    out: PathBuf,
    /// Also write the prepared component's code for this machine (loaded instead of compiling).
    #[arg(long)]
    native: bool,
}

#[derive(Args, Debug)]
struct EvalArgs {
    #[command(flatten)]
    rules: RulesArgs,
    /// One call as JSON (`{"name":…,"arguments":{…}}`) instead of JSON lines on stdin.
    #[arg(long, value_name = "JSON")]
    call: Option<String>,
    /// Exit 1 when any decision denies (every decision is still printed).
    #[arg(long)]
    fail_on_deny: bool,
}

#[derive(Args, Debug)]
struct CheckArgs {
    /// The policy file to check.
    #[arg(long)]
    policy: PathBuf,
    /// A catalog file (an MCP tools/list result, a published catalog, or a legacy tools.yaml).
    #[arg(long, conflicts_with_all = ["upstream", "server"])]
    catalog: Option<PathBuf>,
    /// Check against the tools a Streamable HTTP server lists (http:// or https://).
    #[arg(long, value_name = "URL", conflicts_with = "server")]
    upstream: Option<String>,
    /// Seconds to wait for a live server's catalog.
    #[arg(long, default_value_t = 60)]
    timeout: u64,
    /// text (FILE:LINE:COL: severity: message (CODE) per line) or json (one document).
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Exit 1 on a warning too (a stale pin, a write without confirmation, an
    /// entry naming no tool): for a CI gate, where a rug-pulled tool must stop
    /// the build, not only be held back at run time.
    #[arg(long)]
    strict: bool,
    /// Check against the tools this server lists (started, asked over stdio, stopped).
    #[arg(last = true, value_name = "SERVER_CMD")]
    server: Vec<String>,
}

/// A live server: started (`-- SERVER_CMD…`) or reached (`--upstream URL`).
#[derive(Args, Debug)]
struct ServerArgs {
    /// A Streamable HTTP server (http:// or https://).
    #[arg(
        long,
        value_name = "URL",
        conflicts_with = "server",
        required_unless_present = "server"
    )]
    upstream: Option<String>,
    /// Seconds to wait for the server's catalog.
    #[arg(long, default_value_t = 60)]
    timeout: u64,
    /// The server's command and arguments, started and asked over stdio, then stopped.
    #[arg(last = true, value_name = "SERVER_CMD")]
    server: Vec<String>,
}

impl ServerArgs {
    fn timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.timeout.max(1))
    }
}

#[derive(Args, Debug)]
struct InitArgs {
    /// Where to write the policy.
    #[arg(long, default_value = "tool_policies.yaml")]
    out: PathBuf,
    /// Replace the file if it exists.
    #[arg(long)]
    force: bool,
    /// Write the tools the server annotates as read-only as `read_only`
    /// entries: you checked this server and take its word (default: they
    /// wait for a person, with a comment saying how to take the claim).
    #[arg(long)]
    read_only_from_hints: bool,
    #[command(flatten)]
    from: ServerArgs,
}

#[derive(Args, Debug)]
struct PinArgs {
    /// The policy file whose pins are updated in place (comments and layout kept).
    #[arg(long)]
    policy: PathBuf,
    #[command(flatten)]
    from: ServerArgs,
}

#[derive(Args, Debug)]
struct TestArgs {
    /// Policy test files (YAML).
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// text (one line per case) or json (one document).
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    Text,
    Json,
}

impl RulesArgs {
    fn context(&self) -> Context {
        Context::from_flags(self.surface.into(), self.scopes.as_deref(), self.allow.as_deref())
    }
}

pub fn main() -> ExitCode {
    // The gateway parses its own arguments: clap would take the `--` before
    // the server command for itself (`toolgate proxy -- node server.js`).
    let mut argv = std::env::args_os();
    let program = argv.next();
    let rest: Vec<std::ffi::OsString> = argv.collect();
    // `toolgate help proxy` is the gateway's own help.
    if rest.len() == 2 && rest.first().is_some_and(|a| a == "help") && rest.get(1).is_some_and(|a| a == "proxy") {
        return toolgate_proxy::main_with(["toolgate proxy", "--help"]);
    }
    if rest.first().is_some_and(|a| a == "proxy") {
        let name = std::ffi::OsString::from("toolgate proxy");
        return toolgate_proxy::main_with(std::iter::once(name).chain(rest.into_iter().skip(1)));
    }
    let cli = match Cli::try_parse_from(program.into_iter().chain(rest)) {
        Ok(cli) => cli,
        Err(e) => {
            let usage = e.use_stderr();
            let _ = e.print();
            return if usage {
                ExitCode::from(EXIT_USAGE)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    match run(cli) {
        Ok(code) => code,
        // The reader went away (`toolgate demo | head`): nothing to say, and
        // no panic; the shell's convention for a process a closed pipe ended.
        Err(e)
            if e.chain().any(|c| {
                c.downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            }) =>
        {
            ExitCode::from(EXIT_BROKEN_PIPE)
        }
        Err(e) => {
            eprintln!("toolgate: {}", with_code(one_line(&e), &e));
            ExitCode::from(EXIT_LOAD)
        }
    }
}

fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Eval(args) => with_rules(&args.rules, |rules, ctx| eval(rules, ctx, &args)),
        Command::List(args) => with_rules(&args, |rules, ctx| {
            let listed = rules.list_exposable(ctx)?;
            let mut out = std::io::stdout().lock();
            out.write_all(listed.as_bytes())?;
            out.write_all(b"\n")?;
            Ok(ExitCode::SUCCESS)
        }),
        Command::Check(args) => check(&args),
        Command::Test(args) => policy_test::run(&args.files, args.format == Format::Json),
        Command::Init(args) => init::init(
            &args.out,
            args.force,
            args.read_only_from_hints,
            args.from.upstream.as_deref(),
            &args.from.server,
            args.from.timeout(),
        ),
        Command::Pin(args) => init::pin(
            &args.policy,
            args.from.upstream.as_deref(),
            &args.from.server,
            args.from.timeout(),
        ),
        Command::Demo { json } => demo::run(json),
        // Dispatched in `main` before parsing; reached only through clap's
        // own help machinery.
        Command::Proxy { args } => {
            let name = std::ffi::OsString::from("toolgate proxy");
            Ok(toolgate_proxy::main_with(std::iter::once(name).chain(args)))
        }
        Command::Prepare(args) => {
            let policy = read_policy(args.policy.as_deref())?;
            let catalog = read_text(&args.catalog, Some("catalog"))?;
            match toolgate::prepare_into(&args.out, policy.as_deref(), &catalog, args.native) {
                Ok(files) => {
                    let mut out = std::io::stdout().lock();
                    for file in files {
                        writeln!(out, "{}", file.display())?;
                    }
                    Ok(ExitCode::SUCCESS)
                }
                Err(Error::Load(problem)) => Ok(load_refused(&problem, args.policy.as_deref(), &args.catalog)),
                Err(e) => Err(e.into()),
            }
        }
        Command::Precompile { out } => {
            let written = match out {
                Some(file) if !file.is_dir() => {
                    Engine::precompile_to(&file)?;
                    file
                }
                Some(dir) => Engine::precompile_into(&dir)?,
                None => {
                    let exe = std::env::current_exe().context("where is this executable")?;
                    let dir = exe.parent().context("this executable has no directory")?;
                    Engine::precompile_into(dir)?
                }
            };
            writeln!(std::io::stdout().lock(), "{}", written.display())?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `text` ending in its SDK error code, `(CODE)`, as every error line does
/// (a component that does not load said only why).
fn with_code(text: String, error: &anyhow::Error) -> String {
    match error.chain().find_map(|cause| cause.downcast_ref::<toolgate::Error>()) {
        Some(sdk) if !text.ends_with(&format!("({})", sdk.code())) => format!("{text} ({})", sdk.code()),
        _ => text,
    }
}

/// An error and its causes on one line, each cause said once (an error
/// that prints its source and also returns it would otherwise say it twice).
fn one_line(error: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in error.chain() {
        let part = cause.to_string();
        if text.contains(&part) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&part);
    }
    text
}

/// The policy file's text, when one is given.
pub fn read_policy(path: Option<&Path>) -> Result<Option<String>> {
    path.map(|p| read_text(p, Some("policy"))).transpose()
}

/// A file's text; bytes that are not UTF-8 are an error that says where
/// they start (with a load error's code when the file is a policy or a
/// catalog: [`file_text`]).
pub fn read_text(path: &Path, origin: Option<&'static str>) -> Result<String> {
    file_text(path, origin)?.map_err(|problem| {
        let code = if problem.code.is_empty() {
            String::new()
        } else {
            format!(" ({})", problem.code)
        };
        anyhow!(
            "{}:{}:{}: {}{code}",
            path.display(),
            problem.line,
            problem.column,
            problem.message
        )
    })
}

/// A file's text, or, where its bytes stop being UTF-8, the load problem
/// of `origin` (`policy`, `catalog`) it is (docs/spec.md §7: a code and a
/// position; the Node and Python CLIs say the same). An error only when
/// the file cannot be read.
fn file_text(path: &Path, origin: Option<&'static str>) -> Result<Result<String, toolgate::Problem>> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    Ok(String::from_utf8(bytes).map_err(|e| {
        let valid = e.as_bytes().get(..e.utf8_error().valid_up_to()).unwrap_or_default();
        let line_start = valid.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        let line = 1 + valid.iter().filter(|&&b| b == b'\n').count();
        let column = 1 + String::from_utf8_lossy(valid.get(line_start..).unwrap_or_default())
            .chars()
            .count();
        toolgate::Problem {
            code: origin
                .map(|o| format!("{}_SYNTAX", o.to_ascii_uppercase()))
                .unwrap_or_default(),
            message: "not valid UTF-8".to_owned(),
            origin: origin.unwrap_or("input"),
            path: String::new(),
            line: u32::try_from(line).unwrap_or(u32::MAX),
            column: u32::try_from(column).unwrap_or(u32::MAX),
        }
    }))
}

/// The file (or server) a problem's origin points to.
fn origin_name(problem: &toolgate::Problem, policy: Option<&Path>, catalog: &str) -> String {
    match (problem.origin, policy) {
        ("policy", Some(policy)) => policy.display().to_string(),
        _ => catalog.to_owned(),
    }
}

/// `file:line:col` for a problem (`file` alone without a position).
fn location(problem: &toolgate::Problem, policy: Option<&Path>, catalog: &str) -> String {
    let mut out = origin_name(problem, policy, catalog);
    if problem.line > 0 {
        out.push_str(&format!(":{}:{}", problem.line, problem.column));
    }
    out
}

fn problem_text(problem: &toolgate::Problem) -> String {
    let path = if problem.path.is_empty() {
        String::new()
    } else {
        format!("{}: ", problem.path)
    };
    format!("{path}{} ({})", problem.message, problem.code)
}

fn with_rules(args: &RulesArgs, f: impl FnOnce(&RuleSet, &Context) -> Result<ExitCode>) -> Result<ExitCode> {
    let policy = read_policy(args.policy.as_deref())?;
    let catalog = read_text(&args.catalog, Some("catalog"))?;
    let engine = match &args.prepared {
        Some(dir) => Engine::from_prepared_dir(dir, toolgate::Limits::default())?,
        None => Engine::cached()?,
    };
    match engine.load(policy.as_deref(), &catalog) {
        Ok(rules) => f(&rules, &args.context()),
        Err(Error::Load(problem)) => Ok(load_refused(&problem, args.policy.as_deref(), &args.catalog)),
        Err(e) => Err(e.into()),
    }
}

/// A policy or catalog the engine refused: `FILE:LINE:COL: message (CODE)`, exit 2.
fn load_refused(problem: &toolgate::Problem, policy: Option<&Path>, catalog: &Path) -> ExitCode {
    eprintln!(
        "toolgate: {}: {}",
        location(problem, policy, &catalog.display().to_string()),
        problem_text(problem)
    );
    ExitCode::from(EXIT_LOAD)
}

/// One decision per call: `--call`, else each non-blank stdin line. A line
/// is passed as raw bytes: invalid UTF-8 gets a BAD_REQUEST decision from
/// the engine.
fn eval(rules: &RuleSet, ctx: &Context, args: &EvalArgs) -> Result<ExitCode> {
    let ctx = ctx.to_json();
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let mut denied = false;
    let mut decide = |call: &[u8], out: &mut dyn Write| -> Result<()> {
        let decision = rules.evaluate_raw(call, &ctx);
        denied |= !decision.ok;
        out.write_all(decision.json.as_bytes())?;
        out.write_all(b"\n")?;
        Ok(())
    };
    match &args.call {
        Some(call) => decide(call.as_bytes(), &mut out)?,
        None => {
            for line in std::io::stdin().lock().split(b'\n') {
                let mut line = line?;
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                decide(&line, &mut out)?;
            }
        }
    }
    out.flush()?;
    Ok(if denied && args.fail_on_deny {
        ExitCode::from(EXIT_NO)
    } else {
        ExitCode::SUCCESS
    })
}

/// With no catalog, the policy is loaded against an empty one: syntax,
/// keys and types are checked, and whether its entries name real tools is
/// not known, so that finding is left out.
const NO_CATALOG: &str = r#"{"tools":[]}"#;
const NOT_IN_CATALOG: &str = "POLICY_TOOL_NOT_IN_CATALOG";

fn check(args: &CheckArgs) -> Result<ExitCode> {
    let policy = file_text(&args.policy, Some("policy"))?;
    let (catalog_name, catalog) = match (&args.catalog, args.upstream.as_deref(), args.server.is_empty()) {
        (Some(path), _, _) => (path.display().to_string(), file_text(path, Some("catalog"))?),
        (None, None, true) => ("(no catalog)".to_owned(), Ok(NO_CATALOG.to_owned())),
        (None, url, _) => {
            let timeout = std::time::Duration::from_secs(args.timeout.max(1));
            let (name, text) = toolgate_proxy::catalog::read_live(url, &args.server, timeout)?
                .ok_or_else(|| anyhow!("no server named"))?;
            (name, Ok(text))
        }
    };
    let alone = args.catalog.is_none() && args.upstream.is_none() && args.server.is_empty();
    let loaded = match (policy, catalog) {
        (Ok(policy), Ok(catalog)) => Engine::cached()?.load(Some(&policy), &catalog),
        // A file that is not UTF-8 is a finding like any other load error.
        (Err(problem), _) | (_, Err(problem)) => Err(Error::Load(problem)),
    };
    let (findings, revision) = match loaded {
        Ok(rules) => {
            let findings = rules
                .findings()?
                .into_iter()
                .filter(|f| !(alone && f.problem.code == NOT_IN_CATALOG))
                .collect::<Vec<_>>();
            (findings, Some(rules.revision().to_owned()))
        }
        Err(Error::Load(problem)) => (
            vec![toolgate::Finding {
                severity: "error",
                problem,
            }],
            None,
        ),
        Err(e) => return Err(e.into()),
    };
    let errors = findings.iter().filter(|f| f.severity == "error").count();
    let policy_path = Some(args.policy.as_path());
    match args.format {
        Format::Text => {
            let mut out = std::io::stdout().lock();
            for finding in &findings {
                writeln!(
                    out,
                    "{}: {}: {}",
                    location(&finding.problem, policy_path, &catalog_name),
                    finding.severity,
                    problem_text(&finding.problem)
                )?;
            }
            match &revision {
                Some(revision) => eprintln!(
                    "{} finding(s), {errors} error(s); policy revision {revision}",
                    findings.len()
                ),
                None => eprintln!("the policy does not load"),
            }
        }
        Format::Json => {
            let listed: Vec<serde_json::Value> = findings
                .iter()
                .map(|f| {
                    serde_json::json!({
                        "file": origin_name(&f.problem, policy_path, &catalog_name),
                        "line": f.problem.line,
                        "column": f.problem.column,
                        "severity": f.severity,
                        "code": f.problem.code,
                        "path": f.problem.path,
                        "message": f.problem.message,
                    })
                })
                .collect();
            let report = serde_json::json!({
                "findings": listed,
                "errors": errors,
                "warnings": findings.len() - errors,
                "loads": revision.is_some(),
                "policy_revision": revision,
                "catalog": catalog_name,
            });
            writeln!(std::io::stdout().lock(), "{report}")?;
        }
    }
    let failing = if args.strict { findings.len() } else { errors };
    Ok(if failing > 0 {
        ExitCode::from(EXIT_NO)
    } else {
        ExitCode::SUCCESS
    })
}
