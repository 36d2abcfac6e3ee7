//! `cargo run --release -p bench`: ns per decision on the 34-tool seed
//! catalog, policy-core native and the component under wasmtime, measured in
//! the same process and run, plus load and start-up costs. A harness that
//! prints figures; nothing here asserts a time.

use std::hint::black_box;
use std::time::{Duration, Instant};

const CATALOG: &str = include_str!("../../tests/vectors/fixtures/seed-catalog.json");
const POLICY: &str = "version: 1\ndefaults:\n  operation_type: read_only\n  require_confirmation: false\n";

/// A fixed mix: allowed reads, an allowed confirmed write, confirmation
/// required, scope denied, bad request, unknown tool.
const CALLS: &[&str] = &[
    r#"{"name":"wa_list_chats","arguments":{"limit":20,"status":"open"}}"#,
    r#"{"name":"get_conversation","arguments":{"conversation_id":"0b7c1a52-8e0e-4b8e-9d43-4d5a0c7f1e21"}}"#,
    r#"{"name":"send_whatsapp","arguments":{"to":"+5511999990000","text":"Olá","idempotency_key":"send-0001","confirmed":true}}"#,
    r#"{"name":"send_whatsapp","arguments":{"to":"+5511999990000","text":"Olá","idempotency_key":"send-0001"}}"#,
    r#"{"name":"draft_reply","arguments":{"conversation_id":"0b7c1a52-8e0e-4b8e-9d43-4d5a0c7f1e21"}}"#,
    r#"{"name":"wa_get_chat","arguments":{"chat_id":"not-a-uuid"}}"#,
    r#"{"name":"no_such_tool","arguments":{}}"#,
];
const CONTEXT: &str = r#"{"surface":"confirming","scopes":["mcp:read","mcp:write"]}"#;

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs.get(xs.len() / 2).copied().unwrap_or(f64::NAN)
}

/// Median over `rounds` of the mean ns per call of `f` over the mix.
fn ns_per_decision(rounds: usize, iters: usize, mut f: impl FnMut(&[u8])) -> f64 {
    let mut samples = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let start = Instant::now();
        for _ in 0..iters {
            for call in CALLS {
                f(black_box(call.as_bytes()));
            }
        }
        samples.push(start.elapsed().as_nanos() as f64 / (iters * CALLS.len()) as f64);
    }
    median(samples)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let quick = std::env::args().any(|a| a == "--quick");
    let (rounds, iters) = if quick { (5, 200) } else { (15, 2_000) };

    let native = policy_core::Rules::load(Some(POLICY), CATALOG)?;
    let t = Instant::now();
    let engine = toolgate::Engine::new()?;
    let compile = t.elapsed();
    let precompiled = toolgate::Engine::precompile()?;
    let t = Instant::now();
    let fast = toolgate::Engine::from_precompiled(&precompiled, toolgate::Limits::default())?;
    let deserialize = t.elapsed();
    let t = Instant::now();
    let component = fast.load(Some(POLICY), CATALOG)?;
    let component_load = t.elapsed();
    let t = Instant::now();
    let _native_again = policy_core::Rules::load(Some(POLICY), CATALOG)?;
    let native_load = t.elapsed();
    drop(engine);

    // Both must agree byte for byte before anything is timed.
    for call in CALLS {
        let a = native.evaluate_json(call.as_bytes(), CONTEXT).json;
        let b = component.evaluate_raw(call.as_bytes(), CONTEXT).json;
        if a != b {
            return Err(format!("native and component disagree on {call}:\n{a}\n{b}").into());
        }
    }

    let native_ns = ns_per_decision(rounds, iters, |c| {
        black_box(native.evaluate_json(c, CONTEXT));
    });
    let component_ns = ns_per_decision(rounds, iters, |c| {
        black_box(component.evaluate_raw(c, CONTEXT));
    });
    // The floor: the same bytes in and a decision-sized string out, with no
    // engine (what any host pays to move bytes at all, natively).
    let floor_ns = ns_per_decision(rounds, iters, |c| {
        black_box(String::from_utf8_lossy(c).repeat(2));
    });

    println!(
        "toolgate benchmark: seed catalog (34 tools), mix of {} calls, median of {rounds} rounds",
        CALLS.len()
    );
    println!("{:<28} {:>14}", "runtime", "ns/decision");
    println!("{:<28} {:>14.0}", "rust-native (policy-core)", native_ns);
    println!("{:<28} {:>14.0}", "rust-wasmtime (component)", component_ns);
    println!("{:<28} {:>14.0}", "copy floor (native)", floor_ns);
    println!("component / native: {:.2}x", component_ns / native_ns);
    println!();
    println!("component size: {} bytes", toolgate::COMPONENT.len());
    println!(
        "compile component: {:.1} ms; load precompiled: {:.2} ms",
        ms(compile),
        ms(deserialize)
    );
    println!(
        "load seed rule set: component {:.2} ms, native {:.2} ms",
        ms(component_load),
        ms(native_load)
    );
    println!(
        "ratio rust-wasmtime-vs-native {native_ns:.0} {component_ns:.0} {:.3}",
        component_ns / native_ns
    );
    Ok(())
}
