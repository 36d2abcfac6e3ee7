//! toolgate's Rust benchmarks against Cedar, same process, same run.
//!
//! - `bench gen DIR`: writes the shared workload (see `workload.rs`) for the
//!   Node and Python harnesses.
//! - `bench rust [--quick] [--json OUT]`: `rust-native` (policy-core vs
//!   `cedar-policy`) and `rust-wasmtime` (the component under wasmtime vs
//!   `cedar-policy` native), at 34, 1 000 and 10 000 tools, the floor
//!   component, and start-up costs. Prints figures; asserts only that the
//!   engines agree with each other and with the mix's expected allow/deny.
//!
//! `bench/run` runs this and the other runtimes and prints the one table.

mod cedar;
mod workload;

use serde_json::{Value, json};
use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::io::Write as _;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Counts live heap bytes, so "memory per loaded rule set" is measured, not
/// guessed, for policy-core and Cedar alike.
struct CountingAlloc;

static LIVE: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator unchanged and only counts.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size, Ordering::Relaxed);
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

type Error = Box<dyn std::error::Error>;

#[derive(Debug, Clone, Copy)]
struct Budget {
    rounds: usize,
    /// Decisions per round (rounded to whole mixes).
    decisions: usize,
    /// The largest catalog timed prepared (`load rust-wasmtime-prepared`):
    /// preparing 10 000 tools loads them and compiles a 100 MB component
    /// (about 10 s here), so only the full run does.
    prepared_up_to: usize,
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs.get(xs.len() / 2).copied().unwrap_or(f64::NAN)
}

/// ns per decision for several contenders, measured round-robin (one round
/// of each in turn), so drift on a shared machine hits them all alike;
/// median over rounds.
fn race(budget: Budget, mix_len: usize, contenders: &mut [&mut dyn FnMut(usize)]) -> Vec<f64> {
    let iters = (budget.decisions / mix_len).max(1);
    let mut samples = vec![Vec::with_capacity(budget.rounds); contenders.len()];
    for _ in 0..budget.rounds {
        for (f, s) in contenders.iter_mut().zip(samples.iter_mut()) {
            let start = Instant::now();
            for _ in 0..iters {
                for i in 0..mix_len {
                    f(black_box(i));
                }
            }
            s.push(start.elapsed().as_nanos() as f64 / (iters * mix_len) as f64);
        }
    }
    samples.into_iter().map(median).collect()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn timed<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let t = Instant::now();
    let v = f();
    (v, t.elapsed())
}

fn gzip_len(bytes: &[u8]) -> Result<usize, Error> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(bytes)?;
    Ok(gz.finish()?.len())
}

fn floor_component() -> Result<Vec<u8>, Error> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = root.join("target").join("bench").join("floor.wasm");
    Ok(component_build::build_package(&root, "toolgate-floor", &out)?)
}

