//! OptiML-G's experts and its router (seed §2.1): each expert is a description and a system prompt; the router
//! embeds a request and takes the top-K experts by cosine similarity, optionally with Gumbel noise (τ = 0.5, as
//! the seed trains its router), seeded so a run can be repeated.
//!
//! The embeddings come from the endpoint where it has them; otherwise (a server without `/embeddings`, or one
//! that answers a vector per token) from [`builtin_embedding`], a hashed bag of words and character trigrams,
//! which needs no model and gives the same vector everywhere.

use super::{Llm, LlmError};
use crate::search::splitmix;
use serde::Deserialize;
use std::collections::BTreeMap;

/// One expert: what it is good at (what the router compares a request with) and how it is instructed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expert {
    /// Its name, for logs and recordings.
    pub name: String,
    /// What it is good at, in words.
    pub description: String,
    /// Its system prompt.
    pub prompt: String,
}

/// `[llm.experts.<name>]`: an expert of the user's, beside the built-in ones (or in place of one of the same
/// name).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpertSettings {
    /// What it is good at.
    pub description: String,
    /// Its system prompt.
    pub prompt: String,
}

/// What every expert's prompt starts with: the contract every kernel is held to.
const COMMON: &str = "You write one CUDA C++ kernel for NVIDIA GPUs, compiled by NVRTC with no host code. Answer \
with a single ```cuda fenced block holding only device code: no #include (the CUDA built-ins are there), no main, \
no host functions, no printf, no file access. The kernel is checked element by element against a float64 \
reference and rejected on any mismatch, so correctness comes first: guard every index, handle every size, and \
never assume the grid covers the problem exactly.";

/// The built-in experts: memory-bound kernels, tensor-core kernels, reductions and scans, and a numerics and
/// correctness reviewer.
pub fn builtin() -> Vec<Expert> {
    let expert = |name: &str, description: &str, focus: &str| Expert {
        name: name.into(),
        description: description.into(),
        prompt: format!("{COMMON} {focus}"),
    };
    vec![
        expert(
            "memory-bound",
            "elementwise maps, broadcasts, copies, transposes, gathers: kernels limited by DRAM bandwidth, where \
             coalesced 16-byte accesses, grid-stride loops and enough bytes in flight decide the speed",
            "You specialise in memory-bound kernels: coalesced and vectorised (float4) loads and stores where \
             alignment allows, a scalar path where it does not, grid-stride loops, and no wasted bytes.",
        ),
        expert(
            "tensor-cores",
            "matrix multiplication, batched matmul, attention, convolution as GEMM: dense products on tensor \
             cores (mma.sync, wgmma) with shared-memory tiling, TF32, bf16 and fp16 operands",
            "You specialise in dense linear algebra: shared-memory tiling, register blocking, mma.sync tensor-core \
             instructions where the precision allows, double buffering with cp.async, and bank-conflict-free layouts.",
        ),
        expert(
            "reductions-and-scans",
            "sums, means, max, argmax, norms, softmax, layer norm, cumulative sums and products: reductions over \
             an axis and prefix scans, warp shuffles, block and cluster reductions",
            "You specialise in reductions and scans: warp shuffles, one block or warp per row, a fixed reduction \
             order so that results repeat bit for bit, online softmax, and numerically careful accumulation.",
        ),
        expert(
            "numerics-reviewer",
            "numerical accuracy and correctness review: overflow, underflow, NaN and infinity, cancellation, \
             fp16 and bf16 ranges, boundary conditions, index arithmetic in 64 bits",
            "You review kernels for numerical and boundary correctness first: 64-bit index arithmetic, \
             max-subtracted exponentials, compensated or wider accumulation where it matters, and every edge case \
             (empty dimensions, odd sizes, misaligned rows).",
        ),
    ]
}

