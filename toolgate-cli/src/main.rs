//! The `toolgate` CLI: evaluate calls, list exposable tools, check a policy,
//! run policy tests, and a demo of the bundled example. Every decision comes
//! from the policy component on wasmtime.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
