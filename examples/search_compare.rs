//! MCTS against random search at equal budgets, both against exhaustive enumeration, on a GPU: for each spec
//! the whole schedule space is measured once (the exhaustive best), then each method runs from the default with
//! the same evaluator for several seeds (fresh inputs and measurement noise per run; random search also draws
//! its walks from the seed).
//!
//! ```text
//! cargo run --release -p optiml-examples --example search_compare -- --out DIR [--seeds 5] [--budget 32]
//!     [--specs bmm-16x1024,small-k] [--exhaustive bmm-16x1024,small-k] [--reference bmm-16x1024=0.7677]
//!     [--backup mean|max]
//! ```
//!
//! `--replay <out>/logs/<spec>-exhaustive-0.jsonl` runs both methods again over that measured landscape, offline
//! (each measurement jittered by its own spread, per seed), to compare search strategies without a GPU. With
//! `--llm DIR` (a folder whose `optiml.toml` has an `[llm]` table), two more methods run beside them at the same
//! budget: MCTS whose proposer asks the model which transformation to try ([`LlmProposer`]), and MCTS whose judge
//! asks it whether to keep each edit ([`LlmJudge`], the reward's 0.2 judge term), every exchange recorded in
//! `<out>/llm` and replayed from there by a later run.
//! `--exhaustive` names the specs whose whole space is enumerated (default: the two fastest); `--reference` gives
//! the exhaustive best of an earlier run on the same GPU instead, labelled as such. Writes `search_compare.json`, `search_compare.md` and one convergence chart per spec (`<spec>.svg`: best
//! time found against evaluations) into `--out`.

use optiml_build::analyze::{Convergence, convergence_svg};
use optiml_build::eval::{EvalSetup, GpuEvaluator, TimingPlan, WorkerCommand};
use optiml_build::families::matmul::simt_f32::Schedule;
use optiml_build::families::matmul::{MatmulShape, test_plan};
use optiml_build::llm::Llm;
use optiml_build::llm::judge::LlmJudge;
use optiml_build::llm::propose::LlmProposer;
use optiml_build::search::{
    self, Backup, Config, DeterministicJudge, Header, Method, Replay, RoutedProposer, Search,
    SearchLog, Signals, Tunable,
};
use optiml_examples::BoxError;
use optiml_examples::report::{Align, Table, write_json};
use optiml_spec::Family;
use serde_json::json;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Specs whose landscapes differ: square batched, one large square, tall-skinny, small-K, and a fused epilogue
/// with a transposed operand.
const SPECS: [(&str, &str, MatmulShape); 5] = [
    (
        "bmm-16x1024",
        "batched matmul, f32",
        MatmulShape {
            batch: 16,
            m: 1024,
            n: 1024,
            k: 1024,
        },
    ),
    (
        "square-4096",
        "matmul, f32",
        MatmulShape {
            batch: 1,
            m: 4096,
            n: 4096,
            k: 4096,
        },
    ),
    (
        "tall-skinny",
        "matmul, f32",
        MatmulShape {
            batch: 1,
            m: 32768,
            n: 128,
            k: 1024,
        },
    ),
    (
        "small-k",
        "batched matmul, f32",
        MatmulShape {
            batch: 64,
            m: 512,
            n: 512,
            k: 32,
        },
    ),
    (
        "bt-bias-gelu",
        "matmul with B transposed, bias, gelu, f32",
        MatmulShape {
            batch: 1,
            m: 2048,
            n: 2048,
            k: 2048,
        },
    ),
];

/// The label of MCTS with the LLM proposer in tables and JSON.
const LLM_METHOD: &str = "mcts + llm proposer";
const JUDGE_METHOD: &str = "mcts + llm judge";

const USAGE: &str = "search_compare: MCTS against random search (and exhaustive enumeration) on a GPU

  --out DIR                 where the JSON, table, charts and logs go (default: search-compare)
  --seeds N                 runs per method and spec (default 5)
  --budget N                candidates per run (default 32)
  --specs a,b               only these specs (bmm-16x1024, square-4096, tall-skinny, small-k, bt-bias-gelu)
  --exhaustive a,b          enumerate these specs' whole space (default: bmm-16x1024,small-k)
  --reference name=ms       an exhaustive best measured earlier, for specs not enumerated now
  --backup max|mean         how MCTS backs up rewards (default: max; mean is textbook UCT)
  --render FILE.json        re-render an earlier run's table and charts (no GPU)
  --replay LOG.jsonl        both methods over a landscape an exhaustive run measured (no GPU)
  --llm DIR                 with --replay: also MCTS with the LLM proposer of DIR/optiml.toml's [llm]";

