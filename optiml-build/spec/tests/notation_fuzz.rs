//! Seeded property test of the index-notation parser and the plain-words lowering: about 10^4 generated
//! strings (mutations of valid programs and phrases, 100 KB inputs, deep nesting, odd unicode, huge numbers)
//! must neither panic nor take over 100 ms each, even in a debug build; every program that parses must print
//! back to itself.

use optiml_spec::program::{notation, words};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::{Duration, Instant};

const PROGRAMS: &[&str] = &[
    "m[r] = max(c) x[r, c]; e[r, c] = exp(x[r, c] - m[r]); y[r, c] = e[r, c] / sum(c) e[r, c]",
    "y[r, c] = x[r, c] / sum(c) x[r, c], bf16, c=4096",
    "eps = 1e-5\ny[r, c] = x[r, c] / sqrt(mean(c) x[r, c]^2 + eps) * w[c]",
    "s = sum(i) x[i] * w[i]; y[i] = x[i] / s * alpha",
    "c[i, j] = sum(k) a[i, k] * b[k, j]",
    "i[r] = argmax(c) x[r, c], i32 indices",
    "y[i] = where(x[i] > 0, x[i], 0.01 * x[i]) * sqrt(2 / pi) - clamp(x[i], -1, 1) ** 2",
    "y[n] = 0.5 * x[n] * (1 + tanh(sqrt(2 / pi) * (x[n] + 0.044715 * x[n] ^ 3)))",
    "m[d0, g] = mean(k, d2, d3) x[d0, g, k, d2, d3]; v[d0, g] = mean(k, d2, d3) (x[d0, g, k, d2, d3] - m[d0, g]) ^ 2; \
     y[d0, g, k, d2, d3] = (x[d0, g, k, d2, d3] - m[d0, g]) / sqrt(v[d0, g] + 1e-5), g=8",
    "y[r] = -sum(c) x[r, c] * 2; z[r] = (-sum(c) x[r, c]) * 2; w[r] = (sum(c) x[r, c]) ^ 2",
    "c = 64; y[r, c] = x[r, c] * g[] + relu(x[r, c]) >= 0.5, f16",
];

/// Characters mutations insert: the notation's own, odd unicode, controls, and lookalikes.
const ALPHABET: &[char] = &[
    'x', 'y', 'i', 'c', 'r', 'e', '_', '0', '1', '9', '.', '[', ']', '(', ')', ',', ';', '=', '+',
    '-', '*', '/', '^', '<', '>', '!', ' ', '\n', '\t', '\r', '\0', 'ᵀ', '·', '×', '−', '≤', '≠',
    'é', 'Σ', '𝔁', '\u{202e}', '\u{feff}', '\u{200b}', '"', '\'', '@', '#', '{', '}', '\\', '💥',
];

/// Fragments mutations insert: tokens that change the structure.
const FRAGMENTS: &[&str] = &[
    "sum(c) ",
    "max(",
    "mean(c, r) ",
    "argmax(c) ",
    "[",
    "]",
    "(",
    ")",
    ", ",
    "; ",
    "\n",
    " = ",
    "**",
    "^ -",
    "1e999999",
    "1e-999999",
    "123456789012345678901234567890",
    ".5e",
    "0x1F",
    "pi",
    "inf",
    "nan",
    "__",
    "exp(",
    "where(",
    ", bf16",
    ", c=0",
    ", i32 indices",
    "x[r, c]",
    "x[c, r]",
    "y[r] = ",
    "eps = 1e-5; ",
    "type",
    "over the last axis",
    "dim=-1",
    "keep dims",
    "groups 8",
    "matmul",
    "y = ",
];

