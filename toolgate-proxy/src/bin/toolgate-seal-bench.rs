//! The cost of a sealed confirmation (MCP 2026-07-28), measured on the real
//! component: the first leg (decide, seal payload, encrypt) and the retry
//! (open, decide with the seal, redeem the id once), against one plain
//! decision in the same run. Run by `bench/run`:
//!
//!   toolgate-seal-bench [--iterations N] [--redis redis://HOST:PORT]
//!
//! Prints `seal STORE NS_PER_CONFIRMED_CALL DECIDE_NS RATIO` lines.

use std::time::Instant;
use toolgate_proxy::confirm::now_ms;
use toolgate_proxy::ledger::Ledger;
use toolgate_proxy::seal::KeyRing;

const POLICY: &str = "version: 1\ndefaults:\n  operation_type: transactional\n  require_confirmation: true\n";
const CATALOG: &str = r#"{"tools":[{"name":"write_file","inputSchema":{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}},"required":["path","content"]}}]}"#;
const SECRET: &str = "toolgate-seal-bench-secret-0123456789abcdefgh";

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().collect();
    let flag = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let iterations: u64 = flag("--iterations").and_then(|n| n.parse().ok()).unwrap_or(2_000);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let engine = toolgate::Engine::cached().map_err(|e| e.to_string())?;
    let rules = engine.load(Some(POLICY), CATALOG).map_err(|e| e.to_string())?;
    let keys = KeyRing::new(&[SECRET]).map_err(|e| e.to_string())?;
    let mut stores = vec![("memory".to_owned(), Ledger::memory())];
    if let Some(url) = flag("--redis") {
        let ledger = runtime.block_on(Ledger::redis(&url)).map_err(|e| e.to_string())?;
        stores.push(("redis".to_owned(), ledger));
    }
    let call = |i: u64| format!(r#"{{"name":"write_file","arguments":{{"path":"/tmp/f{i}","content":"hello"}}}}"#);

    // The peer: one plain decision on the same rules.
    let started = Instant::now();
    for i in 0..iterations {
        let outcome = rules.decide(call(i).as_bytes(), "{}", toolgate::Confirmation::None);
        if outcome.decision.code.as_deref() != Some("CONFIRMATION_REQUIRED") {
            return Err(format!("unexpected decision {}", outcome.decision.json));
        }
    }
    let decide_ns = started.elapsed().as_nanos() as f64 / iterations as f64;
    if std::env::var_os("SEAL_BENCH_EVALUATE").is_some() {
        let started = Instant::now();
        for i in 0..iterations {
            let _ = rules.evaluate_raw(call(i).as_bytes(), "{}");
        }
        eprintln!(
            "evaluate {:.0}",
            started.elapsed().as_nanos() as f64 / iterations as f64
        );
        let started = Instant::now();
        for i in 0..iterations {
            let _ = rules.seal_payload(call(i).as_bytes(), "", "AAAAAAAAAAAAAAAAAAAAAA", 5);
        }
        eprintln!(
            "seal_payload {:.0}",
            started.elapsed().as_nanos() as f64 / iterations as f64
        );
    }

    for (name, ledger) in &stores {
        let started = Instant::now();
        for i in 0..iterations {
            let call = call(i);
            // First leg.
            let first = rules.decide(call.as_bytes(), "{}", toolgate::Confirmation::None);
            if first.forward.is_some() {
                return Err("the first leg was allowed".into());
            }
            let id = format!("bench{i:017}{:06}", std::process::id() % 1_000_000);
            let expires = now_ms() + 300_000;
            let payload = rules
                .seal_payload(call.as_bytes(), "", &id, expires)
                .map_err(|e| e.to_string())?;
            let token = keys.seal(payload.as_bytes()).map_err(|e| e.to_string())?;
            // Retry.
            let opened = String::from_utf8(keys.open(&token).map_err(|e| e.to_string())?).map_err(|e| e.to_string())?;
            let now = now_ms();
            let retried = rules.decide(
                call.as_bytes(),
                "{}",
                toolgate::Confirmation::Seal {
                    payload: &opened,
                    caller: "",
                    now_ms: now,
                },
            );
            if retried.forward.is_none() {
                return Err(format!("the sealed retry was denied: {}", retried.decision.json));
            }
            if !runtime
                .block_on(ledger.redeem(&id, expires, now))
                .map_err(|e| e.to_string())?
            {
                return Err("a fresh id was already redeemed".into());
            }
        }
        let ns = started.elapsed().as_nanos() as f64 / iterations as f64;
        println!("seal {name} {ns:.0} {decide_ns:.0} {:.2}", ns / decide_ns);
    }
    Ok(())
}
