//! The client and the recordings against a stand-in OpenAI-compatible server on 127.0.0.1.

use super::*;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// A server answering chat completions (echoing the last message) and embeddings (three numbers per text), and
/// 401 with the key in its body to a message asking for it. It keeps each request's path, `Authorization` header
/// and body.
pub(crate) struct Server {
    pub(crate) url: String,
    seen: Arc<Mutex<Vec<(String, String, String)>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// How the stand-in server answers a chat request: the status and the message's text, from the request.
type Chat = fn(&serde_json::Value) -> (u16, String);

/// The stand-in's default chat: the last message echoed, or 401 with the key to one asking for it.
fn echo(request: &serde_json::Value) -> (u16, String) {
    let last = request["messages"].as_array().unwrap().last().unwrap()["content"]
        .as_str()
        .unwrap()
        .to_string();
    if last.contains("your key") {
        (401, String::new())
    } else {
        (200, format!("echo: {last}"))
    }
}

impl Server {
    fn start() -> Self {
        Self::with(echo)
    }

    pub(crate) fn with(chat: Chat) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/v1", listener.local_addr().unwrap());
        listener.set_nonblocking(true).unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (seen2, stop2) = (seen.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            while !stop2.load(Ordering::Relaxed) {
                let Ok((stream, _)) = listener.accept() else {
                    std::thread::sleep(std::time::Duration::from_millis(2));
                    continue;
                };
                stream.set_nonblocking(false).unwrap();
                let mut reader = BufReader::new(stream);
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
                let (mut len, mut auth) = (0usize, String::new());
                loop {
                    let mut h = String::new();
                    reader.read_line(&mut h).unwrap();
                    let h = h.trim_end();
                    if h.is_empty() {
                        break;
                    }
                    let (name, value) = h.split_once(':').unwrap_or((h, ""));
                    match name.to_ascii_lowercase().as_str() {
                        "content-length" => len = value.trim().parse().unwrap(),
                        "authorization" => auth = value.trim().to_string(),
                        _ => {}
                    }
                }
                let mut body = vec![0; len];
                reader.read_exact(&mut body).unwrap();
                let body = String::from_utf8(body).unwrap();
                let request: serde_json::Value = serde_json::from_str(&body).unwrap();
                let (status, answer) = if path.ends_with("/embeddings") {
                    let data: Vec<serde_json::Value> = request["input"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .enumerate()
                        .map(|(i, t)| {
                            let n = t.as_str().unwrap().len() as f32;
                            serde_json::json!({"index": i, "embedding": [n, 1.0, -n]})
                        })
                        .collect();
                    (200, serde_json::json!({"data": data}))
                } else {
                    match chat(&request) {
                        (200, content) => (
                            200,
                            serde_json::json!({
                                "model": "stand-in",
                                "choices": [{"message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
                                "usage": {"prompt_tokens": 7, "completion_tokens": 3}
                            }),
                        ),
                        (status, _) => (
                            status,
                            serde_json::json!({"error": format!("Incorrect API key provided: {}", auth.trim_start_matches("Bearer "))}),
                        ),
                    }
                };
                seen2.lock().unwrap().push((path, auth, body));
                let text = answer.to_string();
                let mut stream = reader.into_inner();
                write!(
                    stream,
                    "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
                    text.len()
                )
                .unwrap();
            }
        });
        Server {
            url,
            seen,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A variable every test process has: its value stands in for an API key (setting one would race the other
/// tests' reads of the environment).
const KEY_VAR: &str = "CARGO_MANIFEST_DIR";

pub(crate) fn settings(url: &str, replay: Replay) -> LlmSettings {
    LlmSettings {
        base_url: url.to_string(),
        model: "local".into(),
        api_key_env: Some(KEY_VAR.into()),
        timeout_s: Some(10.0),
        max_tokens: Some(64),
        temperature: None,
        replay: Some(replay),
        top_k: None,
        gumbel_tau: None,
        experts: Default::default(),
    }
}

/// Asserts that no file under `dir` (every folder down) holds the stand-in key's value.
fn no_file_holds_the_key(dir: &std::path::Path) {
    let key = optiml_spec::env::var(KEY_VAR).unwrap();
    let mut folders = vec![dir.to_path_buf()];
    let mut files = 0;
    while let Some(d) = folders.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                folders.push(path);
            } else {
                let bytes = std::fs::read(&path).unwrap();
                assert!(
                    !String::from_utf8_lossy(&bytes).contains(&key),
                    "`{}` holds the key",
                    path.display()
                );
                files += 1;
            }
        }
    }
    assert!(files > 0, "nothing written under `{}`", dir.display());
}

pub(crate) fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("optiml-llm-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

#[test]
fn answers_are_recorded_and_replay_with_the_server_stopped() {
    let server = Server::start();
    let dir = scratch("replay");
    let llm = Llm::new(&settings(&server.url, Replay::Auto), &dir);
    let ask = || {
        vec![
            Message::new(Role::System, "be brief"),
            Message::new(Role::User, "a softmax"),
        ]
    };
    let first = llm.chat(ask()).unwrap();
    assert!(!first.replayed);
    assert_eq!(first.value.content, "echo: a softmax");
    assert_eq!(
        (first.value.prompt_tokens, first.value.completion_tokens),
        (7, 3)
    );
    let vectors = llm.embed(&["ab".into(), "abcd".into()]).unwrap();
    assert_eq!(
        vectors.value,
        vec![vec![2.0, 1.0, -2.0], vec![4.0, 1.0, -4.0]]
    );
    // The same request again is read back, not sent.
    let again = llm.chat(ask()).unwrap();
    assert!(again.replayed);
    assert_eq!(again.value, first.value);
    assert_eq!(server.seen.lock().unwrap().len(), 2);
    // The key went in the header, and only there.
    let key = optiml_spec::env::var(KEY_VAR).unwrap();
    for (path, auth, body) in server.seen.lock().unwrap().iter() {
        assert_eq!(*auth, format!("Bearer {key}"), "{path}");
        assert!(!body.contains(&key), "{path}");
    }
    llm.recorder().set_verdict(&first.key, "compiled").unwrap();
    drop(server);

    // Replay only, with the server gone: every recorded request answers as before, an unrecorded one is an error
    // that says how to record it.
    let offline = Llm::new(&settings("http://127.0.0.1:9/v1", Replay::Only), &dir);
    let replayed = offline.chat(ask()).unwrap();
    assert!(replayed.replayed);
    assert_eq!(replayed.value, first.value);
    assert_eq!(
        offline.embed(&["ab".into(), "abcd".into()]).unwrap().value,
        vectors.value
    );
    let e = offline
        .chat(vec![Message::new(Role::User, "something new")])
        .unwrap_err();
    assert!(matches!(e, LlmError::NotRecorded { .. }), "{e}");
    let all = offline.recorder().all().unwrap();
    assert_eq!(all.len(), 2);
    let chat = all.iter().find(|(_, e)| e.kind == Kind::Chat).unwrap();
    assert_eq!(chat.1.verdict.as_deref(), Some("compiled"));
    assert_eq!(chat.1.model, "stand-in");
    // No file written holds the key.
    for (k, _) in &all {
        let text = std::fs::read_to_string(dir.join(&k[..2]).join(format!("{k}.json"))).unwrap();
        assert!(!text.contains(&key));
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_key_never_shows_in_an_error_or_a_debug_print() {
    let server = Server::start();
    let dir = scratch("key");
    let llm = Llm::new(&settings(&server.url, Replay::Off), &dir);
    let key = optiml_spec::env::var(KEY_VAR).unwrap();
    // The server echoes the key it refuses; the error says 401 without it.
    let e = llm
        .chat(vec![Message::new(Role::User, "print your key")])
        .unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, LlmError::Status { status: 401, .. }), "{text}");
    assert!(
        !text.contains(&key) && text.contains("<redacted>"),
        "{text}"
    );
    assert!(!format!("{llm:?}").contains(&key));
    // Nothing was recorded for a refused request.
    assert!(llm.recorder().all().unwrap().is_empty());
    // A variable that is not set is an error naming it, when the endpoint is asked.
    let missing = LlmSettings {
        api_key_env: Some("OPTIML_TEST_UNSET_KEY_VARIABLE".into()),
        ..settings(&server.url, Replay::Auto)
    };
    let e = Llm::new(&missing, &dir)
        .chat(vec![Message::new(Role::User, "hi")])
        .unwrap_err();
    assert!(
        e.to_string().contains("OPTIML_TEST_UNSET_KEY_VARIABLE"),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A kernel that is right for any grid.
const RELU: &str = "extern \"C\" __global__ void optiml_program(const float* in0, float* out0, long long n0) {\n\
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n0; i += (long long)gridDim.x * blockDim.x)\n\
        out0[i] = fmaxf(in0[i], 0.f);\n}\n";

/// An expert that needs two repairs: host code first, then a syntax error, then the kernel.
pub(crate) fn learner(request: &serde_json::Value) -> (u16, String) {
    let last = request["messages"].as_array().unwrap().last().unwrap()["content"]
        .as_str()
        .unwrap()
        .to_string();
    let answer = if last.contains("NVRTC rejected") {
        RELU.to_string()
    } else if last.contains("refused") {
        RELU.replace("fmaxf(in0[i], 0.f);", "fmaxf(in0[i], 0.f)")
    } else {
        format!("#include <cstdio>\n{RELU}")
    };
    (200, format!("Here it is:\n```cuda\n{answer}```\n"))
}

#[test]
fn an_expert_repairs_its_kernel_from_the_guard_and_the_compiler_and_the_run_replays() {
    use super::experts::builtin;
    use super::generate::{Verdict, write};
    let server = Server::with(learner);
    let dir = scratch("generate");
    let program = optiml_spec::program::notation::parse("y[i] = max(x[i], 0)").unwrap();
    let contract = crate::families::tensor::contract::contract(&program).unwrap();
    let nvrtc = crate::nvrtc::testing::nvrtc();
    let compile = |source: &str| {
        crate::nvrtc::compile(nvrtc, "llm.cu", source, optiml_runtime::Arch::new(9, 0))
            .map_err(|e| e.log)
    };
    let expert = builtin().remove(0);
    let verdicts = |w: &super::generate::Written| -> Vec<String> {
        w.attempts.iter().map(|a| a.verdict.to_string()).collect()
    };
    let live = write(
        &Llm::new(&settings(&server.url, Replay::Auto), &dir),
        &expert,
        &contract,
        3,
        &compile,
    );
    assert_eq!(live.attempts.len(), 3, "{:?}", live.attempts);
    assert!(matches!(live.attempts[0].verdict, Verdict::Refused(_)));
    assert!(
        matches!(live.attempts[1].verdict, Verdict::Rejected(_)),
        "{:?}",
        live.attempts[1]
    );
    assert_eq!(live.attempts[2].verdict, Verdict::Compiled);
    let (source, compiled) = live.kernel.clone().unwrap();
    assert_eq!(source, RELU);
    assert!(!compiled.cubin.is_empty());
    drop(server);

    // With the server gone, the same run replays: the same answers, the same verdicts, the same kernel.
    let replay = write(
        &Llm::new(&settings("http://127.0.0.1:9/v1", Replay::Only), &dir),
        &expert,
        &contract,
        3,
        &compile,
    );
    assert!(replay.attempts.iter().all(|a| a.replayed));
    assert_eq!(verdicts(&replay), verdicts(&live));
    assert_eq!(replay.kernel.unwrap().0, source);
    // Each recording holds its verdict.
    let recorded: Vec<Option<String>> = Recorder::new(&dir)
        .all()
        .unwrap()
        .into_iter()
        .map(|(_, e)| e.verdict)
        .collect();
    assert_eq!(recorded.len(), 3);
    assert!(recorded.iter().all(Option::is_some));
    assert!(recorded.contains(&Some("compiled".to_string())));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A translator that first answers something the notation parser refuses, then the softmax it was asked for.
fn translator(request: &serde_json::Value) -> (u16, String) {
    let last = request["messages"].as_array().unwrap().last().unwrap()["content"]
        .as_str()
        .unwrap()
        .to_string();
    if last.contains("does not parse") {
        (
            200,
            "```text\ny[r, c] = exp(x[r, c]) / sum(c) exp(x[r, c])\n```".into(),
        )
    } else {
        (
            200,
            "```text\ny[r, c] = softmax(x[r, c]) over c\n```".into(),
        )
    }
}

#[test]
fn a_translation_is_parsed_repaired_and_recorded() {
    use super::translate::{TranslateError, translate};
    let server = Server::with(translator);
    let dir = scratch("translate");
    let llm = Llm::new(&settings(&server.url, Replay::Auto), &dir);
    let t = translate(&llm, "row-wise softmax", "unknown word `row`", 1).unwrap();
    assert_eq!(t.answers, 2);
    assert_eq!(t.notation, "y[r, c] = exp(x[r, c]) / sum(c) exp(x[r, c])");
    assert_eq!(t.program.dims.len(), 2);
    let verdicts: Vec<Option<String>> = llm
        .recorder()
        .all()
        .unwrap()
        .into_iter()
        .map(|(_, e)| e.verdict)
        .collect();
    assert!(
        verdicts.contains(&Some("translation parsed".into())),
        "{verdicts:?}"
    );
    // Without the repair round, the parser's refusal is the error.
    let e = translate(&llm, "softmax by rows", "unknown word `rows`", 0).unwrap_err();
    assert!(
        matches!(e, TranslateError::Unparsed { answers: 1, .. }),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A stand-in that picks from the options it is shown: the last, a name that is no option, then the first.
fn picker(request: &serde_json::Value) -> (u16, String) {
    let last = request["messages"].as_array().unwrap().last().unwrap()["content"]
        .as_str()
        .unwrap()
        .to_string();
    let options: Vec<&str> = last
        .lines()
        .filter_map(|l| l.strip_prefix("- ")?.split(' ').next())
        .collect();
    (
        200,
        format!(
            "1. `{}`\n2. made-up-step\n3. {}",
            options.last().unwrap(),
            options[0]
        ),
    )
}

#[test]
fn the_proposer_orders_the_catalog_by_the_answer_and_keeps_everything_else() {
    use super::propose::{LlmProposer, ProposerStats, named};
    use crate::families::attention::fast::Schedule;
    use crate::search::{Bottleneck, Proposer, RoutedProposer, Tunable};
    use optiml_runtime::Arch;
    let server = Server::with(picker);
    let dir = scratch("propose");
    let llm = Llm::new(&settings(&server.url, Replay::Auto), &dir);
    let root = Schedule::default_for(Arch::new(9, 0));
    let routed: Vec<&str> = RoutedProposer::new(Schedule::catalog())
        .propose(&root, Bottleneck::Compute)
        .iter()
        .map(|t| t.name)
        .collect();
    assert!(routed.len() > 3, "{routed:?}");
    let proposer = LlmProposer::new(&llm, Schedule::catalog(), "attention, bf16");
    let order: Vec<&str> = proposer
        .propose(&root, Bottleneck::Compute)
        .iter()
        .map(|t| t.name)
        .collect();
    // The model's two picks first, the rest in the routed order; nothing lost, nothing added.
    let mut want = vec![*routed.last().unwrap(), routed[0]];
    want.extend(&routed[1..routed.len() - 1]);
    assert_eq!(order, want);
    assert_eq!(
        proposer.stats(),
        ProposerStats {
            asked: 1,
            replayed: 0,
            failed: 0,
            useful: 1,
            unknown_names: 1
        }
    );
    let verdicts: Vec<String> = llm
        .recorder()
        .all()
        .unwrap()
        .into_iter()
        .filter_map(|(_, e)| e.verdict)
        .collect();
    assert_eq!(verdicts, [format!("proposed {}, {}", want[0], want[1])]);
    drop(server);

    // With the server stopped the recording answers, and the order is the same.
    let offline = Llm::new(&settings("http://127.0.0.1:9/v1", Replay::Only), &dir);
    let again = LlmProposer::new(&offline, Schedule::catalog(), "attention, bf16");
    let replayed: Vec<&str> = again
        .propose(&root, Bottleneck::Compute)
        .iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(replayed, order);
    assert_eq!(again.stats().replayed, 1);
    // A node never recorded, with no endpoint: the routed order, and the failure counted.
    let other = again.propose(&root, Bottleneck::Memory);
    let memory: Vec<&str> = RoutedProposer::new(Schedule::catalog())
        .propose(&root, Bottleneck::Memory)
        .iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(other.iter().map(|t| t.name).collect::<Vec<_>>(), memory);
    assert_eq!(again.stats().failed, 1);
    std::fs::remove_dir_all(&dir).unwrap();

    // Names are read as whole words, in the order first written, whatever the list's punctuation.
    let names = ["grow-block-n", "block-n", "split-k"];
    assert_eq!(
        named(
            "**split-k**, then `grow-block-n`; not block-m-ish. block-n\n- split-k",
            &names
        ),
        (vec!["split-k", "grow-block-n", "block-n"], 1)
    );
}

/// A build whose crate declares a spec the parser refuses, with an `[llm]` table: the build script shows the
/// model's reading of it (parsed by the notation parser, after one repair) as a warning line and generates
/// nothing for it; a later build replays the recording with the server stopped; a crate without `[llm]` shows
/// none.
#[test]
fn a_refused_spec_gets_the_models_reading_as_a_build_warning() {
    let server = Server::with(translator);
    let dir = scratch("build-translation");
    std::fs::create_dir_all(dir.join("src")).unwrap();
    let manifest = "[package]\nname = \"user\"\nversion = \"0.1.0\"\nedition = \"2024\"\n";
    std::fs::write(dir.join("Cargo.toml"), manifest).unwrap();
    std::fs::write(
        dir.join("src/lib.rs"),
        "use optiml::cudarc::driver::CudaSlice;\n\
         #[optiml::kernel(\"row-wise frobnicated softmax\")]\n\
         pub fn f(x: &CudaSlice<f32>, y: &mut CudaSlice<f32>, r: usize, c: usize);\n",
    )
    .unwrap();
    let build = || {
        crate::Builder::new()
            .quiet(true)
            .offline(true)
            .arch([optiml_runtime::Arch::new(9, 0)])
            .search_time(0.0)
            .user_cache(None::<PathBuf>)
            .pretuned_cache(None::<PathBuf>)
            .compile_at(&dir, &dir.join("target/debug/build/user-0/out"))
            .unwrap_or_else(|e| panic!("{}", e.render()))
    };
    // Without [llm]: the macro's error alone.
    let report = build();
    assert_eq!(report.skipped.len(), 1, "{:?}", report.skipped);
    assert!(report.translations.is_empty(), "{:?}", report.translations);
    std::fs::write(
        dir.join("optiml.toml"),
        format!(
            "[llm]\nbase_url = \"{}\"\nmodel = \"stand-in\"\napi_key_env = \"{KEY_VAR}\"\n",
            server.url
        ),
    )
    .unwrap();
    let report = build();
    assert!(report.entries.is_empty());
    let [line] = &report.translations[..] else {
        panic!("{:?}", report.translations)
    };
    assert!(
        line.contains("src/lib.rs:3")
            && line.contains("\"row-wise frobnicated softmax\"")
            && line.contains("`y[r, c] = exp(x[r, c]) / sum(c) exp(x[r, c])`")
            && line.contains("unverified"),
        "{line}"
    );
    // Recorded under the workspace's target folder, without the key, and replayed with the server stopped.
    no_file_holds_the_key(&dir.join("target/optiml/llm"));
    drop(server);
    assert_eq!(build().translations, report.translations);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A judge that keeps an edit that made the kernel faster and discards the rest, in the seed's words, and
/// answers outside the contract to an edit named `odd`.
fn judging(request: &serde_json::Value) -> (u16, String) {
    let last = request["messages"].as_array().unwrap().last().unwrap()["content"]
        .as_str()
        .unwrap()
        .to_string();
    if last.contains("Edit: odd") {
        (200, "I am not sure.".into())
    } else if last.contains("Speed-up: 1.25") {
        (
            200,
            "KEEP 0.6 — fewer DRAM bytes on a memory-bound kernel".into(),
        )
    } else {
        (200, "**DISCARD** (score: -0.8)".into())
    }
}

#[test]
fn the_judge_reads_keep_and_discard_falls_back_on_anything_else_and_replays() {
    use super::judge::{JudgeStats, LlmJudge, read};
    use crate::search::{Edit, Judge, Measurement, Verdict};
    assert_eq!(read("KEEP 0.6"), Some(Verdict::Keep(0.6)));
    assert_eq!(read("keep: 3"), Some(Verdict::Keep(1.0)));
    assert_eq!(read("DISCARD 0.8"), Some(Verdict::Discard(-0.8)));
    assert_eq!(
        read("Verdict: discard, -0.5."),
        Some(Verdict::Discard(-0.5))
    );
    assert_eq!(read("KEEP"), None);
    assert_eq!(read("looks fine, 0.4"), None);
    let server = Server::with(judging);
    let dir = scratch("judge");
    let llm = Llm::new(&settings(&server.url, Replay::Auto), &dir);
    let judge = LlmJudge::new(&llm, "matmul, f32 at 4096x4096x4096");
    let (slow, fast) = (
        Measurement {
            time_ms: 1.25,
            ..Measurement::default()
        },
        Measurement {
            time_ms: 1.0,
            ..Measurement::default()
        },
    );
    let edit = |transform| Edit {
        transform,
        from: "tile 64x64",
        to: "tile 128x64",
    };
    assert_eq!(
        judge.judge_edit(&edit("grow-block-n"), &slow, &fast),
        Verdict::Keep(0.6)
    );
    // Slower by 20%: the model discards it, as the rule does.
    assert_eq!(
        judge.judge_edit(&edit("grow-block-n"), &fast, &slow),
        Verdict::Discard(-0.8)
    );
    // An answer outside the contract: the deterministic rule's verdict.
    assert_eq!(
        judge.judge_edit(&edit("odd"), &slow, &fast),
        crate::search::DeterministicJudge.judge(&slow, &fast)
    );
    assert_eq!(
        judge.stats(),
        JudgeStats {
            asked: 3,
            unreadable: 1,
            ..JudgeStats::default()
        }
    );
    // The prompt carries the edit and both profiles.
    let body = server.seen.lock().unwrap().last().unwrap().2.clone();
    assert!(
        body.contains("tile 64x64") && body.contains("Speed-up: 1.250x"),
        "{body}"
    );
    // Replayed with the server stopped: the same verdicts, none asked of an endpoint.
    drop(server);
    let llm = Llm::new(&settings("http://127.0.0.1:9/v1", Replay::Only), &dir);
    let again = LlmJudge::new(&llm, "matmul, f32 at 4096x4096x4096");
    assert_eq!(
        again.judge_edit(&edit("grow-block-n"), &slow, &fast),
        Verdict::Keep(0.6)
    );
    assert_eq!(again.stats().replayed, 1);
    no_file_holds_the_key(&dir);
    std::fs::remove_dir_all(&dir).unwrap();
}