fn mutate(rng: &mut StdRng, seed: &str, all: &[String]) -> String {
    let mut s: Vec<char> = seed.chars().collect();
    for _ in 0..rng.random_range(1..=4) {
        let at = if s.is_empty() {
            0
        } else {
            rng.random_range(0..=s.len())
        };
        match rng.random_range(0..9) {
            0 if at < s.len() => {
                s.remove(at);
            }
            1 if at < s.len() => {
                let c = s[at];
                s.insert(at, c);
            }
            2 if at + 1 < s.len() => s.swap(at, at + 1),
            3 => s.insert(at, ALPHABET[rng.random_range(0..ALPHABET.len())]),
            4 => {
                let f = FRAGMENTS[rng.random_range(0..FRAGMENTS.len())];
                s.splice(at..at, f.chars());
            }
            5 => s.truncate(at),
            6 => {
                let other = &all[rng.random_range(0..all.len())];
                s.splice(at..at, other.chars());
            }
            7 if at < s.len() => {
                let end = rng.random_range(at..=s.len());
                let piece: Vec<char> = s[at..end].to_vec();
                s.splice(end..end, piece);
            }
            _ => {
                if let Some(d) = s.iter().position(|c| c.is_ascii_digit()) {
                    s.splice(d..d, "9".repeat(rng.random_range(1..400)).chars());
                }
            }
        }
    }
    s.into_iter().collect()
}

/// Large and pathological inputs.
fn monsters(rng: &mut StdRng) -> Vec<String> {
    const K: usize = 100_000;
    let fill = |unit: &str| unit.repeat(K / unit.len().max(1) + 1);
    let mut out = vec![
        fill("("),
        fill(")"),
        fill("["),
        fill("-"),
        format!("y[i] = {}x[i]", fill("-")),
        format!("y[i] = {}x[i]{}", "(".repeat(K / 2), ")".repeat(K / 2)),
        format!("y[i] = {}", fill("x[i] + ")),
        format!("y[i] = {}", fill("x[i] ^ ")),
        format!("y[i] = {}x[i]", fill("exp(")),
        format!("y[r] = {}x[r, c]", fill("sum(c) ")),
        format!("y[r] = x[r, c] * {}", fill("max(a, ")),
        format!("y[i] = x[i] * {}", fill("9")),
        format!("y[i] = x[i] * 1e{}", fill("9")),
        format!("y[i] = x[i] * 0.{}1", fill("0")),
        format!("y[i] = {}[i]", fill("x")),
        format!("{}[i] = x[i]", fill("y")),
        format!("y[{}] = x[i]", fill("i, ")),
        format!("y[i] = x[{}]", fill("i, ")),
        format!("y[i] = max({}) x[i]", fill("a, ")),
        format!("y[i] = x[i], {}", fill("bf16, ")),
        fill("y[i] = x[i]; "),
        fill("y[i] = x[i]\n"),
        fill("\n"),
        fill("x[r]\n, "),
        fill("a[\n"),
        fill("y = "),
        fill("softmax "),
        fill("over the last axis "),
        fill("eps 1e-5 "),
        fill("min -1 max 1 "),
        format!("softmax {}", fill("lst ")),
        format!("relu {}", fill("9")),
        format!("sum over {}", fill("dim 1 ")),
        fill("a "),
        fill("💥"),
        fill("é"),
        fill("\u{202e}x"),
    ];
    let chain: Vec<String> = (0..4000)
        .map(|k| format!("t{}[i] = t{k}[i] * 2", k + 1))
        .collect();
    out.push(format!("t0[i] = x[i]; {}", chain.join("; ")));
    let wide: Vec<String> = (0..4000)
        .map(|k| format!("t{k}[i] = x{k}[i] + p{k}"))
        .collect();
    out.push(wide.join("\n"));
    let lifted: Vec<String> = (0..3000).map(|k| format!("sum(c) x{k}[r, c]")).collect();
    out.push(format!("y[r, c] = x[r, c] / ({})", lifted.join(" + ")));
    let random: String = (0..K)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())])
        .collect();
    out.push(random);
    let bytes: String = (0..K)
        .map(|_| char::from_u32(rng.random_range(0..0x11_0000)).unwrap_or('?'))
        .collect();
    out.push(bytes);
    out
}

