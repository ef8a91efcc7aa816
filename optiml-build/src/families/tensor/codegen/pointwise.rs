//! Pointwise programs: a grid-stride loop over the output elements, every intermediate inlined as a local. The
//! grid is either a few blocks per SM that loop, or one pass (a block per `threads × unroll` chunks, whose loop
//! runs once).
//!
//! Flat programs (every tensor has the output's axes, or none) take one flat index for all tensors and move
//! 16-byte chunks (4 f32 or 8 16-bit elements) when every buffer has the same address modulo 16: a scalar head
//! reaches the boundary, `unroll` chunks per tensor are in flight per thread, a scalar tail finishes. Broadcasting
//! programs decompose the index into the coordinates the smaller tensors need (32-bit arithmetic when the element
//! count allows); when the innermost dimension is every tensor's last axis (or absent from it) and its extent a
//! multiple of the chunk, they move chunks too, a broadcast tensor contributing one element per chunk.
//!
//! In-place use (an output buffer equal to an input buffer of the same shape) is safe: each element is read
//! before it is written, by the same thread, and no pointer is `__restrict__`.

use super::classify::PointwiseShape;
use super::emit::{self, Code, Env};
use crate::experts::Candidate;
use crate::search::{Bottleneck, Transform, Tunable};
use optiml_runtime::{Arch, Launch, ProgramLaunch};
use optiml_spec::program::{Expr, Program};

/// Launch shape and loop depth of the pointwise kernel: what the search transforms.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
// A recorded schedule reads as this kernel's only if it has no other kernel's fields.
#[serde(deny_unknown_fields)]
pub struct PointwiseSchedule {
    /// Threads per block.
    pub threads: u32,
    /// Resident blocks per SM the grid is sized for (the kernel loops over the rest); 0: one pass, a block per
    /// `threads × unroll` chunks, each thread's loop running once (as PyTorch's elementwise kernels launch).
    pub blocks_per_sm: u32,
    /// Independent 16-byte loads per tensor in flight per thread.
    pub unroll: u32,
}

const THREADS: [u32; 4] = [128, 256, 512, 1024];
const BLOCKS_PER_SM: [u32; 7] = [0, 1, 2, 4, 8, 16, 32];
const UNROLL: [u32; 4] = [1, 2, 4, 8];

impl PointwiseSchedule {
    /// The default for `shape`'s program: [`Tunable::default_for`] for maps of a few instructions per element;
    /// maps with exponentials, logarithms, general powers or divisions take two chunks per thread, so each
    /// thread's arithmetic on one overlaps the other's load. Measured on the H200
    /// (`full_size_maps_across_launch_shapes`, 4096 × 393216 f32, one pass of 128 threads): sigmoid at 4.24 TB/s
    /// against 4.02 with one chunk; relu at 4.30 TB/s with one chunk, 4.24 with two.
    pub fn for_program(shape: &PointwiseShape, arch: Arch) -> Self {
        let heavy = shape
            .program
            .stmts
            .iter()
            .any(|s| emit::transcendental(&s.expr) || divides(&s.expr));
        let s = Self::default_for(arch);
        if heavy {
            PointwiseSchedule {
                unroll: s.unroll * 2,
                ..s
            }
        } else {
            s
        }
    }
}

/// Whether `e` divides (about a dozen instructions per element where the divisor varies).
fn divides(e: &Expr) -> bool {
    use optiml_spec::program::Binary;
    match e {
        Expr::Binary(op, a, b) => *op == Binary::Div || divides(a) || divides(b),
        Expr::Unary(_, a) => divides(a),
        Expr::Select(c, a, b) => divides(c) || divides(a) || divides(b),
        Expr::Reduce(_, _, b) | Expr::Scan(_, b) => divides(b),
        Expr::Const(_) | Expr::Param(_) | Expr::Input(_) | Expr::Value(_) | Expr::Gather(..) => {
            false
        }
    }
}

impl Tunable for PointwiseSchedule {
    /// `256 threads, 8 blocks/SM, unroll 4`, or `256 threads, one pass, unroll 4`.
    fn describe(&self) -> String {
        let grid = if self.blocks_per_sm == 0 {
            "one pass".to_string()
        } else {
            format!("{} blocks/SM", self.blocks_per_sm)
        };
        format!("{} threads, {grid}, unroll {}", self.threads, self.unroll)
    }

