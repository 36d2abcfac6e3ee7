use anyhow::{Context as _, Result, anyhow};
use clap::{Args, Parser, Subcommand};
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use toolgate::{Context, Engine, Error, RuleSet};
use toolgate_proxy::SurfaceArg;

mod demo;
mod policy_test;

/// Usage errors (bad flags), as sysexits' EX_USAGE.
const EXIT_USAGE: u8 = 64;
/// The policy or catalog could not be loaded.
const EXIT_LOAD: u8 = 2;

#[derive(Parser, Debug)]
#[command(
    name = "toolgate",
    version,
    about = "The tool-call policy engine for MCP: decides whether a tools/call may run."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Reads calls as JSON lines on stdin, prints one decision per line.
    Eval(RulesArgs),
    /// Prints the MCP tools/list result this context may see.
    List(RulesArgs),
    /// Validates a policy against a catalog: file:line:col findings.
    Check(CheckArgs),
    /// Runs policy test files (calls + context -> expected code).
    Test(TestArgs),
    /// Runs the bundled retail example through the turn state machine.
    Demo,
    /// MCP gateway: put the policy in front of any MCP server
    /// (`toolgate proxy --help`). Everything after `proxy` goes to the
    /// gateway as it is, `--` included.
    #[command(disable_help_flag = true)]
    Proxy {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<std::ffi::OsString>,
    },
    /// Writes the component precompiled for this machine (for fast start-up).
    Precompile {
        /// Where to write the artifact.
        out: PathBuf,
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
}

#[derive(Args, Debug)]
struct CheckArgs {
    #[arg(long)]
    policy: PathBuf,
    #[arg(long)]
    catalog: PathBuf,
}

#[derive(Args, Debug)]
struct TestArgs {
    /// Policy test files (YAML).
    #[arg(required = true)]
    files: Vec<PathBuf>,
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
        Err(e) => {
            eprintln!("toolgate: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Eval(args) => with_rules(&args, eval),
        Command::List(args) => with_rules(&args, |rules, ctx| {
            let listed = rules.list_exposable(ctx)?;
            let mut out = std::io::stdout().lock();
            out.write_all(listed.as_bytes())?;
            out.write_all(b"\n")?;
            Ok(ExitCode::SUCCESS)
        }),
        Command::Check(args) => check(&args),
        Command::Test(args) => policy_test::run(&args.files),
        Command::Demo => demo::run(),
        // Dispatched in `main` before parsing; reached only through clap's
        // own help machinery.
        Command::Proxy { args } => {
            let name = std::ffi::OsString::from("toolgate proxy");
            Ok(toolgate_proxy::main_with(std::iter::once(name).chain(args)))
        }
        Command::Precompile { out } => {
            let bytes = Engine::precompile()?;
            std::fs::write(&out, bytes).with_context(|| out.display().to_string())?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

pub fn read_text(path: &Path) -> Result<String> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    String::from_utf8(bytes).map_err(|_| anyhow!("{}: not valid UTF-8", path.display()))
}

/// `file:line:col: ` for a problem, naming the file its origin points to.
fn location(problem: &toolgate::Problem, policy: Option<&Path>, catalog: &Path) -> String {
    let file = match problem.origin {
        "policy" => policy.unwrap_or(catalog),
        _ => catalog,
    };
    let mut out = file.display().to_string();
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
    let policy = args.policy.as_deref().map(read_text).transpose()?;
    let catalog = read_text(&args.catalog)?;
    let engine = Engine::cached()?;
    match engine.load(policy.as_deref(), &catalog) {
        Ok(rules) => f(&rules, &args.context()),
        Err(Error::Load(problem)) => {
            eprintln!(
                "toolgate: {}: {}",
                location(&problem, args.policy.as_deref(), &args.catalog),
                problem_text(&problem)
            );
            Ok(ExitCode::from(EXIT_LOAD))
        }
        Err(e) => Err(e.into()),
    }
}

/// One decision per non-blank stdin line. A line is passed as raw bytes:
/// invalid UTF-8 gets a BAD_REQUEST decision from the engine.
fn eval(rules: &RuleSet, ctx: &Context) -> Result<ExitCode> {
    let ctx = ctx.to_json();
    let stdin = std::io::stdin().lock();
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for line in stdin.split(b'\n') {
        let mut line = line?;
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let decision = rules.evaluate_raw(&line, &ctx);
        out.write_all(decision.json.as_bytes())?;
        out.write_all(b"\n")?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

fn check(args: &CheckArgs) -> Result<ExitCode> {
    let policy = read_text(&args.policy)?;
    let catalog = read_text(&args.catalog)?;
    let engine = Engine::cached()?;
    let rules = match engine.load(Some(&policy), &catalog) {
        Ok(rules) => rules,
        Err(Error::Load(problem)) => {
            println!(
                "{}: error: {}",
                location(&problem, Some(&args.policy), &args.catalog),
                problem_text(&problem)
            );
            return Ok(ExitCode::FAILURE);
        }
        Err(e) => return Err(e.into()),
    };
    let findings = rules.findings()?;
    let mut errors = 0usize;
    for finding in &findings {
        if finding.severity == "error" {
            errors += 1;
        }
        println!(
            "{}: {}: {}",
            location(&finding.problem, Some(&args.policy), &args.catalog),
            finding.severity,
            problem_text(&finding.problem)
        );
    }
    eprintln!(
        "{} finding(s), {errors} error(s); policy revision {}",
        findings.len(),
        rules.revision()
    );
    Ok(if errors > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
