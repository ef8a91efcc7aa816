//! `cargo optiml prepare`'s carry-over (`crate::migrate`) on this family's kernels (two pointwise maps): a tuned
//! variant whose schedule the current generator compiles to the same machine code is carried over, one that
//! changed stays behind.

use super::codegen::PointwiseSchedule as Schedule;
use crate::cache::{Cache, Entry, KeyInputs, Lookup, NewVariant, Tuning};
use crate::experts::Candidate;
use crate::families;
use crate::migrate::{Dropped, carry_over};
use crate::nvrtc;
use crate::scan::FoundKernel;
use crate::search::Tunable;
use crate::search::{
    self, Config, DeterministicJudge, Evaluator, Header, Measurement, Method, Outcome, Signals,
};
use optiml_runtime::Arch;

/// Times a schedule by its block size: the largest block wins, so the winner is not the default.
struct ByThreads;

impl Evaluator<Schedule> for ByThreads {
    fn evaluate(&mut self, s: &Schedule) -> Outcome {
        Outcome::Measured(Measurement {
            time_ms: 1.0 / f64::from(s.threads),
            ..Measurement::default()
        })
    }
}

fn kernels(root: &std::path::Path) -> Vec<FoundKernel> {
    let src = root.join("lib.rs");
    std::fs::write(
        &src,
        "#[optiml::kernel(\"y = relu(x)\")]\npub fn r(x: &CudaSlice<f32>, out: &mut CudaSlice<f32>);\n\
         #[optiml::kernel(\"y = gelu(x)\")]\npub fn g(x: &CudaSlice<f32>, out: &mut CudaSlice<f32>);\n",
    )
    .unwrap();
    crate::scan::scan(&[src]).unwrap().unique_kernels()
}

/// A search's winner for `kernel`, its log, and the tuning record an earlier generator stored.
fn searched(kernel: &FoundKernel, arch: Arch) -> (Schedule, Vec<u8>, Tuning) {
    let root = Schedule::default_for(arch);
    let space: Vec<Schedule> = Schedule::space()
        .into_iter()
        .filter(|s| *s != root)
        .collect();
    let config = Config {
        budget: 100,
        ..Config::default()
    };
    let log =
        search::exhaustive(&config, &DeterministicJudge, root, &space, &mut ByThreads).unwrap();
    assert_ne!(log.best, root);
    let header = Header {
        kernel: kernel.name.clone(),
        spec: kernel.spec.canonical(),
        arch: arch.to_string(),
        device: "test".into(),
        shape: "n=1024".into(),
        method: Method::Exhaustive,
        seed: None,
        config: search::config_value(&config),
        started_at: String::new(),
        signals: Signals::Derived,
    };
    let jsonl = search::records(&header, &log, 0.0)
        .and_then(|r| r.to_jsonl())
        .unwrap()
        .into_bytes();
    let tuning = Tuning {
        method: "exhaustive".into(),
        device: "test".into(),
        date: "2026-11-30T00:00:00Z".into(),
        measurement: log.best_measurement,
        default_measurement: log.steps[0].outcome.measured().copied().unwrap(),
        evaluations: log.evaluations,
        path: Vec::new(),
        log: String::new(),
    };
    (log.best, jsonl, tuning)
}

#[test]
fn a_variant_with_the_same_machine_code_is_carried_over_and_one_without_stays_behind() {
    let nvrtc = crate::nvrtc::load().expect("NVRTC (the tests need it: scripts/nvrtc.sh)");
    let dir = std::env::temp_dir().join(format!("optiml-migrate-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let cache = Cache::new(dir.join(".optiml"));
    let arch = Arch::new(9, 0);
    let found = kernels(&dir);
    let (relu, gelu) = (&found[0], &found[1]);
    let compile = |c: &Candidate| {
        nvrtc::compile(nvrtc, crate::eval::CANDIDATE_FILE, &c.source, arch).unwrap()
    };
    let candidate = |k: &FoundKernel, s: Schedule| {
        families::scheduled_candidate(&k.spec, &serde_json::to_value(s).unwrap()).unwrap()
    };
    let earlier = "optiml-build 0.0.0 templates 0000000000000000";
    // relu: what the earlier generator stored is what this one compiles the winner to.
    // gelu: the stored CUBIN is not (another kernel's, as after a template change that alters the code).
    for (k, cubin_of) in [(relu, relu), (gelu, relu)] {
        let (best, log, tuning) = searched(k, arch);
        let c = candidate(k, best);
        let compiled = compile(&candidate(cubin_of, best));
        let variant = NewVariant {
            candidate: &c,
            compiled: &compiled,
            shape: None,
            tuning: Some(&tuning),
            log: Some(&log),
        };
        cache
            .store(&KeyInputs::of(k, arch, earlier), &[variant], false)
            .unwrap();
    }

    let current = |k: &FoundKernel| families::kernel_generator(k, arch);
    let carried = carry_over(nvrtc, &cache, relu, arch, &current(relu))
        .unwrap()
        .expect("an earlier tuned entry");
    assert_eq!(
        (carried.kept.as_slice(), carried.dropped.len()),
        (&[None][..], 0)
    );
    let Lookup::Hit(entry) = cache.lookup(&KeyInputs::of(relu, arch, &current(relu))) else {
        panic!("the carried entry does not verify");
    };
    let v = &entry.manifest.variants[0];
    let earlier_entries = cache.earlier_entries(&KeyInputs::of(relu, arch, &current(relu)));
    let earlier_entry = &earlier_entries[0];
    let was = &earlier_entry.manifest.variants[0];
    // The measurement, the log and the machine code are the earlier entry's.
    assert_eq!(
        v.tuning.as_ref().unwrap().measurement,
        was.tuning.as_ref().unwrap().measurement
    );
    let read = |e: &Entry, name: &str| e.bytes(name).unwrap().to_vec();
    assert_eq!(read(&entry, "v0.cubin"), read(earlier_entry, "v0.cubin"));
    assert_eq!(
        read(&entry, &v.tuning.as_ref().unwrap().log),
        read(earlier_entry, &was.tuning.as_ref().unwrap().log)
    );
    // Nothing left to do once the entry exists.
    assert!(
        carry_over(nvrtc, &cache, relu, arch, &current(relu))
            .unwrap()
            .is_none()
    );

    let stayed = carry_over(nvrtc, &cache, gelu, arch, &current(gelu))
        .unwrap()
        .expect("an earlier tuned entry");
    assert!(stayed.kept.is_empty() && stayed.entry.is_none());
    assert_eq!(stayed.dropped, [(None, Dropped::Changed)]);
    assert!(matches!(
        cache.lookup(&KeyInputs::of(gelu, arch, &current(gelu))),
        Lookup::Miss
    ));
    std::fs::remove_dir_all(&dir).unwrap();
}