    /// 128 to 1024 threads, one pass or a looping grid of at most two waves of 2048 threads per SM (more only
    /// queues blocks), 1 to 8 chunks in flight.
    fn is_valid(&self) -> bool {
        THREADS.contains(&self.threads)
            && BLOCKS_PER_SM.contains(&self.blocks_per_sm)
            && self.threads * self.blocks_per_sm <= 4096
            && UNROLL.contains(&self.unroll)
    }

    /// One pass of 128-thread blocks, one 16-byte chunk per tensor per thread: blocks retire and fresh ones
    /// start, as PyTorch's eager maps launch. Measured on the H200 (`full_size_maps_across_launch_shapes`, relu
    /// over 4096 × 393216 f32): 4.30 TB/s, the copy bandwidth, against 4.00 TB/s for the looping grid of two
    /// 256-thread blocks per SM with 4 chunks in flight (the default before, and the best looping grid of that
    /// sweep), whose threads issue their next loads only after their stores.
    fn default_for(_arch: Arch) -> Self {
        PointwiseSchedule {
            threads: 128,
            blocks_per_sm: 0,
            unroll: 1,
        }
    }

    fn space() -> Vec<Self> {
        let mut out = Vec::new();
        for threads in THREADS {
            for blocks_per_sm in BLOCKS_PER_SM {
                for unroll in UNROLL {
                    let s = PointwiseSchedule {
                        threads,
                        blocks_per_sm,
                        unroll,
                    };
                    if s.is_valid() {
                        out.push(s);
                    }
                }
            }
        }
        out
    }

    fn catalog() -> Vec<Transform<Self>> {
        vec![
            Transform {
                name: "wider-blocks",
                rationale: "twice the threads per block, half the blocks per SM: the same residency in fewer, larger \
                            blocks (fewer block launches and tail effects)",
                addresses: Bottleneck::Mixed,
                claimed_gain: 1.02,
                apply: |s| {
                    Some(PointwiseSchedule {
                        threads: s.threads * 2,
                        blocks_per_sm: if s.blocks_per_sm == 0 {
                            0
                        } else {
                            (s.blocks_per_sm / 2).max(1)
                        },
                        ..*s
                    })
                },
            },
            Transform {
                name: "narrower-blocks",
                rationale: "half the threads per block, twice the blocks per SM: finer load balance across SMs",
                addresses: Bottleneck::Mixed,
                claimed_gain: 1.02,
                apply: |s| {
                    Some(PointwiseSchedule {
                        threads: s.threads / 2,
                        blocks_per_sm: s.blocks_per_sm * 2,
                        ..*s
                    })
                },
            },
            Transform {
                name: "more-blocks-per-sm",
                rationale: "a grid of more resident threads keeps more 16-byte loads in flight per SM (memory-level \
                            parallelism), the lever of a bandwidth-bound loop",
                addresses: Bottleneck::Memory,
                claimed_gain: 1.05,
                apply: |s| {
                    (s.blocks_per_sm > 0).then_some(PointwiseSchedule {
                        blocks_per_sm: s.blocks_per_sm * 2,
                        ..*s
                    })
                },
            },
            Transform {
                name: "fewer-blocks-per-sm",
                rationale: "a smaller grid makes each thread loop longer: fewer blocks to schedule, and the \
                            registers of deeper unrolling fit",
                addresses: Bottleneck::Memory,
                claimed_gain: 1.03,
                apply: |s| {
                    (s.blocks_per_sm > 1).then_some(PointwiseSchedule {
                        blocks_per_sm: s.blocks_per_sm / 2,
                        ..*s
                    })
                },
            },
            Transform {
                name: "one-pass-grid",
                rationale: "a block per threads × unroll chunks and no loop: blocks retire and fresh ones start, so \
                            no thread's next loads wait behind its previous stores",
                addresses: Bottleneck::Memory,
                claimed_gain: 1.04,
                apply: |s| {
                    (s.blocks_per_sm > 0).then_some(PointwiseSchedule {
                        blocks_per_sm: 0,
                        ..*s
                    })
                },
            },
            Transform {
                name: "looping-grid",
                rationale: "a grid of two blocks per SM that loop over the elements: fewer block launches, and \
                            scalar inputs loaded once per thread",
                addresses: Bottleneck::Mixed,
                claimed_gain: 1.02,
                apply: |s| {
                    (s.blocks_per_sm == 0).then_some(PointwiseSchedule {
                        blocks_per_sm: 2,
                        ..*s
                    })
                },
            },
            Transform {
                name: "deeper-unroll",
                rationale: "twice the independent 16-byte loads per thread before the first use: more bytes in \
                            flight without more threads",
                addresses: Bottleneck::Memory,
                claimed_gain: 1.04,
                apply: |s| {
                    Some(PointwiseSchedule {
                        unroll: s.unroll * 2,
                        ..*s
                    })
                },
            },
            Transform {
                name: "shallower-unroll",
                rationale: "half the loads per step: fewer registers (more resident warps) and a shorter scalar \
                            remainder for programs with many inputs",
                addresses: Bottleneck::Mixed,
                claimed_gain: 1.02,
                apply: |s| {
                    Some(PointwiseSchedule {
                        unroll: s.unroll / 2,
                        ..*s
                    })
                },
            },
        ]
    }
}