fn run_rust(budget: Budget, json_out: Option<&str>, component_path: Option<&str>) -> Result<(), Error> {
    let mix = workload::mix();
    let calls: Vec<Vec<u8>> = mix.iter().map(|m| m.call.to_string().into_bytes()).collect();
    let requests: Vec<Value> = mix.iter().map(|m| workload::cedar_request(&m.call)).collect();
    let context = workload::context_json();
    let n = mix.len();

    // Start-up costs. `--component PATH` measures another build of the
    // component (a profile experiment) instead of the embedded one; it has
    // no precompiled figure.
    let component_bytes = match component_path {
        Some(path) => std::fs::read(path)?,
        None => toolgate::COMPONENT.to_vec(),
    };
    let (engine, compile) =
        timed(|| toolgate::Engine::from_component_bytes(&component_bytes, toolgate::Limits::default()));
    let engine = engine?;
    let (fast, deserialize) = if component_path.is_some() {
        (engine.clone(), Duration::ZERO)
    } else {
        let precompiled = toolgate::Engine::precompile()?;
        let (fast, deserialize) =
            timed(|| toolgate::Engine::from_precompiled(&precompiled, toolgate::Limits::default()));
        (fast?, deserialize)
    };
    let (empty, instantiate) = timed(|| fast.load(None, "[]"));
    drop(empty?);
    drop(engine);
    // Compiling with fuel takes seconds: not in the CI smoke run.
    let fueled = if budget.rounds > 1 && component_path.is_none() {
        Some(toolgate::Engine::cached_with(toolgate::Limits {
            fuel: Some(toolgate::Fuel::default()),
            ..toolgate::Limits::default()
        })?)
    } else {
        None
    };
    let floor = toolgate::Engine::from_component_bytes(&floor_component()?, toolgate::Limits::default())?;
    let floor_rules = floor.load(None, "[]")?;

    let mut scales = serde_json::Map::new();
    let mut wasm_scales = serde_json::Map::new();
    let mut start = serde_json::Map::new();
    println!(
        "rust: median of {} rounds, {} decisions per round",
        budget.rounds, budget.decisions
    );
    println!(
        "{:>6} {:>12} {:>12} {:>12} {:>12} {:>14} {:>14} {:>12}",
        "tools", "native ns", "native-str", "wasm ns", "wasm-str", "cedar ns", "cedar-auth ns", "floor ns"
    );
    for size in args_scales().unwrap_or_else(|| workload::SCALES.to_vec()) {
        let catalog_value = workload::catalog(size)?;
        let catalog = catalog_value.to_string();
        let structural = workload::structural_only(&catalog_value).to_string();

        let before = LIVE.load(Ordering::Relaxed);
        let (native, native_load) = timed(|| policy_core::Rules::load(Some(workload::POLICY), &catalog));
        let native = native?;
        let native_bytes = LIVE.load(Ordering::Relaxed).saturating_sub(before);
        let native_structural = policy_core::Rules::load(Some(workload::POLICY), &structural)?;

        let entities = workload::cedar_entities(&native, &catalog_value);
        let before = LIVE.load(Ordering::Relaxed);
        let (cedar, cedar_load) =
            timed(|| cedar::CedarGate::load(workload::CEDAR_POLICIES, workload::CEDAR_SCHEMA, &entities));
        let cedar = cedar?;
        let cedar_bytes = LIVE.load(Ordering::Relaxed).saturating_sub(before);

        let (component, component_load) = timed(|| fast.load(Some(workload::POLICY), &catalog));
        let component = component?;
        let component_structural = fast.load(Some(workload::POLICY), &structural)?;

        // Everyone agrees before anything is timed: toolgate native and
        // component byte for byte, and toolgate and Cedar with the mix.
        let prebuilt: Vec<Option<cedar_policy::Request>> = requests.iter().map(|r| cedar.request(r)).collect();
        for (i, m) in mix.iter().enumerate() {
            let (call, request) = (&calls[i], &requests[i]);
            let native_decision = native.evaluate_json(call, &context);
            let wasm = component.evaluate_raw(call, &context);
            if native_decision.json != wasm.json {
                return Err(format!(
                    "native and component disagree on {}:\n{}\n{}",
                    m.call, native_decision.json, wasm.json
                )
                .into());
            }
            let structural_ok = native_structural.evaluate_json(call, &context).ok;
            let cedar_ok = cedar.decide_call(call);
            if cedar.decide(request) != cedar_ok {
                return Err(format!("the two Cedar adapters disagree on {}", m.call).into());
            }
            let cedar_prebuilt_ok = prebuilt[i].as_ref().is_some_and(|r| cedar.authorize(r));
            for (who, ok) in [
                ("toolgate", native_decision.ok),
                ("toolgate (structural schemas)", structural_ok),
                (
                    "toolgate component (structural)",
                    component_structural.evaluate_raw(call, &context).ok,
                ),
                ("cedar", cedar_ok),
                ("cedar (prebuilt request)", cedar_prebuilt_ok),
            ] {
                if ok != m.expect_allowed {
                    return Err(format!(
                        "{who} says {} on `{}` ({}), the mix expects {}",
                        if ok { "allow" } else { "deny" },
                        m.call,
                        m.label,
                        if m.expect_allowed { "allow" } else { "deny" }
                    )
                    .into());
                }
            }
        }

        let figures = race(
            budget,
            n,
            &mut [
                &mut |i| {
                    black_box(native.evaluate_json(&calls[i], &context));
                },
                &mut |i| {
                    black_box(native_structural.evaluate_json(&calls[i], &context));
                },
                &mut |i| {
                    black_box(component.evaluate_raw(&calls[i], &context));
                },
                &mut |i| {
                    black_box(component_structural.evaluate_raw(&calls[i], &context));
                },
                &mut |i| {
                    black_box(cedar.decide_call(&calls[i]));
                },
                &mut |i| {
                    black_box(prebuilt[i].as_ref().map(|r| cedar.authorize(r)));
                },
                &mut |i| {
                    black_box(floor_rules.evaluate_raw(&calls[i], &context));
                },
            ],
        );
        let [
            native_ns,
            native_str_ns,
            wasm_ns,
            wasm_str_ns,
            cedar_ns,
            cedar_auth_ns,
            floor_ns,
        ] = figures[..]
        else {
            return Err("race returned the wrong number of figures".into());
        };
        println!(
            "{size:>6} {native_ns:>12.0} {native_str_ns:>12.0} {wasm_ns:>12.0} {wasm_str_ns:>12.0} {cedar_ns:>14.0} {cedar_auth_ns:>14.0} {floor_ns:>12.0}"
        );
        println!(
            "       load: native {:.2} ms ({} KiB), component {:.2} ms, cedar {:.2} ms ({} KiB)",
            ms(native_load),
            native_bytes / 1024,
            ms(component_load),
            ms(cedar_load),
            cedar_bytes / 1024
        );
        // `load RUNTIME TOOLS NS CEDAR_NS RATIO`: ready to decide, that is the
        // load plus the first decision on every tool (so work a load might
        // defer is counted), against Cedar's load of the same rules.
        let first_calls: Vec<Vec<u8>> = first_calls(&native).into_iter().map(String::into_bytes).collect();
        let (ready, native_ready) = timed(|| {
            let rules = policy_core::Rules::load(Some(workload::POLICY), &catalog)?;
            for call in &first_calls {
                black_box(rules.evaluate_json(call, &context));
            }
            Ok::<_, policy_core::error::Problem>(rules)
        });
        drop(ready?);
        // Ready to decide on a component engine: load, then every first call.
        let component_ready_on = |engine: &toolgate::Engine| {
            let (ready, took) = timed(|| {
                let rules = engine.load(Some(workload::POLICY), &catalog)?;
                for call in &first_calls {
                    black_box(rules.evaluate_raw(call, &context));
                }
                Ok::<_, toolgate::Error>(rules)
            });
            ready.map(|_| took)
        };
        let component_ready = component_ready_on(&fast)?;
        let mut lines = vec![("rust-native", native_ready), ("rust-wasmtime", component_ready)];
        // A component prepared with these texts (`toolgate prepare`): the
        // same decisions (checked), ready without loading.
        if size <= budget.prepared_up_to && component_path.is_none() {
            let prepared = toolgate::prepare(Some(workload::POLICY), &catalog)?;
            let code = toolgate::Engine::precompile_prepared(&prepared)?;
            let engine = toolgate::Engine::from_precompiled(&code, toolgate::Limits::default())?;
            let check = engine.load(Some(workload::POLICY), &catalog)?;
            for call in &first_calls {
                let (a, b) = (
                    check.evaluate_raw(call, &context),
                    component.evaluate_raw(call, &context),
                );
                if a.json != b.json {
                    return Err(format!("prepared and shipped component disagree:\n{}\n{}", a.json, b.json).into());
                }
            }
            drop(check);
            lines.push(("rust-wasmtime-prepared", component_ready_on(&engine)?));
        }
        // The trade-off of the host backstop (toolgate::Limits): the same,
        // with wasmtime fuel instead of the default deadline.
        if let Some(fueled) = &fueled {
            let fueled_ready = component_ready_on(fueled)?;
            lines.push(("rust-wasmtime-fuel", fueled_ready));
        }
        for (runtime, ready) in lines {
            println!(
                "load {runtime} {size} {} {} {:.3}",
                ready.as_nanos(),
                cedar_load.as_nanos(),
                ready.as_secs_f64() / cedar_load.as_secs_f64()
            );
        }
        scales.insert(
            size.to_string(),
            json!({"toolgate_ns": native_ns, "toolgate_structural_ns": native_str_ns, "cedar_ns": cedar_ns,
                   "cedar_authorize_ns": cedar_auth_ns, "toolgate_load_ms": ms(native_load),
                   "toolgate_rules_bytes": native_bytes, "cedar_load_ms": ms(cedar_load), "cedar_bytes": cedar_bytes,
                   "toolgate_ready_ns": native_ready.as_nanos(), "cedar_ready_ns": cedar_load.as_nanos()}),
        );
        wasm_scales.insert(
            size.to_string(),
            json!({"toolgate_ns": wasm_ns, "toolgate_structural_ns": wasm_str_ns, "cedar_ns": cedar_ns,
                   "cedar_authorize_ns": cedar_auth_ns, "floor_ns": floor_ns, "toolgate_load_ms": ms(component_load),
                   "toolgate_ready_ns": component_ready.as_nanos(), "cedar_ready_ns": cedar_load.as_nanos()}),
        );
        if size == 34 {
            start.insert("seed_load_native_ms".into(), json!(ms(native_load)));
            start.insert("seed_load_component_ms".into(), json!(ms(component_load)));
            start.insert("seed_rules_native_bytes".into(), json!(native_bytes));
            start.insert(
                "seed_rules_component_memory_bytes".into(),
                json!(component.guest_memory_bytes()),
            );
        }
    }
    start.insert("component_bytes".into(), json!(component_bytes.len()));
    start.insert("component_gzip_bytes".into(), json!(gzip_len(&component_bytes)?));
    start.insert("compile_ms".into(), json!(ms(compile)));
    start.insert("precompiled_load_ms".into(), json!(ms(deserialize)));
    start.insert("instantiate_ms".into(), json!(ms(instantiate)));
    if component_path.is_none() {
        let rounds = if budget.rounds > 1 { 5 } else { 1 };
        let (cli, bare, native_code_bytes) = cold_cli(rounds)?;
        start.insert("native_code_bytes".into(), json!(native_code_bytes));
        // `cold RUNTIME MS`: a fresh `toolgate eval` process of the binary as
        // packaged (its native code shipped beside it) with an empty cache
        // directory, to its first decision on the seed rules; the peer is
        // the same binary answering `--version` (process start).
        println!("cold rust-cli {cli:.1}");
        println!("cold rust-cli-bare {bare:.1}");
        start.insert("cold_cli_ms".into(), json!(cli));
        start.insert("cold_cli_bare_ms".into(), json!(bare));
    }
    println!("start: {}", Value::Object(start.clone()));

    let results = json!([
        {"runtime": "rust-native", "peer": "cedar-policy (native)", "scales": scales},
        {"runtime": "rust-wasmtime", "peer": "cedar-policy (native)", "scales": wasm_scales, "start": start},
    ]);
    if let Some(path) = json_out {
        std::fs::write(path, results.to_string())?;
    }
    Ok(())
}