struct Args {
    out: PathBuf,
    seeds: u64,
    budget: usize,
    only: Option<Vec<String>>,
    exhaustive: Vec<String>,
    /// Exhaustive bests measured in an earlier run on the same GPU: `name=ms`.
    references: Vec<(String, f64)>,
    /// Re-render the table and charts of an earlier run's JSON (no GPU needed).
    render: Option<PathBuf>,
    /// Replay MCTS and random search over an exhaustive run's log (no GPU needed).
    replay: Option<PathBuf>,
    /// How MCTS backs up rewards (`mean`, the seed's, or `max`).
    backup: Backup,
    /// A folder whose settings have an `[llm]` table: the replay also runs MCTS with the LLM proposer.
    llm: Option<PathBuf>,
}

fn args() -> Result<Args, BoxError> {
    let mut a = Args {
        out: PathBuf::from("search-compare"),
        seeds: 5,
        budget: 32,
        only: None,
        exhaustive: vec!["bmm-16x1024".into(), "small-k".into()],
        references: Vec::new(),
        render: None,
        replay: None,
        backup: Backup::Max,
        llm: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--help" | "-h" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            "--out" => a.out = PathBuf::from(value()?),
            "--seeds" => a.seeds = value()?.parse()?,
            "--budget" => a.budget = value()?.parse()?,
            "--specs" => a.only = Some(value()?.split(',').map(str::to_string).collect()),
            "--exhaustive" => a.exhaustive = value()?.split(',').map(str::to_string).collect(),
            "--render" => a.render = Some(PathBuf::from(value()?)),
            "--replay" => a.replay = Some(PathBuf::from(value()?)),
            "--llm" => a.llm = Some(PathBuf::from(value()?)),
            "--backup" => {
                a.backup = match value()?.as_str() {
                    "mean" => Backup::Mean,
                    "max" => Backup::Max,
                    other => return Err(format!("--backup: `{other}` is not mean or max").into()),
                }
            }
            "--reference" => {
                let v = value()?;
                let (name, ms) = v.split_once('=').ok_or("--reference takes name=ms")?;
                a.references.push((name.to_string(), ms.parse()?));
            }
            other => return Err(format!("unknown argument `{other}`").into()),
        }
    }
    Ok(a)
}

/// Evaluations until the best found is within 5% of `target`.
fn evals_to_within(c: &Convergence, target: f64) -> Option<usize> {
    c.points
        .iter()
        .find(|(_, t)| *t <= 1.05 * target)
        .map(|(e, _)| *e)
}

/// The run's convergence curve; its search log goes to `logs/<name>-<method>-<seed>.jsonl` under `out` (the
/// rejections and their reasons are only there).
#[allow(clippy::too_many_arguments)]
fn curve(
    log: &SearchLog<Schedule>,
    name: &str,
    spec: &str,
    shape: MatmulShape,
    method: Method,
    seed: u64,
    wall: f64,
    out: &std::path::Path,
) -> Result<Convergence, BoxError> {
    let header = Header {
        kernel: name.into(),
        spec: spec.into(),
        arch: "device".into(),
        device: "device".into(),
        shape: shape.to_string(),
        method,
        seed: Some(seed),
        config: serde_json::Value::Null,
        started_at: optiml_build::tune::now_rfc3339(),
        signals: Signals::Derived,
    };
    let records = search::records(&header, log, wall)?;
    search::write_records(
        &out.join("logs")
            .join(format!("{name}-{method}-{seed}.jsonl")),
        &records,
    )?;
    Ok(Convergence::of(&records, format!("{method} seed {seed}")))
}

/// The table rows of one spec: the best found (median over seeds) and the evaluations each seed needed to come
/// within 5% of `reference`.
#[allow(clippy::too_many_arguments)]
fn rows(
    table: &mut Table,
    name: &str,
    shape: &str,
    space: u64,
    reference: f64,
    kind: &str,
    default: f64,
    runs: &[serde_json::Value],
) {
    let mut methods: Vec<String> = Vec::new();
    for r in runs {
        if let Some(m) = r["method"].as_str()
            && !methods.iter().any(|x| x == m)
        {
            methods.push(m.to_string());
        }
    }
    for method in methods {
        let mine: Vec<&serde_json::Value> = runs
            .iter()
            .filter(|r| r["method"] == method.as_str())
            .collect();
        let mut bests: Vec<f64> = mine.iter().filter_map(|r| r["best_ms"].as_f64()).collect();
        bests.sort_by(f64::total_cmp);
        let within: Vec<String> = mine
            .iter()
            .map(|r| {
                r["curve"]
                    .as_array()
                    .and_then(|c| {
                        c.iter().find_map(|p| {
                            let (e, t) = (p[0].as_u64()?, p[1].as_f64()?);
                            (t <= 1.05 * reference).then_some(e)
                        })
                    })
                    .map_or("—".to_string(), |v| v.to_string())
            })
            .collect();
        table.row(&[
            name.to_string(),
            shape.to_string(),
            space.to_string(),
            format!("{reference:.4} ({kind})"),
            format!("{default:.4}"),
            method.clone(),
            format!(
                "{:.4}",
                bests.get(bests.len() / 2).copied().unwrap_or(f64::NAN)
            ),
            within.join(", "),
        ]);
    }
}