impl PointwiseSchedule {
    /// The candidate computing `shape`'s program.
    pub fn candidate(&self, shape: &PointwiseShape) -> Candidate {
        let p = &shape.program;
        let describe = self.describe();
        let v = emit::vec_width(p.dtype);
        let mut c = emit::prologue(p, "pointwise", &describe);
        c.line(format!("#define OPTIML_UNROLL {}", self.unroll));
        c.line("");
        emit::entry(&mut c, p, &self.threads.to_string());
        body(&mut c, shape);
        c.close("}");
        Candidate {
            source: c.finish(),
            entry: "optiml_program",
            launch: Launch::Program(ProgramLaunch {
                threads: self.threads,
                smem_bytes: 0,
                items_mask: emit::mask(shape.items.iter().copied()),
                items_per_block: self.threads * self.unroll * v,
                max_blocks_per_sm: self.blocks_per_sm,
                cluster: 1,
                nonempty_mask: 0,
                tree: None,
            }),
            schedule: describe,
        }
    }
}

/// How a tensor is addressed from the flat output index.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Access {
    /// Exactly the output's axes: the flat index.
    Flat,
    /// No axes: one element, loaded once.
    Scalar,
    /// Anything else: the coordinates it needs.
    Strided,
}

struct Plan<'a> {
    p: &'a Program,
    items: &'a [usize],
    inputs: Vec<Access>,
    /// (statement index, output ordinal, access).
    outputs: Vec<(usize, usize, Access)>,
}

impl<'a> Plan<'a> {
    fn new(shape: &'a PointwiseShape) -> Self {
        let p = &shape.program;
        let items = shape.items.as_slice();
        let access = |axes: &[usize]| {
            if axes == items {
                Access::Flat
            } else if axes.is_empty() {
                Access::Scalar
            } else {
                Access::Strided
            }
        };
        let ord = emit::output_ordinals(p);
        Plan {
            p,
            items,
            inputs: p.inputs.iter().map(|t| access(&t.axes)).collect(),
            outputs: p
                .stmts
                .iter()
                .enumerate()
                .filter_map(|(j, s)| ord[j].map(|k| (j, k, access(&s.axes))))
                .collect(),
        }
    }

    /// Every tensor read or written per element, with its axes: inputs as `in{k}`, outputs as `out{k}`.
    fn tensors(&self) -> Vec<(String, &'a [usize], Access)> {
        let mut t: Vec<(String, &[usize], Access)> = Vec::new();
        for (k, a) in self.inputs.iter().enumerate() {
            t.push((format!("in{k}"), &self.p.inputs[k].axes, *a));
        }
        for &(j, k, a) in &self.outputs {
            t.push((format!("out{k}"), &self.p.stmts[j].axes, a));
        }
        t
    }
}

/// Inputs read from per-element locals `x{k}{suffix}`, scalar inputs from `si{k}`, statements from `v{j}`.
struct Locals<'a> {
    plan: &'a Plan<'a>,
    suffix: &'static str,
}