/// Median wall time (ms) of `rounds` fresh `toolgate eval` processes, each
/// with a new empty cache directory, deciding one call on the seed rules;
/// and of the same binary printing its version. The binary is copied as a
/// package ships it: alone in a directory, where `toolgate precompile` then
/// writes its native code (whose size is the third figure).
fn cold_cli(rounds: usize) -> Result<(f64, f64, u64), Error> {
    let built = std::env::current_exe()?.with_file_name("toolgate");
    let dir = std::env::temp_dir().join(format!("toolgate-bench-cold-{}", std::process::id()));
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin)?;
    let cli = bin.join("toolgate");
    std::fs::copy(&built, &cli)?;
    let shipped = std::process::Command::new(&cli).arg("precompile").output()?;
    if !shipped.status.success() {
        return Err(format!("{} precompile failed: {shipped:?}", cli.display()).into());
    }
    let code = String::from_utf8_lossy(&shipped.stdout).trim().to_owned();
    let native_code_bytes = std::fs::metadata(&code)?.len();
    let policy = dir.join("policy.yaml");
    let catalog = dir.join("catalog.json");
    std::fs::write(&policy, workload::POLICY)?;
    std::fs::write(&catalog, workload::SEED_CATALOG)?;
    let call = workload::mix()
        .first()
        .map(|m| m.call.to_string())
        .ok_or("the mix is empty")?;
    let mut cold = Vec::new();
    let mut bare = Vec::new();
    for round in 0..rounds {
        let cache = dir.join(format!("cache-{round}"));
        let (out, took) = timed(|| {
            std::process::Command::new(&cli)
                .env("TOOLGATE_CACHE_DIR", &cache)
                .arg("eval")
                .arg("--policy")
                .arg(&policy)
                .arg("--catalog")
                .arg(&catalog)
                .arg("--call")
                .arg(&call)
                .output()
        });
        let out = out?;
        let decision: Value = serde_json::from_slice(&out.stdout)
            .map_err(|e| format!("{} eval gave no decision ({e}): {out:?}", cli.display()))?;
        if decision.get("ok").and_then(Value::as_bool).is_none() {
            return Err(format!("not a decision: {decision}").into());
        }
        if cache.exists() {
            return Err(format!("{} compiled instead of loading {code}", cli.display()).into());
        }
        cold.push(ms(took));
        let (out, took) = timed(|| std::process::Command::new(&cli).arg("--version").output());
        if !out?.status.success() {
            return Err(format!("{} --version failed", cli.display()).into());
        }
        bare.push(ms(took));
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok((median(cold), median(bare), native_code_bytes))
}