/// `<out>/<name>.svg`: best time found against evaluations, one line per run.
fn write_chart(
    out: &std::path::Path,
    name: &str,
    shape: &str,
    curves: &[Convergence],
) -> Result<(), BoxError> {
    std::fs::write(
        out.join(format!("{name}.svg")),
        convergence_svg(
            curves,
            &format!("{name} {shape}: best time found vs evaluations"),
        ),
    )?;
    Ok(())
}

/// The comparison's table, before its rows.
fn comparison_table() -> Table {
    Table::new(
        &[
            "spec",
            "shape",
            "space",
            "reference (ms)",
            "default (ms)",
            "method",
            "best found, median of seeds (ms)",
            "within 5% of the reference after (evaluations, per seed)",
        ]
        .map(|title| (title, Align::Left)),
    )
}

/// `--render`: the table and charts of an earlier run, with `--reference` values applied.
fn render(path: &std::path::Path, args: &Args) -> Result<(), BoxError> {
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path)?)?;
    let mut table = comparison_table();
    for r in report["results"].as_array().ok_or("no results")? {
        let name = r["name"].as_str().unwrap_or("?");
        let shape = r["shape"].as_str().unwrap_or("?");
        let runs = r["runs"].as_array().cloned().unwrap_or_default();
        let (reference, kind) = match args.references.iter().find(|(n, _)| n == name) {
            Some((_, ms)) => (*ms, "exhaustive best of an earlier run"),
            None => (
                r["reference_ms"]
                    .as_f64()
                    .or_else(|| r["exhaustive"]["best_ms"].as_f64())
                    .unwrap_or(f64::NAN),
                r["reference"].as_str().unwrap_or("exhaustive best"),
            ),
        };
        let default = r["default_ms"]
            .as_f64()
            .or_else(|| r["exhaustive"]["default_ms"].as_f64())
            .unwrap_or(f64::NAN);
        let space = r["space"].as_u64().unwrap_or(0);
        rows(
            &mut table, name, shape, space, reference, kind, default, &runs,
        );
        let curves: Vec<Convergence> = runs
            .iter()
            .map(|run| Convergence {
                label: format!(
                    "{} seed {}",
                    run["method"].as_str().unwrap_or("?"),
                    run["seed"]
                ),
                method: if run["method"] == "mcts" {
                    Method::Mcts
                } else {
                    Method::Random
                },
                points: run["curve"]
                    .as_array()
                    .map(|c| {
                        c.iter()
                            .filter_map(|p| Some((p[0].as_u64()? as usize, p[1].as_f64()?)))
                            .collect()
                    })
                    .unwrap_or_default(),
            })
            .collect();
        write_chart(&args.out, name, shape, &curves)?;
    }
    std::fs::write(args.out.join("search_compare.md"), table.as_str())?;
    println!("{table}");
    Ok(())
}