/// The built-in experts with the user's `[llm.experts]` added (one of a built-in name replaces it).
pub fn with_user(user: &BTreeMap<String, ExpertSettings>) -> Vec<Expert> {
    let mut experts = builtin();
    for (name, e) in user {
        let expert = Expert {
            name: name.clone(),
            description: e.description.clone(),
            prompt: format!("{COMMON} {}", e.prompt),
        };
        match experts.iter_mut().find(|x| x.name == *name) {
            Some(x) => *x = expert,
            None => experts.push(expert),
        }
    }
    experts
}

/// Dimensions of [`builtin_embedding`].
pub const BUILTIN_DIMS: usize = 512;

/// A vector for `text` that needs no model: its lower-case words and their character trigrams, hashed into
/// [`BUILTIN_DIMS`] buckets (words count twice), normalised to length 1. Texts that share words and word parts
/// point the same way.
pub fn builtin_embedding(text: &str) -> Vec<f32> {
    let mut v = vec![0f32; BUILTIN_DIMS];
    let mut add = |s: &str, weight: f32| {
        let h = optiml_spec::sha256_hex(s.as_bytes());
        let bucket = usize::from_str_radix(&h[..8], 16).unwrap_or(0) % BUILTIN_DIMS;
        v[bucket] += weight;
    };
    for word in text
        .to_lowercase()
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        add(word, 2.0);
        let padded: Vec<char> = format!(" {word} ").chars().collect();
        for t in padded.windows(3) {
            add(&t.iter().collect::<String>(), 1.0);
        }
    }
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
    v
}

/// Cosine similarity (0 for a zero vector or vectors of different lengths).
pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    if a.len() != b.len() {
        return 0.0;
    }
    let dot: f64 = a
        .iter()
        .zip(b)
        .map(|(x, y)| f64::from(*x) * f64::from(*y))
        .sum();
    let na: f64 = a.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    let nb: f64 = b.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        dot / (na * nb)
    }
}

/// Where the router's vectors came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Embeddings {
    /// The endpoint's `/embeddings`.
    Endpoint,
    /// [`builtin_embedding`].
    BuiltIn,
}

/// Gumbel noise on the router's scores: `cosine / tau + Gumbel(0, 1)`, drawn from `seed`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Gumbel {
    /// Temperature (the seed's τ = 0.5).
    pub tau: f64,
    /// Seed of the noise.
    pub seed: u64,
}

/// The experts with their vectors.
#[derive(Clone, Debug)]
pub struct Router {
    experts: Vec<Expert>,
    vectors: Vec<Vec<f32>>,
    embeddings: Embeddings,
}

impl Router {
    /// A router over `experts`, embedding their descriptions with `llm`'s endpoint where it answers one vector
    /// per text, else with [`builtin_embedding`].
    pub fn new(experts: Vec<Expert>, llm: Option<&Llm>) -> Self {
        let texts: Vec<String> = experts.iter().map(|e| e.description.clone()).collect();
        if let Some(llm) = llm
            && let Ok(a) = llm.embed(&texts)
        {
            return Router {
                experts,
                vectors: a.value,
                embeddings: Embeddings::Endpoint,
            };
        }
        Router {
            vectors: texts.iter().map(|t| builtin_embedding(t)).collect(),
            experts,
            embeddings: Embeddings::BuiltIn,
        }
    }

    /// Where its vectors came from.
    pub fn embeddings(&self) -> Embeddings {
        self.embeddings
    }

    /// The experts.
    pub fn experts(&self) -> &[Expert] {
        &self.experts
    }

    /// The vector of `request`, from the same source as the experts'.
    ///
    /// # Errors
    /// [`LlmError`] when the endpoint embedded the experts but fails on the request.
    pub fn embed(&self, request: &str, llm: Option<&Llm>) -> Result<Vec<f32>, LlmError> {
        match (self.embeddings, llm) {
            (Embeddings::Endpoint, Some(llm)) => Ok(llm
                .embed(&[request.to_string()])?
                .value
                .into_iter()
                .next()
                .unwrap_or_default()),
            _ => Ok(builtin_embedding(request)),
        }
    }