/// `--scales 34,1000`: a subset of the catalog sizes (profile experiments).
fn args_scales() -> Option<Vec<usize>> {
    let args: Vec<String> = std::env::args().collect();
    flag_value(&args, "--scales").map(|list| list.split(',').filter_map(|n| n.parse().ok()).collect())
}

/// The decision loop of `profile-evaluate` and `profile-component-evaluate`:
/// the mix's calls with the workload's context, N rounds (argument 1).
fn evaluate_loop(args: &[String], mut decide: impl FnMut(&[u8], &str)) {
    let calls: Vec<String> = workload::mix().iter().map(|m| m.call.to_string()).collect();
    let context = workload::context_json();
    for _ in 0..args.get(1).and_then(|n| n.parse().ok()).unwrap_or(100_000) {
        for call in &calls {
            decide(call.as_bytes(), &context);
        }
    }
}

/// The argument after `flag` (`--catalog FILE`), if the flag is given.
fn flag_value<'a>(args: &'a [String], flag: &str) -> Option<&'a String> {
    args.iter().position(|a| a == flag).and_then(|i| args.get(i + 1))
}

/// The first call on every tool, `{"name":…,"arguments":{}}`: what "ready
/// to decide" counts after a load.
fn first_calls(rules: &policy_core::Rules) -> Vec<String> {
    rules
        .tools()
        .iter()
        .map(|t| format!(r#"{{"name":{},"arguments":{{}}}}"#, t.name_json))
        .collect()
}

/// The catalog file's text, or the seed catalog without one.
fn catalog_or_seed(path: Option<&String>) -> Result<String, Error> {
    match path {
        Some(path) => Ok(std::fs::read_to_string(path)?),
        None => Ok(workload::SEED_CATALOG.to_owned()),
    }
}

/// The engine of the `profile-component-*` loops: `--component FILE` (a build
/// that keeps its name section, for `perf report`) or the shipped component.
fn profiled_engine(args: &[String]) -> Result<toolgate::Engine, Error> {
    match flag_value(args, "--component") {
        Some(file) => Ok(toolgate::Engine::from_component_bytes(
            &std::fs::read(file)?,
            toolgate::Limits::default(),
        )?),
        None => Ok(toolgate::Engine::cached()?),
    }
}

fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick");
    let smoke = args.iter().any(|a| a == "--smoke");
    let json_out = flag_value(&args, "--json").map(String::as_str);
    match args.first().map(String::as_str) {
        Some("gen") => {
            // A flag (`bench gen --help`) is not a directory to write into.
            let dir = args
                .get(1)
                .filter(|dir| !dir.starts_with('-'))
                .ok_or("usage: bench gen DIR")?;
            workload::write(std::path::Path::new(dir), &workload::SCALES)?;
            Ok(())
        }
        Some("rust") | None => {
            let budget = if smoke {
                Budget {
                    rounds: 1,
                    decisions: 16,
                    prepared_up_to: 1_000,
                }
            } else if quick {
                Budget {
                    rounds: 7,
                    decisions: 4_000,
                    prepared_up_to: 1_000,
                }
            } else {
                Budget {
                    rounds: 21,
                    decisions: 16_000,
                    prepared_up_to: 10_000,
                }
            };
            run_rust(
                budget,
                json_out,
                flag_value(&args, "--component").map(String::as_str),
            )
        }
        // `gzip-size FILE…`: each file's size gzipped as the size budget
        // counts it (flate2 at its best level), to compare builds.
        Some("gzip-size") => {
            for file in args.iter().skip(1) {
                let bytes = std::fs::read(file)?;
                println!("{file}: {} bytes, {} gzip", bytes.len(), gzip_len(&bytes)?);
            }
            Ok(())
        }
        // A loop for `perf record` / callgrind: load or evaluate, natively.
        Some("profile-load") => {
            let n = args.get(1).and_then(|n| n.parse().ok()).unwrap_or(100);
            // `--catalog FILE`: another catalog than the seed (`bench gen` writes them).
            let catalog = catalog_or_seed(flag_value(&args, "--catalog"))?;
            let (_, all) = timed(|| {
                for _ in 0..n {
                    black_box(policy_core::Rules::load(Some(workload::POLICY), &catalog).ok());
                }
            });
            let (_, parsed) = timed(|| {
                for _ in 0..n {
                    black_box(policy_core::catalog::parse(&catalog).ok());
                }
            });
            let (_, json) = timed(|| {
                for _ in 0..n {
                    black_box(serde_json::from_str::<Value>(&catalog).ok());
                }
            });
            let per = |d: Duration| ms(d) / n as f64;
            println!(
                "load {:.3} ms, of which catalog::parse {:.3} ms (serde_json alone {:.3} ms)",
                per(all),
                per(parsed),
                per(json)
            );
            Ok(())
        }
        // The same loops in the component on wasmtime; with TOOLGATE_PERFMAP=1
        // wasmtime writes /tmp/perf-PID.map so `perf report` names guest functions.
        Some("profile-component-load") => {
            let engine = profiled_engine(&args)?;
            let n = args.get(1).and_then(|n| n.parse().ok()).unwrap_or(100);
            // `--catalog FILE`: another catalog than the seed (`bench gen` writes them).
            let catalog = catalog_or_seed(flag_value(&args, "--catalog"))?;
            let (_, took) = timed(|| {
                for _ in 0..n {
                    black_box(engine.load(Some(workload::POLICY), &catalog).ok());
                }
            });
            println!("component load {:.3} ms", ms(took) / n as f64);
            Ok(())
        }
        // A component prepared with the seed (toolgate::prepare), against the
        // shipped one, alternating in one run.
        // `profile-prepared-load N [CATALOG_FILE]` (default: the seed).
        Some("profile-prepared-load") => {
            let n = args.get(1).and_then(|n| n.parse().ok()).unwrap_or(100);
            let catalog = catalog_or_seed(args.get(2))?;
            let (prepared, took) = timed(|| toolgate::prepare(Some(workload::POLICY), &catalog));
            let prepared = prepared?;
            println!("prepare {:.0} ms, {} bytes", ms(took), prepared.len());
            let prepared = toolgate::Engine::from_prepared(&prepared, toolgate::Limits::default())?;
            let shipped = toolgate::Engine::cached()?;
            for round in 0..3 {
                for (name, engine) in [("shipped", &shipped), ("prepared", &prepared)] {
                    let (_, took) = timed(|| {
                        for _ in 0..n {
                            black_box(engine.load(Some(workload::POLICY), &catalog).ok());
                        }
                    });
                    println!("round {round} {name} load {:.3} ms", ms(took) / n as f64);
                }
            }
            Ok(())
        }
        // Two builds of the component raced on the mix, rounds interleaved:
        // what a guest change does to a decision, on a machine too noisy
        // for two separate runs to compare.
        Some("compare-components") => {
            let (Some(before), Some(after)) = (args.get(1), args.get(2)) else {
                return Err("usage: bench compare-components BEFORE.wasm AFTER.wasm [ROUNDS]".into());
            };
            let rounds = args.get(3).and_then(|n| n.parse().ok()).unwrap_or(400);
            let calls: Vec<String> = workload::mix().iter().map(|m| m.call.to_string()).collect();
            let context = workload::context_json();
            let mut rule_sets = Vec::new();
            for file in [before, after] {
                let engine = toolgate::Engine::from_component_bytes(&std::fs::read(file)?, toolgate::Limits::default())?;
                rule_sets.push(engine.load(Some(workload::POLICY), workload::SEED_CATALOG)?);
            }
            let [old, new] = &rule_sets[..] else {
                return Err("two components".into());
            };
            for call in &calls {
                let (a, b) = (old.evaluate_raw(call.as_bytes(), &context), new.evaluate_raw(call.as_bytes(), &context));
                if a.json != b.json {
                    return Err(format!("the two components disagree on {call}:\n{}\n{}", a.json, b.json).into());
                }
            }
            // Many short rounds, each component's fastest kept: noise here
            // only ever adds time, so the minimum is the steadiest figure.
            let mut fastest = [f64::INFINITY; 2];
            for _ in 0..rounds {
                for (rules, best) in rule_sets.iter().zip(fastest.iter_mut()) {
                    let start = Instant::now();
                    for _ in 0..100 {
                        for call in &calls {
                            black_box(rules.evaluate_raw(call.as_bytes(), &context));
                        }
                    }
                    *best = best.min(start.elapsed().as_nanos() as f64 / (100 * calls.len()) as f64);
                }
            }
            let [old_ns, new_ns] = fastest;
            println!("decision ns: before {old_ns:.0}, after {new_ns:.0}, after/before {:.3}", new_ns / old_ns);
            Ok(())
        }
        // The same for a load: `compare-component-loads BEFORE.wasm AFTER.wasm
        // [ROUNDS] [--catalog FILE]`, each round one load in each, both
        // checked to decide the mix alike; the fastest and the median kept.
        Some("compare-component-loads") => {
            let (Some(before), Some(after)) = (args.get(1), args.get(2)) else {
                return Err("usage: bench compare-component-loads BEFORE.wasm AFTER.wasm [ROUNDS] [--catalog FILE] [--ready]".into());
            };
            let rounds: usize = args.get(3).and_then(|n| n.parse().ok()).unwrap_or(100);
            let catalog = catalog_or_seed(flag_value(&args, "--catalog"))?;
            // `--ready`: the first call on every tool after each load (what
            // `load RUNTIME TOOLS` lines time) instead of the mix.
            let ready = args.iter().any(|a| a == "--ready");
            let calls: Vec<String> = if ready {
                first_calls(&policy_core::Rules::load(Some(workload::POLICY), &catalog)?)
            } else {
                workload::mix().iter().map(|m| m.call.to_string()).collect()
            };
            let context = workload::context_json();
            let mut engines = Vec::new();
            for file in [before, after] {
                engines.push(toolgate::Engine::from_component_bytes(&std::fs::read(file)?, toolgate::Limits::default())?);
            }
            let mut took: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
            // The guest memory one load and its calls leave.
            let mut memory = [0usize; 2];
            for round in 0..rounds {
                let mut answers = Vec::new();
                // Alternate which goes first: the first slot of a round reads fast.
                let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
                for i in order {
                    let (Some(engine), Some(times)) = (engines.get(i), took.get_mut(i)) else {
                        return Err("two components".into());
                    };
                    let decide = |rules: &toolgate::RuleSet| {
                        calls.iter().map(|c| rules.evaluate_raw(c.as_bytes(), &context).json).collect::<Vec<_>>()
                    };
                    let ((rules, answered), elapsed) = timed(|| {
                        let rules = engine.load(Some(workload::POLICY), &catalog);
                        let answered = rules.as_ref().ok().filter(|_| ready).map(decide);
                        (rules, answered)
                    });
                    times.push(ms(elapsed));
                    let rules = rules?;
                    answers.push(answered.unwrap_or_else(|| decide(&rules)));
                    if let Some(bytes) = memory.get_mut(i) {
                        *bytes = rules.guest_memory_bytes();
                    }
                }
                if answers.first() != answers.last() {
                    return Err("the two components decide the mix differently".into());
                }
            }
            let [old, new] = took;
            let (old_min, new_min) = (old.iter().copied().fold(f64::INFINITY, f64::min), new.iter().copied().fold(f64::INFINITY, f64::min));
            let (old_median, new_median) = (median(old), median(new));
            println!(
                "load{} ms: before {old_min:.3} (median {old_median:.3}), after {new_min:.3} (median {new_median:.3}), after/before {:.3} (median {:.3})",
                if ready { " and first calls" } else { "" },
                new_min / old_min,
                new_median / old_median
            );
            let [old_memory, new_memory] = memory;
            println!("guest memory after a load and its calls: before {old_memory} bytes, after {new_memory} bytes");
            Ok(())
        }
        Some("profile-component-evaluate") => {
            let engine = profiled_engine(&args)?;
            let rules = engine.load(Some(workload::POLICY), workload::SEED_CATALOG)?;
            evaluate_loop(&args, |call, context| {
                black_box(rules.evaluate_raw(call, context));
            });
            Ok(())
        }
        Some("profile-evaluate") => {
            let rules = policy_core::Rules::load(Some(workload::POLICY), workload::SEED_CATALOG)?;
            evaluate_loop(&args, |call, context| {
                black_box(rules.evaluate_json(call, context));
            });
            Ok(())
        }
        Some(other) => {
            Err(format!("unknown mode `{other}`: use `gen DIR`, `rust [--quick|--smoke] [--json OUT]` or `profile-[component-]load|evaluate N`").into())
        }
    }
}