/// `--replay`: MCTS against random search over a landscape measured by an exhaustive run.
fn replay(path: &std::path::Path, args: &Args) -> Result<(), BoxError> {
    let records = search::read_jsonl(path)?;
    let landscape: Replay<Schedule> = Replay::new(&records, 0)?;
    let (root, reference) = (landscape.root(), landscape.best_ms());
    let (judge, catalog) = (DeterministicJudge, Schedule::catalog());
    let proposer = RoutedProposer::new(catalog.clone());
    let config = Config {
        budget: args.budget,
        backup: args.backup,
        ..Config::default()
    };
    let name = records.header.kernel.clone();
    let llm = match &args.llm {
        Some(dir) => {
            let settings = optiml_build::config::Settings::load(dir)?
                .llm
                .ok_or_else(|| format!("`{}`: its settings have no [llm] table", dir.display()))?;
            Some(Llm::new(&settings, args.out.join("llm")))
        }
        None => None,
    };
    let kernel = format!("{} at {}", records.header.spec, records.header.shape);
    let llm_proposer = llm
        .as_ref()
        .map(|llm| LlmProposer::new(llm, catalog.clone(), kernel.clone()));
    let llm_judge = llm.as_ref().map(|llm| LlmJudge::new(llm, kernel));
    let mut runs = Vec::new();
    let mut curves = Vec::new();
    for seed in 0..args.seeds {
        let mut methods = vec![Method::Mcts.to_string(), Method::Random.to_string()];
        if llm_proposer.is_some() {
            methods.push(LLM_METHOD.to_string());
            methods.push(JUDGE_METHOD.to_string());
        }
        for method in methods {
            let mut e = Replay::new(&records, seed)?;
            let log = match (method.as_str(), &llm_proposer) {
                ("random", _) => {
                    search::random_search(&config, &judge, &catalog, root, &mut e, seed)?
                }
                (LLM_METHOD, Some(p)) => {
                    Search::new(config.clone(), p, &judge).run(root, &mut e)?
                }
                (JUDGE_METHOD, _) if llm_judge.is_some() => {
                    let j = llm_judge.as_ref().ok_or("no judge")?;
                    Search::new(config.clone(), &proposer, j).run(root, &mut e)?
                }
                _ => Search::new(config.clone(), &proposer, &judge).run(root, &mut e)?,
            };
            let records = search::records(&records.header, &log, 0.0)?;
            let c = Convergence::of(&records, format!("{method} seed {seed}"));
            runs.push(json!({
                "method": method, "seed": seed, "evaluations": log.evaluations,
                "best_ms": log.best_measurement.time_ms, "best_schedule": log.best.describe(),
                "path": log.path, "curve": c.points,
            }));
            curves.push(c);
        }
    }
    let llm_stats = llm_proposer.as_ref().map(|p| {
        let s = p.stats();
        json!({"asked": s.asked, "replayed": s.replayed, "failed": s.failed, "useful": s.useful,
               "unknown_names": s.unknown_names})
    });
    if let Some(s) = &llm_stats {
        println!("LLM proposer: {s}");
    }
    let judge_stats = llm_judge.as_ref().map(|j| {
        let s = j.stats();
        json!({"asked": s.asked, "replayed": s.replayed, "failed": s.failed, "unreadable": s.unreadable,
               "overruled": s.overruled})
    });
    if let Some(s) = &judge_stats {
        println!("LLM judge: {s}");
    }
    let default = landscape.measured_ms(&root).unwrap_or(f64::NAN);
    let mut table = comparison_table();
    rows(
        &mut table,
        &name,
        &records.header.shape,
        landscape.len() as u64,
        reference,
        "best of the replayed landscape",
        default,
        &runs,
    );
    write_chart(
        &args.out,
        &format!("{name}-replay"),
        &records.header.shape,
        &curves,
    )?;
    write_json(
        &args.out.join(format!("{name}-replay.json")),
        &json!({ "landscape": path, "runs": runs, "llm_proposer": llm_stats, "llm_judge": judge_stats }),
    )?;
    println!("{table}");
    Ok(())
}

