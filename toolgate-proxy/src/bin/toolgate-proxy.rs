//! `toolgate-proxy`: the MCP gateway (also reachable as `toolgate proxy`).

fn main() -> std::process::ExitCode {
    toolgate_proxy::main_with(std::env::args_os())
}