    /// The `k` experts nearest `request` (a vector from [`Router::embed`]), best first, with their cosine
    /// similarity; with `gumbel`, ranked by the noisy score instead (a seeded draw, so a run repeats).
    pub fn route(&self, request: &[f32], k: usize, gumbel: Option<Gumbel>) -> Vec<(&Expert, f64)> {
        let mut state = gumbel.map_or(0, |g| g.seed);
        let mut scored: Vec<(usize, f64, f64)> = self
            .vectors
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let sim = cosine(request, v);
                let score = match gumbel {
                    Some(g) => {
                        // A uniform draw in (0, 1), then the standard Gumbel's inverse CDF.
                        state = splitmix(state);
                        let u = ((state >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
                        sim / g.tau - (-u.ln()).ln()
                    }
                    None => sim,
                };
                (i, sim, score)
            })
            .collect();
        scored.sort_by(|a, b| b.2.total_cmp(&a.2).then(a.0.cmp(&b.0)));
        scored
            .into_iter()
            .take(k)
            .map(|(i, sim, _)| (&self.experts[i], sim))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_router_sends_each_kind_of_request_to_its_expert() {
        let router = Router::new(builtin(), None);
        assert_eq!(router.embeddings(), Embeddings::BuiltIn);
        for (request, expert) in [
            (
                "softmax over the last axis, a reduction of each row",
                "reductions-and-scans",
            ),
            ("batched matmul with tensor cores, bf16", "tensor-cores"),
            (
                "elementwise relu map over a tensor, bandwidth bound",
                "memory-bound",
            ),
            (
                "cumulative sum along dim 1 (a prefix scan)",
                "reductions-and-scans",
            ),
        ] {
            let v = router.embed(request, None).unwrap();
            let top = router.route(&v, 2, None);
            assert_eq!(top.len(), 2);
            assert_eq!(top[0].0.name, expert, "{request}: {top:?}");
            assert!(top[0].1 >= top[1].1);
        }
    }

    #[test]
    fn gumbel_routing_repeats_with_its_seed_and_explores_across_seeds() {
        let router = Router::new(builtin(), None);
        let v = router.embed("layer norm over the last axis", None).unwrap();
        let pick = |seed| {
            router
                .route(&v, 2, Some(Gumbel { tau: 0.5, seed }))
                .iter()
                .map(|(e, _)| e.name.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(pick(7), pick(7));
        let distinct: std::collections::BTreeSet<Vec<String>> = (0..64).map(pick).collect();
        assert!(distinct.len() > 1, "64 seeds always chose {distinct:?}");
    }

    #[test]
    fn user_experts_join_or_replace_the_built_in_ones() {
        let mut user = BTreeMap::new();
        user.insert(
            "memory-bound".to_string(),
            ExpertSettings {
                description: "our own copies".into(),
                prompt: "Use our conventions.".into(),
            },
        );
        user.insert(
            "stencils".to_string(),
            ExpertSettings {
                description: "stencils and convolutions over grids".into(),
                prompt: "Tile with halos.".into(),
            },
        );
        let experts = with_user(&user);
        assert_eq!(experts.len(), 5);
        let mem = experts.iter().find(|e| e.name == "memory-bound").unwrap();
        assert_eq!(mem.description, "our own copies");
        assert!(mem.prompt.starts_with(COMMON) && mem.prompt.ends_with("Use our conventions."));
        let router = Router::new(experts, None);
        let v = router.embed("a 5-point stencil over a grid", None).unwrap();
        assert_eq!(router.route(&v, 1, None)[0].0.name, "stencils");
    }

    #[test]
    fn cosine_of_degenerate_vectors_is_zero() {
        assert_eq!(cosine(&[0.0, 0.0], &[1.0, 0.0]), 0.0);
        assert_eq!(cosine(&[1.0], &[1.0, 0.0]), 0.0);
        assert!((cosine(&[1.0, 2.0], &[2.0, 4.0]) - 1.0).abs() < 1e-12);
    }
}