fn main() -> Result<(), BoxError> {
    // This executable is also the evaluation worker.
    optiml_build::serve_worker_if_requested();
    let args = args()?;
    std::fs::create_dir_all(&args.out)?;
    if let Some(path) = &args.render {
        return render(path, &args);
    }
    if let Some(path) = &args.replay {
        return replay(path, &args);
    }
    let nvrtc = optiml_build::nvrtc::load()?;
    let ctx = optiml::runtime::probe::context(0)?;
    let arch = optiml::runtime::probe::arch_of(&ctx)?;
    drop(ctx);
    let judge = DeterministicJudge;
    let catalog = Schedule::catalog();
    let proposer = RoutedProposer::new(catalog.clone());
    let root = Schedule::default_for(arch);
    // The exhaustive landscape is the 1638 tilings without split-K: the shapes compared here fill the GPU
    // without splitting, and every split factor would make the sweep six times longer.
    let space: Vec<Schedule> = Schedule::space()
        .into_iter()
        .filter(|s| *s != root && s.split_k == 1)
        .collect();
    let mut results = Vec::new();
    let mut table = comparison_table();
    for (name, text, shape) in SPECS {
        if args
            .only
            .as_ref()
            .is_some_and(|o| !o.iter().any(|n| n == name))
        {
            continue;
        }
        let Family::Matmul(spec) = optiml_spec::parse(text)?.family else {
            return Err(format!("{text} is not a matmul").into());
        };
        let shape = shape.fit(&spec);
        let mut e = GpuEvaluator::<Schedule>::new(
            nvrtc,
            EvalSetup {
                name: name.into(),
                plan: test_plan(&spec, &[]),
                spec: spec.clone(),
                arch,
                dispatch: shape,
                timing: TimingPlan::default(),
                worker: WorkerCommand::current_exe()?,
                device: 0,
                compile_threads: std::thread::available_parallelism().map_or(4, |n| n.get()),
                seed: 7,
                ncu: None,
            },
        )?;
        let exhaustive = if args.exhaustive.iter().any(|n| n == name) {
            let unlimited = Config {
                budget: space.len() + 1,
                time_limit: Duration::from_secs(3600),
                ..Config::default()
            };
            let t0 = Instant::now();
            let ex = search::exhaustive(&unlimited, &judge, root, &space, &mut e)?;
            let wall = t0.elapsed().as_secs_f64();
            // The whole measured landscape, for `--replay`.
            curve(
                &ex,
                name,
                text,
                shape,
                Method::Exhaustive,
                0,
                wall,
                &args.out,
            )?;
            let rejected = ex
                .steps
                .iter()
                .filter(|s| s.outcome.measured().is_none())
                .count();
            eprintln!(
                "{name} {shape}: exhaustive {} schedules in {wall:.1} s ({:.1}/s, compiles included), {rejected} rejected; best {:.4} ms ({})",
                ex.evaluations,
                ex.evaluations as f64 / wall,
                ex.best_measurement.time_ms,
                ex.best.describe()
            );
            Some(json!({
                "best_ms": ex.best_measurement.time_ms, "best_schedule": ex.best.describe(),
                "default_ms": ex.steps[0].outcome.measured().map(|m| m.time_ms),
                "evaluations": ex.evaluations, "rejected": rejected, "wall_s": wall,
                "evaluations_per_s": ex.evaluations as f64 / wall,
                "tflops_best": ex.best_measurement.tflops,
            }))
        } else {
            None
        };
        let config = Config {
            budget: args.budget,
            time_limit: Duration::from_secs(600),
            backup: args.backup,
            ..Config::default()
        };
        let mut curves = Vec::new();
        let mut logs = Vec::new();
        for seed in 0..args.seeds {
            for method in [Method::Mcts, Method::Random] {
                let t = Instant::now();
                let log = match method {
                    Method::Mcts => {
                        Search::new(config.clone(), &proposer, &judge).run(root, &mut e)?
                    }
                    _ => search::random_search(&config, &judge, &catalog, root, &mut e, seed)?,
                };
                let wall = t.elapsed().as_secs_f64();
                curves.push(curve(
                    &log, name, text, shape, method, seed, wall, &args.out,
                )?);
                logs.push((method, seed, wall, log));
            }
        }
        // The reference: the exhaustive best where the space was enumerated, else the best any run found.
        let (reference, reference_kind) =
            match exhaustive.as_ref().and_then(|x| x["best_ms"].as_f64()) {
                Some(b) => (b, "exhaustive best"),
                None => (
                    logs.iter()
                        .map(|l| l.3.best_measurement.time_ms)
                        .fold(f64::INFINITY, f64::min),
                    "best found by any run",
                ),
            };
        let default = logs[0].3.steps[0]
            .outcome
            .measured()
            .map_or(f64::NAN, |m| m.time_ms);
        let mut runs = Vec::new();
        for ((method, seed, wall, log), c) in logs.iter().zip(&curves) {
            runs.push(json!({
                "method": method.to_string(), "seed": seed, "evaluations": log.evaluations,
                "wall_s": wall, "best_ms": log.best_measurement.time_ms,
                "best_schedule": log.best.describe(), "path": log.path,
                "evals_to_within_5pct": evals_to_within(c, reference), "curve": c.points,
            }));
        }
        rows(
            &mut table,
            name,
            &shape.to_string(),
            space.len() as u64 + 1,
            reference,
            reference_kind,
            default,
            &runs,
        );
        write_chart(&args.out, name, &shape.to_string(), &curves)?;
        results.push(json!({
            "spec": text, "name": name, "shape": shape.to_string(), "space": space.len() + 1,
            "reference_ms": reference, "reference": reference_kind, "default_ms": default,
            "exhaustive": exhaustive,
            "runs": runs,
            "evaluator": format!("{:?}", e.stats()),
            "device": e.device(),
        }));
        // Written after every spec, so a run cut short keeps what it measured.
        let report = json!({
            "date": optiml_build::tune::now_rfc3339(), "budget": args.budget, "seeds": args.seeds,
            "results": results,
        });
        write_json(&args.out.join("search_compare.json"), &report)?;
        std::fs::write(args.out.join("search_compare.md"), table.as_str())?;
    }
    println!("{table}");
    Ok(())
}