impl Env for Locals<'_> {
    fn input(&self, k: usize) -> String {
        match self.plan.inputs[k] {
            Access::Scalar => format!("si{k}"),
            Access::Flat | Access::Strided => format!("x{k}{}", self.suffix),
        }
    }
    fn value(&self, j: usize) -> String {
        format!("v{j}")
    }
    fn fast(&self) -> bool {
        self.plan.p.dtype != optiml_spec::DType::F32
    }
    fn invariant(&self, e: &Expr) -> bool {
        emit::leaves_all(
            e,
            &|leaf| matches!(leaf, Expr::Input(k) if self.plan.inputs[*k] == Access::Scalar),
        )
    }
}

/// The statements at one element, given the inputs as `Locals` name them.
fn compute(c: &mut Code, plan: &Plan<'_>, suffix: &'static str) {
    let env = Locals { plan, suffix };
    for (j, s) in plan.p.stmts.iter().enumerate() {
        c.line(format!("const float v{j} = {};", emit::expr(&s.expr, &env)));
    }
}

fn body(c: &mut Code, shape: &PointwiseShape) {
    let plan = Plan::new(shape);
    let p = plan.p;
    c.line(format!(
        "const long long total = {};",
        emit::product(plan.items)
    ));
    c.line("const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;");
    c.line("const long long nth = (long long)gridDim.x * blockDim.x;");
    c.line("if (total <= 0) return;");
    for (k, a) in plan.inputs.iter().enumerate() {
        if *a == Access::Scalar {
            c.line(format!("const float si{k} = IO::get(in{k}[0]);"));
        }
    }
    for k in 0..p.params.len() {
        c.line(format!("(void)p{k};"));
    }
    if shape.flat {
        flat(c, &plan);
    } else {
        strided(c, &plan);
    }
}

/// Elements `[begin, end)` one at a time, flat index `e`.
fn flat_scalar_range(c: &mut Code, plan: &Plan<'_>, begin: &str, end: &str) {
    c.open(format!(
        "for (long long e = {begin} + tid; e < {end}; e += nth) {{"
    ));
    for (k, a) in plan.inputs.iter().enumerate() {
        if *a == Access::Flat {
            c.line(format!("const float x{k} = IO::get(in{k}[e]);"));
        }
    }
    compute(c, plan, "");
    for &(j, k, _) in &plan.outputs {
        c.line(format!("out{k}[e] = IO::put(v{j});"));
    }
    c.close("}");
}

fn flat(c: &mut Code, plan: &Plan<'_>) {
    let flat_names: Vec<String> = plan
        .tensors()
        .into_iter()
        .filter(|t| t.2 == Access::Flat)
        .map(|t| t.0)
        .collect();
    // Every buffer at the same address modulo 16, and element-aligned: a scalar head reaches the 16-byte boundary
    // for all of them at once.
    c.line(format!(
        "const unsigned long long a0 = reinterpret_cast<unsigned long long>({}) & 15ull;",
        flat_names[0]
    ));
    let mut same = vec!["(a0 % sizeof(T)) == 0ull".to_string()];
    for n in &flat_names[1..] {
        same.push(format!(
            "(reinterpret_cast<unsigned long long>({n}) & 15ull) == a0"
        ));
    }
    c.line(format!("const bool vec = {};", same.join(" && ")));
    c.open("if (!vec) {");
    flat_scalar_range(c, plan, "0", "total");
    c.line("return;");
    c.close("}");
    c.line("long long head = (long long)(((16ull - a0) & 15ull) / sizeof(T));");
    c.line("if (head > total) head = total;");
    flat_scalar_range(c, plan, "0", "head");
    c.line("const long long nv = (total - head) / IO::V;");
    c.line("long long g = tid;");
    for (u, guard) in [
        ("OPTIML_UNROLL", "g + (OPTIML_UNROLL - 1) * nth < nv"),
        ("1", "g < nv"),
    ] {
        c.open(format!("for (; {guard}; g += {u} * nth) {{"));
        for (k, a) in plan.inputs.iter().enumerate() {
            if *a == Access::Flat {
                c.line(format!("uint4 c{k}[{u}];"));
            }
        }
        c.line("#pragma unroll");
        c.open(format!("for (int u = 0; u < {u}; ++u) {{"));
        for (k, a) in plan.inputs.iter().enumerate() {
            if *a == Access::Flat {
                c.line(format!(
                    "c{k}[u] = *reinterpret_cast<const uint4*>(in{k} + head + (g + u * nth) * IO::V);"
                ));
            }
        }
        c.close("}");
        c.line("#pragma unroll");
        c.open(format!("for (int u = 0; u < {u}; ++u) {{"));
        for (k, a) in plan.inputs.iter().enumerate() {
            if *a == Access::Flat {
                c.line(format!("float x{k}[IO::V];"));
                c.line(format!("IO::unpack(c{k}[u], x{k});"));
            }
        }
        for &(_, k, _) in &plan.outputs {
            c.line(format!("float y{k}[IO::V];"));
        }
        c.line("#pragma unroll");
        c.open("for (int l = 0; l < IO::V; ++l) {");
        compute(c, plan, "[l]");
        for &(j, k, _) in &plan.outputs {
            c.line(format!("y{k}[l] = v{j};"));
        }
        c.close("}");
        for &(_, k, _) in &plan.outputs {
            c.line(format!(
                "*reinterpret_cast<uint4*>(out{k} + head + (g + u * nth) * IO::V) = IO::pack(y{k});"
            ));
        }
        c.close("}");
        c.close("}");
    }
    flat_scalar_range(c, plan, "head + nv * IO::V", "total");
}