/// Runs `f` on `input`, checks it does not panic, and returns the fastest of up to three runs (a busy machine
/// can stall one run; a parser that is not linear is slow every time).
fn timed(what: &str, input: &str, f: &dyn Fn(&str)) -> Duration {
    let mut best = Duration::MAX;
    for _ in 0..3 {
        let start = Instant::now();
        let outcome = catch_unwind(AssertUnwindSafe(|| f(input)));
        let took = start.elapsed();
        assert!(outcome.is_ok(), "{what} panicked on {:?}", shorten(input));
        best = best.min(took);
        if best < Duration::from_millis(100) {
            break;
        }
    }
    best
}

fn shorten(s: &str) -> String {
    if s.chars().count() > 200 {
        let head: String = s.chars().take(200).collect();
        format!("{head}… ({} chars)", s.chars().count())
    } else {
        s.to_string()
    }
}

/// Properties of a program that parsed: it prints back to itself, and its canonical form is a fixed point.
fn check_program(text: &str, p: &optiml_spec::program::Program) {
    let shown = p.to_string();
    assert_eq!(
        notation::parse(&shown).as_ref(),
        Ok(p),
        "{:?} printed as {:?}",
        shorten(text),
        shorten(&shown)
    );
    let canonical = p.canonical();
    let again = notation::parse(&canonical).map(|q| q.canonical());
    assert_eq!(again.as_ref(), Ok(&canonical), "{:?}", shorten(text));
    let _ = notation::explain(p);
    let _ = notation::contraction(p);
}

#[test]
fn no_input_panics_or_takes_long() {
    let mut rng = StdRng::seed_from_u64(0x0971_3f2a);
    let mut seeds: Vec<String> = PROGRAMS.iter().map(|s| s.to_string()).collect();
    for (_, example, form) in words::vocabulary() {
        seeds.push(example.to_string());
        seeds.push(form);
    }
    seeds.extend(
        [
            "softmax over the last axis, bf16",
            "layer norm over the last 3 axes of a 4-D tensor with affine weight and bias, eps=1e-6",
            "hardtanh(min_val=-2., max_val=2.)",
            "leaky_relu(x, negative_slope=0.2)",
            "argmax over dim=1 of a 3d tensor, int32 indices",
            "matmul, f32",
            "y = x * s",
        ]
        .map(String::from),
    );
    let mut inputs: Vec<String> = seeds.clone();
    while inputs.len() < 10_000 {
        let seed = &seeds[rng.random_range(0..seeds.len())];
        inputs.push(mutate(&mut rng, seed, &seeds));
    }
    inputs.extend(monsters(&mut rng));
    let limit = Duration::from_millis(100);
    let (mut parsed, mut lowered) = (0, 0);
    for input in &inputs {
        let took = timed("notation::parse", input, &|t| {
            let _ = notation::is_notation(t);
            let _ = notation::parse(t);
        });
        assert!(
            took < limit,
            "notation::parse took {took:?} on {:?}",
            shorten(input)
        );
        let took = timed("words::lower", input, &|t| {
            let _ = words::lower(t);
        });
        assert!(
            took < limit,
            "words::lower took {took:?} on {:?}",
            shorten(input)
        );
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            if let Ok(p) = notation::parse(input) {
                parsed += 1;
                check_program(input, &p);
            }
            if let Some(Ok(p)) = words::lower(input) {
                lowered += 1;
                check_program(input, &p);
            }
        }));
        assert!(
            outcome.is_ok(),
            "printing or re-parsing panicked on {:?}",
            shorten(input)
        );
    }
    // The mutations must reach the parsers' successful paths too, not only their first error.
    assert!(parsed > 500, "only {parsed} inputs parsed");
    assert!(lowered > 300, "only {lowered} inputs lowered");
}