/// Broadcasting programs: coordinates from the flat index, in `ty` arithmetic.
fn strided(c: &mut Code, plan: &Plan<'_>) {
    let tensors = plan.tensors();
    let mut needed: Vec<usize> = Vec::new();
    for (_, axes, a) in &tensors {
        if *a == Access::Strided {
            for &d in *axes {
                if !needed.contains(&d) {
                    needed.push(d);
                }
            }
        }
    }
    // Chunks along the innermost dimension need it to be the last axis of every tensor that has it.
    let last = plan.items.last().copied();
    let chunkable = last.is_some_and(|d| {
        tensors
            .iter()
            .all(|(_, axes, _)| !axes.contains(&d) || axes.last() == Some(&d))
    });
    if let (true, Some(d)) = (chunkable, last) {
        let mut cond = vec![format!("n{d} % IO::V == 0")];
        for (name, axes, _) in &tensors {
            if axes.contains(&d) {
                cond.push(format!("optiml_p::aligned16({name})"));
            }
        }
        c.line(format!("const bool vec = {};", cond.join(" && ")));
        c.open("if (vec) {");
        c.open("if (total <= 0x7FFFFFFFLL) {");
        strided_chunks(c, plan, &needed, d, "unsigned");
        c.mid("} else {");
        strided_chunks(c, plan, &needed, d, "unsigned long long");
        c.close("}");
        c.line("return;");
        c.close("}");
    }
    c.open("if (total <= 0x7FFFFFFFLL) {");
    strided_scalar(c, plan, &needed, "unsigned");
    c.mid("} else {");
    strided_scalar(c, plan, &needed, "unsigned long long");
    c.close("}");
}

/// The offset of tensor `axes` at element `e` (coordinates `q{d}` in scope for strided ones).
fn at(axes: &[usize], a: Access) -> String {
    match a {
        Access::Flat => "(long long)e".into(),
        Access::Scalar => "0LL".into(),
        Access::Strided => emit::offset(axes, &[]),
    }
}

fn strided_scalar(c: &mut Code, plan: &Plan<'_>, needed: &[usize], ty: &str) {
    c.line(format!(
        "const {ty} n_ = ({ty})total, t_ = ({ty})tid, s_ = ({ty})nth;"
    ));
    c.line(format!("{ty} e0 = t_;"));
    for (u, guard) in [
        ("OPTIML_UNROLL", "e0 + (OPTIML_UNROLL - 1) * s_ < n_"),
        ("1", "e0 < n_"),
    ] {
        c.open(format!("for (; {guard}; e0 += {u} * s_) {{"));
        for (k, a) in plan.inputs.iter().enumerate() {
            if *a != Access::Scalar {
                c.line(format!("float x{k}[{u}];"));
            }
        }
        for &(_, k, _) in &plan.outputs {
            c.line(format!("long long o{k}[{u}];"));
        }
        c.line("#pragma unroll");
        c.open(format!("for (int u = 0; u < {u}; ++u) {{"));
        c.line(format!("const {ty} e = e0 + ({ty})u * s_;"));
        emit::coords(c, "e", plan.items, needed, ty);
        for (k, a) in plan.inputs.iter().enumerate() {
            if *a != Access::Scalar {
                c.line(format!(
                    "x{k}[u] = IO::get(in{k}[{}]);",
                    at(&plan.p.inputs[k].axes, *a)
                ));
            }
        }
        for &(j, k, a) in &plan.outputs {
            c.line(format!("o{k}[u] = {};", at(&plan.p.stmts[j].axes, a)));
        }
        c.close("}");
        c.line("#pragma unroll");
        c.open(format!("for (int u = 0; u < {u}; ++u) {{"));
        compute(c, plan, "[u]");
        for &(j, k, _) in &plan.outputs {
            c.line(format!("out{k}[o{k}[u]] = IO::put(v{j});"));
        }
        c.close("}");
        c.close("}");
    }
}

/// Chunks of `IO::V` elements along the innermost dimension `d` (its extent a multiple of the chunk, every
/// tensor that has it 16-byte aligned): tensors with `d` move a chunk, the others one element for all lanes.
fn strided_chunks(c: &mut Code, plan: &Plan<'_>, needed: &[usize], d: usize, ty: &str) {
    let has = |axes: &[usize]| axes.contains(&d);
    c.line(format!(
        "const {ty} ng_ = ({ty})(total / IO::V), t_ = ({ty})tid, s_ = ({ty})nth;"
    ));
    c.line(format!("{ty} g0 = t_;"));
    for (u, guard) in [
        ("OPTIML_UNROLL", "g0 + (OPTIML_UNROLL - 1) * s_ < ng_"),
        ("1", "g0 < ng_"),
    ] {
        c.open(format!("for (; {guard}; g0 += {u} * s_) {{"));
        for (k, a) in plan.inputs.iter().enumerate() {
            if *a == Access::Scalar {
                continue;
            }
            if has(&plan.p.inputs[k].axes) {
                c.line(format!("uint4 c{k}[{u}];"));
            } else {
                c.line(format!("float b{k}[{u}];"));
            }
        }
        for &(_, k, _) in &plan.outputs {
            c.line(format!("long long o{k}[{u}];"));
        }
        c.line("#pragma unroll");
        c.open(format!("for (int u = 0; u < {u}; ++u) {{"));
        c.line(format!("const {ty} e = (g0 + ({ty})u * s_) * ({ty})IO::V;"));
        emit::coords(c, "e", plan.items, needed, ty);
        for (k, a) in plan.inputs.iter().enumerate() {
            if *a == Access::Scalar {
                continue;
            }
            let off = at(&plan.p.inputs[k].axes, *a);
            if has(&plan.p.inputs[k].axes) {
                c.line(format!(
                    "c{k}[u] = *reinterpret_cast<const uint4*>(in{k} + {off});"
                ));
            } else {
                c.line(format!("b{k}[u] = IO::get(in{k}[{off}]);"));
            }
        }
        for &(j, k, a) in &plan.outputs {
            c.line(format!("o{k}[u] = {};", at(&plan.p.stmts[j].axes, a)));
        }
        c.close("}");
        c.line("#pragma unroll");
        c.open(format!("for (int u = 0; u < {u}; ++u) {{"));
        for (k, a) in plan.inputs.iter().enumerate() {
            if *a == Access::Scalar {
                continue;
            }
            if has(&plan.p.inputs[k].axes) {
                c.line(format!("float x{k}[IO::V];"));
                c.line(format!("IO::unpack(c{k}[u], x{k});"));
            } else {
                c.line(format!("float x{k}[IO::V];"));
                c.line("#pragma unroll");
                c.line(format!(
                    "for (int l = 0; l < IO::V; ++l) x{k}[l] = b{k}[u];"
                ));
            }
        }
        for &(_, k, _) in &plan.outputs {
            c.line(format!("float y{k}[IO::V];"));
        }
        c.line("#pragma unroll");
        c.open("for (int l = 0; l < IO::V; ++l) {");
        compute(c, plan, "[l]");
        for &(j, k, _) in &plan.outputs {
            c.line(format!("y{k}[l] = v{j};"));
        }
        c.close("}");
        for &(_, k, _) in &plan.outputs {
            c.line(format!(
                "*reinterpret_cast<uint4*>(out{k} + o{k}[u]) = IO::pack(y{k});"
            ));
        }
        c.close("}");
        c.close("}");
    }
}
