//! Column programs (reductions over a middle or leading axis: `y[b, k] = sum(j) x[b, j, k]`, a norm over the
//! channels of `x[b, c, h, w]`): a thread per `vector` adjacent columns and split share, consecutive threads on
//! consecutive columns so every step of the walk down the reduced axes reads contiguous memory across a warp.
//!
//! A block holds `threads / split` column slots of `vector` columns each; the `split` threads of a slot take its
//! columns' elements `s, s + split, …` (`split > 1` gives long columns more parallelism), fold them in order, and
//! combine in shared memory in split order. A thread's `vector` columns share every load's step: where they are
//! adjacent in every tensor and the buffers aligned (checked at run time), one access moves all of them (a
//! `float2`, or two 16-bit elements in one 32-bit word); otherwise (an odd innermost extent, a misaligned buffer)
//! the same thread takes `vector` slots a block width apart, each column its own scalar access, still all in flight
//! together. Either way each column's elements are folded by the same threads in the same order, so both paths
//! give the same bits.
//!
//! Where a thread's share of a column fits its `cache` (one test per launch), the inputs worth keeping stay in
//! registers between passes and the column is read once; otherwise every pass streams the whole column, `unroll`
//! steps in flight per thread, with no bounds check but in the last step. Kept apart, the two paths cost the
//! registers of the larger rather than of both (a partly cached long column saved a few percent of its traffic
//! at the price of the streamed loads' registers).
//!
//! The combine order depends on the schedule and the shape only: repeated runs give the same bits.

use super::classify::ColumnShape;
use super::emit::{self, Code};
use super::plan::{self, ElementEnv, Passes, Role, ScalarEnv};
use crate::experts::Candidate;
use crate::search::{Bottleneck, Transform, Tunable};
use optiml_runtime::{Arch, Launch, ProgramLaunch};
use optiml_spec::DType;
use optiml_spec::program::{Elem, Expr, Program, Reduce};

/// How a column kernel maps columns to threads: what the search transforms.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
// A recorded schedule reads as this kernel's only if it has no other kernel's fields.
#[serde(deny_unknown_fields)]
pub struct ColumnSchedule {
    /// Threads per block.
    pub threads: u32,
    /// Threads per column (each folds every `split`-th element).
    pub split: u32,
    /// Steps in flight per input per thread in a streamed pass (each step one element of each of the thread's
    /// `vector` columns).
    pub unroll: u32,
    /// Elements per thread kept in registers between passes, shared by the inputs worth keeping and the
    /// thread's `vector` columns: columns whose share per thread fits are read once, longer ones by every pass.
    pub cache: u32,
    /// Nonzero: the grid holds at most this many blocks per SM and blocks loop over columns (0: a block per
    /// column group).
    pub blocks_per_sm: u32,
    /// Adjacent columns per thread, moved by one access per element where aligned. Absent in schedules recorded
    /// before it existed, which had one.
    #[serde(default = "one")]
    pub vector: u32,
}

fn one() -> u32 {
    1
}

const THREADS: [u32; 5] = [64, 128, 256, 512, 1024];
const SPLIT: [u32; 6] = [1, 2, 4, 8, 16, 32];
const UNROLL: [u32; 5] = [1, 2, 4, 8, 16];
const CACHE: [u32; 6] = [0, 4, 8, 16, 32, 64];
const BLOCKS_PER_SM: [u32; 5] = [0, 1, 2, 4, 8];
const VECTOR: [u32; 3] = [1, 2, 4];

/// Registers a thread needs beside its cached elements and its streamed loads: what
/// [`ColumnSchedule::is_valid`] keeps free of the block size's register share, checked by the no-spill tests.
const REG_OVERHEAD: u32 = 40;

/// SMs of the GPUs the shape-aware choice is sized for (H100 and H200); elsewhere it only sets how finely the
/// columns are cut.
const SMS: usize = 132;

impl ColumnSchedule {
    /// Columns per block.
    pub fn columns_per_block(&self) -> u32 {
        self.threads / self.split * self.vector
    }

    /// A schedule for `shape`'s program at `extents` (every dimension's, in program order; a search's starting
    /// point when they are known). Two columns per thread. A program that reads its columns in several passes
    /// gets the fewest threads per column (up to 8) that keep a whole column in 32 cached elements per thread
    /// (64 if 8 threads do not), so it is read once, or no cache where even that does not hold it; a single pass
    /// splits its columns until the grid fills the GPU about twice over (more blocks, a shorter last wave),
    /// keeping at least 64 elements per thread.
    pub fn for_columns(shape: &ColumnShape, extents: &[usize], arch: Arch) -> Self {
        let passes = Passes::new(&shape.program, &shape.reduced);
        let cached = passes.cached.len();
        let len = |dims: &[usize]| -> usize {
            dims.iter()
                .map(|&d| extents.get(d).copied().unwrap_or(1))
                .product()
        };
        let (ncols, items) = (len(&shape.reduced).max(1), len(&shape.items).max(1));
        let mut s = Self::default_for(arch);
        let v = s.vector as usize;
        let per_thread = |split: usize| ncols.div_ceil(split).next_power_of_two();
        let mut split = 1usize;
        // A warp of consecutive column slots per block.
        let most = (s.threads / 32) as usize;
        if cached > 0 {
            // 32 cached elements leave room for three resident blocks of 256 threads; longer columns take
            // up to 8 threads each, then a larger cache.
            while split < most.min(8) && per_thread(split) * v * cached > 32 {
                split *= 2;
            }
            let need = (per_thread(split) * v * cached).next_power_of_two().max(4);
            s.cache = if need <= 64 { need as u32 } else { 0 };
        } else {
            let threads_wanted = 2 * SMS * 2048;
            while split < most
                && items.div_ceil(v) * split < threads_wanted
                && ncols / (2 * split) >= 64
            {
                split *= 2;
            }
            s.cache = 0;
        }
        s.split = split as u32;
        while !s.is_valid() && s.cache > 0 {
            s.cache = if s.cache <= 4 { 0 } else { s.cache / 2 };
        }
        s
    }

    /// The steps in flight and the blocks per SM that `__launch_bounds__` promises, from an estimate of the
    /// registers a thread needs: its cached elements or its streamed loads (the two paths are apart, so the
    /// larger; two registers per element in flight, three where an element's expression calls an exponential or
    /// the like), the accumulators, pointers and per-column values of its columns, a base (more for 16-bit
    /// elements, unpacked where used). Without the promise ptxas spends the whole block-size share
    /// on instruction-level parallelism (every exponential of a cached column at once, every address of a step
    /// up front) and the SM holds fewer threads, hence fewer loads in flight; with it, it schedules within what
    /// the schedule needs. Steps in flight are halved while the program's inputs would not fit the share.
    fn registers(&self, p: &Program, passes: &Passes, k: u32) -> (u32, u32) {
        let v = self.vector;
        let cap = (65536 / self.threads).min(255);
        let inputs = passes.max_element_inputs();
        let accumulators: u32 = passes
            .reductions
            .iter()
            .map(|r| {
                r.iter()
                    .map(|&j| match passes.role[j] {
                        Role::Reduction(op) if op.is_arg() => 3,
                        _ => 1,
                    })
                    .sum::<u32>()
            })
            .max()
            .unwrap_or(0);
        let pointers = 2 * (inputs + passes.element_outputs.len() as u32);
        // Per column: accumulators, pointers, per-column inputs, and the offsets of the outputs stored once per
        // column beyond the first (the first shares the column's coordinates).
        let stored = 2 * (passes.scalar_outputs.len() as u32).saturating_sub(1);
        let columns = v * (accumulators + pointers + passes.item_inputs.len() as u32 + stored);
        // A register per cached element: 16-bit pairs are stored packed, but ptxas keeps some unpacked.
        let cached = k * v * passes.cached.len() as u32 + 3 * v * inputs;
        // Transcendental functions of an element (a softmax's exponential) take a few temporaries each.
        let heavy = p
            .stmts
            .iter()
            .enumerate()
            .any(|(j, s)| match (passes.role[j], &s.expr) {
                (Role::Reduction(_), Expr::Reduce(_, _, body)) => emit::transcendental(body),
                (Role::Element, e) => emit::transcendental(e),
                _ => false,
            });
        // 16-bit elements are unpacked into one register each where they are used.
        let base = 24 + if heavy { 8 } else { 0 } + if p.dtype == DType::F32 { 0 } else { 8 };
        let per_element = if heavy { 3 } else { 2 };
        let need = |unroll: u32| base + columns + cached.max(per_element * unroll * v * inputs);
        let mut unroll = self.unroll;
        while unroll > 1 && need(unroll) > cap {
            unroll /= 2;
        }
        // The most blocks whose register share still holds the estimate: an SM's four schedulers each hold a
        // quarter of its 64K registers and of its warps, allocated 8 registers per thread at a time.
        let regs = need(unroll);
        let warps = self.threads / 32;
        let share = |blocks: u32| (16384 / ((blocks * warps).div_ceil(4) * 32)).min(255) / 8 * 8;
        let blocks = (1..=(64 / warps).min(32))
            .rev()
            .find(|&b| share(b) >= regs)
            .unwrap_or(1);
        (unroll, blocks)
    }

    /// The candidate computing `shape`'s program.
    pub fn candidate(&self, shape: &ColumnShape) -> Candidate {
        let p = &shape.program;
        let passes = Passes::new(p, &shape.reduced);
        let cached = passes.cached.len() as u32;
        let k = self.cache.checked_div(cached * self.vector).unwrap_or(0);
        let (unroll, blocks) = self.registers(p, &passes, k);
        let describe = self.describe();
        let mut c = emit::prologue(p, "columns", &describe);
        c.line(format!(
            "#define OPTIML_IT {}  // column slots per block",
            self.threads / self.split
        ));
        c.line(format!(
            "#define OPTIML_V {}  // adjacent columns per thread",
            self.vector
        ));
        c.line(format!(
            "#define OPTIML_S {}  // threads per column",
            self.split
        ));
        c.line(format!(
            "#define OPTIML_K {k}  // register words per thread per cached input"
        ));
        c.line(format!("#define OPTIML_U {unroll}  // steps in flight"));
        word_helpers(&mut c, p.dtype, self.vector);
        c.line("");
        emit::entry(&mut c, p, &format!("{}, {blocks}", self.threads));
        let kernel = Kernel {
            p,
            shape,
            passes: &passes,
            s: self,
            k,
            unroll,
        };
        kernel.body(&mut c);
        c.close("}");
        Candidate {
            source: c.finish(),
            entry: "optiml_program",
            launch: Launch::Program(ProgramLaunch {
                threads: self.threads,
                smem_bytes: 0,
                items_mask: emit::mask(shape.items.iter().copied()),
                items_per_block: self.columns_per_block(),
                max_blocks_per_sm: self.blocks_per_sm,
                cluster: 1,
                nonempty_mask: emit::nonempty_mask(p),
                tree: None,
            }),
            schedule: describe,
        }
    }
}

/// `W`, a thread's `v` columns at one element (what it loads, keeps and stores per step), and its operations:
/// `w_get` (column `e`'s element), `w_make` (from one element per column), `w_zero`, `w_opaque`, and for the
/// aligned path `w_load` / `w_store` (one access), `w_splat` (a tensor without the innermost column axis: one
/// element for all) and `w_aligned`. 16-bit pairs live packed in 32-bit words (lower address low). Stores go
/// through `__stwb` (the default write-back store): a plain vector assignment was split into scalar stores by
/// the compiler in most unrolled steps.
fn word_helpers(c: &mut Code, dtype: DType, v: u32) {
    let f = "__device__ __forceinline__";
    let args: Vec<String> = (0..v).map(|e| format!("T a{e}")).collect();
    let args = args.join(", ");
    let f32 = dtype == DType::F32;
    let (word, zero, get, make, store, opaque) = match (f32, v) {
        (_, 1) => (
            "T",
            "(T)0".to_string(),
            "(void)e; return w;",
            "a0".to_string(),
            "*p = IO::put(v[0]);".to_string(),
            if f32 { "\"+f\"(w)" } else { "\"+h\"(w)" },
        ),
        (true, 2) => (
            "float2",
            "make_float2(0.f, 0.f)".into(),
            "return e == 0 ? w.x : w.y;",
            "make_float2(a0, a1)".into(),
            "__stwb(reinterpret_cast<float2*>(p), make_float2(v[0], v[1]));".into(),
            "\"+f\"(w.x), \"+f\"(w.y)",
        ),
        (true, _) => (
            "float4",
            "make_float4(0.f, 0.f, 0.f, 0.f)".into(),
            "return e == 0 ? w.x : e == 1 ? w.y : e == 2 ? w.z : w.w;",
            "make_float4(a0, a1, a2, a3)".into(),
            "__stwb(reinterpret_cast<float4*>(p), make_float4(v[0], v[1], v[2], v[3]));".into(),
            "\"+f\"(w.x), \"+f\"(w.y), \"+f\"(w.z), \"+f\"(w.w)",
        ),
        (false, 2) => (
            "unsigned",
            "0u".into(),
            "return (T)(w >> (16 * e));",
            "(unsigned)a0 | ((unsigned)a1 << 16)".into(),
            "__stwb(reinterpret_cast<unsigned*>(p), IO::put2(v[0], v[1]));".into(),
            "\"+r\"(w)",
        ),
        (false, _) => (
            "uint2",
            "make_uint2(0u, 0u)".into(),
            "return (T)((e < 2 ? w.x : w.y) >> (16 * (e & 1)));",
            "make_uint2((unsigned)a0 | ((unsigned)a1 << 16), (unsigned)a2 | ((unsigned)a3 << 16))".into(),
            "__stwb(reinterpret_cast<uint2*>(p), make_uint2(IO::put2(v[0], v[1]), IO::put2(v[2], v[3])));".into(),
            "\"+r\"(w.x), \"+r\"(w.y)",
        ),
    };
    c.line(format!(
        "typedef {word} W;  // a thread's OPTIML_V columns at one element"
    ));
    // A copy of a value the optimiser cannot see through. Applied to the steps between elements: an input's and
    // an output's are often equal, and the compiler then kept every cached element's 64-bit offset alive from
    // the loads of the first pass to the stores of the last (two registers per element).
    c.line(format!(
        "{f} long long fresh(long long v) {{ asm volatile(\"\" : \"+l\"(v)); return v; }}"
    ));
    c.line(format!("{f} W w_zero() {{ return {zero}; }}"));
    // Hides a cached word's value from the optimiser at the start of a pass, so what an earlier pass computed
    // from it (unpacked elements, exponentials) is recomputed rather than kept alive across the reduction
    // between them: the word is one register per 32 bits, its derived values one each per element.
    c.line(format!(
        "{f} void w_opaque(W& w) {{ asm volatile(\"\" : {opaque}); }}"
    ));
    c.line(format!("{f} T w_get(W w, int e) {{ {get} }}"));
    c.line(format!("{f} W w_make({args}) {{ return {make}; }}"));
    if v > 1 {
        let splat: Vec<&str> = (0..v).map(|_| "a").collect();
        c.line(format!(
            "{f} W w_splat(T a) {{ return w_make({}); }}",
            splat.join(", ")
        ));
        c.line(format!(
            "{f} W w_load(const T* p) {{ return *reinterpret_cast<const W*>(p); }}"
        ));
        c.line(format!(
            "{f} void w_store(T* p, const float (&v)[OPTIML_V]) {{ {store} }}"
        ));
        c.line(format!(
            "{f} bool w_aligned(const void* p) {{ return (reinterpret_cast<unsigned long long>(p) & (sizeof(W) - 1)) == 0ull; }}"
        ));
    }
}

/// How a kernel path reaches a thread's columns.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// The thread's columns are adjacent in every tensor and the buffers aligned: one access per element.
    Vector,
    /// Column `e` of a thread is slot `e · OPTIML_IT + tx`, each with its own pointers: one access per column.
    Lanes,
}

struct Kernel<'a> {
    p: &'a Program,
    shape: &'a ColumnShape,
    passes: &'a Passes,
    s: &'a ColumnSchedule,
    /// Register words per thread per cached input.
    k: u32,
    /// Steps in flight in a streamed pass (the schedule's, or fewer where the program's inputs would not fit).
    unroll: u32,
}

/// `#pragma unroll` and the loop over a thread's columns (`e`), left open.
fn open_columns(c: &mut Code) {
    c.line("#pragma unroll");
    c.open("for (int e = 0; e < OPTIML_V; ++e) {");
}

/// An element input's value: the current column's element.
fn column_element(k: usize) -> String {
    format!("x{k}")
}

impl Kernel<'_> {
    /// The values at an element of this kernel.
    fn env(&self) -> ElementEnv<'_> {
        ElementEnv {
            p: self.p,
            passes: self.passes,
            element: &column_element,
        }
    }

    fn is_c(&self, d: usize) -> bool {
        self.shape.reduced.contains(&d)
    }

    fn is_arg(&self, j: usize) -> bool {
        matches!(self.passes.role[j], Role::Reduction(op) if op.is_arg())
    }

    /// The element stride of the reduced run in a tensor with `axes` (1 when they are its last axes).
    fn c_stride(&self, axes: &[usize]) -> String {
        match axes.iter().rposition(|&d| self.is_c(d)) {
            Some(last) => emit::product(&axes[last + 1..]),
            None => "0LL".into(),
        }
    }

    /// The innermost column dimension: adjacent columns differ in it alone.
    fn last_item(&self) -> Option<usize> {
        self.shape.items.last().copied()
    }

    /// `+ e * stride` of the innermost column dimension in a tensor with `axes` (nothing if it lacks it): the
    /// offset of a thread's column `e` from its first on the aligned path.
    fn lane_step(&self, axes: &[usize]) -> String {
        match self
            .last_item()
            .and_then(|l| axes.iter().position(|&d| d == l))
        {
            Some(i) => format!(" + e * ({})", emit::product(&axes[i + 1..])),
            None => String::new(),
        }
    }

    /// Whether an element input is the same for all of a thread's columns on the aligned path (it lacks the
    /// innermost column dimension).
    fn splat(&self, k: usize) -> bool {
        self.last_item()
            .is_none_or(|l| !self.p.inputs[k].axes.contains(&l))
    }

    /// Whether the aligned path exists: several columns per thread, every element tensor has the innermost
    /// column dimension last (its columns adjacent) or not at all (one element for all of them).
    fn has_vector_path(&self) -> bool {
        let Some(l) = self.last_item() else {
            return false;
        };
        self.s.vector > 1
            && self.element_inputs().iter().all(|&k| {
                let axes = &self.p.inputs[k].axes;
                axes.last() == Some(&l) || !axes.contains(&l)
            })
            && self
                .passes
                .element_outputs
                .iter()
                .all(|&j| self.p.stmts[j].axes.last() == Some(&l))
    }

    fn element_inputs(&self) -> Vec<usize> {
        let mut all: Vec<usize> = self
            .passes
            .need
            .iter()
            .flat_map(|n| n.element_inputs.iter().copied())
            .collect();
        all.sort_unstable();
        all.dedup();
        all
    }

    fn out_ordinal(&self, j: usize) -> usize {
        emit::output_ordinals(self.p)[j].unwrap_or(usize::MAX)
    }

    /// The item inputs and the per-column statements that `exprs` read (through element statements too).
    fn reads(&self, exprs: &[&Expr]) -> (Vec<usize>, Vec<usize>) {
        let (mut items, mut scalars) = (Vec::new(), Vec::new());
        let mut todo: Vec<&Expr> = exprs.to_vec();
        let mut seen: Vec<usize> = Vec::new();
        while let Some(e) = todo.pop() {
            let (mut ins, mut vals) = (Vec::new(), Vec::new());
            emit::refs(e, &mut ins, &mut vals);
            for k in ins {
                if self.passes.item_inputs.contains(&k) && !items.contains(&k) {
                    items.push(k);
                }
            }
            for j in vals {
                if self.passes.role[j] == Role::Element {
                    if !seen.contains(&j) {
                        seen.push(j);
                        todo.push(&self.p.stmts[j].expr);
                    }
                } else if !scalars.contains(&j) {
                    scalars.push(j);
                }
            }
        }
        items.sort_unstable();
        scalars.sort_unstable();
        (items, scalars)
    }

    /// Column `e`'s item inputs `si{k}` and per-column values `s{j}`, under the names the expressions use.
    fn alias_reads(&self, c: &mut Code, items: &[usize], scalars: &[usize]) {
        for &k in items {
            c.line(format!("const float si{k} = SI{k}[e];"));
        }
        for &j in scalars {
            let ty = if self.is_arg(j) { "long long" } else { "float" };
            c.line(format!("const {ty} s{j} = S{j}[e];"));
        }
    }

    /// Column `e`'s accumulators `a{j}` (and `i{j}`) of `reds`, as references.
    fn alias_accumulators(&self, c: &mut Code, reds: &[usize]) {
        for &j in reds {
            c.line(format!("float& a{j} = A{j}[e];"));
            if self.is_arg(j) {
                c.line(format!("long long& i{j} = I{j}[e];"));
            }
        }
    }

    fn body(&self, c: &mut Code) {
        let p = self.p;
        let (plain_slots, arg_slots) = self.passes.slots();
        c.line(format!(
            "const long long items = {};",
            emit::product(&self.shape.items)
        ));
        c.line(format!(
            "const long long ncols = {};",
            emit::product(&self.shape.reduced)
        ));
        c.line("const int tx = threadIdx.x % OPTIML_IT;");
        c.line("const int sp = threadIdx.x / OPTIML_IT;");
        for k in 0..p.params.len() {
            c.line(format!("(void)p{k};"));
        }
        if self.s.split > 1 && plain_slots > 0 {
            c.line(format!(
                "__shared__ float red_f[{plain_slots}][OPTIML_S][OPTIML_IT * OPTIML_V];"
            ));
            if arg_slots > 0 {
                c.line(format!(
                    "__shared__ long long red_i[{arg_slots}][OPTIML_S][OPTIML_IT * OPTIML_V];"
                ));
            }
        }
        if self.has_vector_path() {
            // Adjacent columns form whole words when the innermost column extent is a multiple of the width
            // (then so is every stride) and every buffer moved by words is aligned to one: one test for the
            // launch, the same in every thread.
            let l = self.last_item().unwrap_or(0);
            let mut test = vec![format!("n{l} % OPTIML_V == 0")];
            for k in self.element_inputs() {
                if !self.splat(k) {
                    test.push(format!("w_aligned(in{k})"));
                }
            }
            for &j in &self.passes.element_outputs {
                test.push(format!("w_aligned(out{})", self.out_ordinal(j)));
            }
            c.line(format!("const bool words = {};", test.join(" && ")));
            c.open("if (words) {");
            self.group(c, Mode::Vector);
            c.mid("} else {");
            self.group(c, Mode::Lanes);
            c.close("}");
        } else {
            self.group(c, Mode::Lanes);
        }
    }

    /// The loop over column groups of one path.
    fn group(&self, c: &mut Code, mode: Mode) {
        let p = self.p;
        // Every thread runs every iteration (the combine's barriers); columns past the last one compute on
        // column 0 and store nothing, and a thread with none loads nothing.
        c.open("for (long long ib = blockIdx.x; ib * (OPTIML_IT * OPTIML_V) < items; ib += gridDim.x) {");
        let mut needed: Vec<usize> = Vec::new();
        let mut tensors: Vec<&[usize]> = Vec::new();
        for k in self.element_inputs() {
            tensors.push(&p.inputs[k].axes);
        }
        for &k in &self.passes.item_inputs {
            tensors.push(&p.inputs[k].axes);
        }
        for &j in self
            .passes
            .element_outputs
            .iter()
            .chain(&self.passes.scalar_outputs)
        {
            tensors.push(&p.stmts[j].axes);
        }
        for axes in tensors {
            for &d in axes {
                if !self.is_c(d) && !needed.contains(&d) {
                    needed.push(d);
                }
            }
        }
        for k in self.element_inputs() {
            c.line(format!(
                "const long long cs{k} = {};",
                self.c_stride(&p.inputs[k].axes)
            ));
            c.line(format!("const long long st{k} = fresh(OPTIML_S * cs{k});"));
        }
        for &j in &self.passes.element_outputs {
            let o = self.out_ordinal(j);
            c.line(format!(
                "const long long ws{o} = {};",
                self.c_stride(&p.stmts[j].axes)
            ));
            c.line(format!("const long long sw{o} = fresh(OPTIML_S * ws{o});"));
        }
        c.line("bool act[OPTIML_V];");
        for &k in &self.passes.item_inputs {
            c.line(format!("float SI{k}[OPTIML_V];"));
        }
        for &j in &self.passes.scalar_outputs {
            c.line(format!("long long O{}[OPTIML_V];", self.out_ordinal(j)));
        }
        let reduced = &self.shape.reduced;
        match mode {
            Mode::Vector => {
                c.line("const long long item = (ib * OPTIML_IT + tx) * OPTIML_V;");
                c.line("const bool act0 = item < items;");
                c.line("const long long it = act0 ? item : 0LL;");
                emit::coords(c, "it", &self.shape.items, &needed, "long long");
                for k in self.element_inputs() {
                    c.line(format!(
                        "const T* P{k} = in{k} + {} + (long long)sp * cs{k};",
                        emit::offset(&p.inputs[k].axes, reduced)
                    ));
                }
                for &j in &self.passes.element_outputs {
                    let o = self.out_ordinal(j);
                    c.line(format!(
                        "T* Q{o} = out{o} + {} + (long long)sp * ws{o};",
                        emit::offset(&p.stmts[j].axes, reduced)
                    ));
                }
                open_columns(c);
                c.line("act[e] = act0;");
                for &k in &self.passes.item_inputs {
                    let axes = &p.inputs[k].axes;
                    c.line(format!(
                        "SI{k}[e] = act0 ? IO::get(in{k}[{}{}]) : 0.f;",
                        emit::offset(axes, &[]),
                        self.lane_step(axes)
                    ));
                }
                for &j in &self.passes.scalar_outputs {
                    let axes = &p.stmts[j].axes;
                    c.line(format!(
                        "O{}[e] = {}{};",
                        self.out_ordinal(j),
                        emit::offset(axes, &[]),
                        self.lane_step(axes)
                    ));
                }
                c.close("}");
            }
            Mode::Lanes => {
                for k in self.element_inputs() {
                    c.line(format!("const T* P{k}[OPTIML_V];"));
                }
                for &j in &self.passes.element_outputs {
                    c.line(format!("T* Q{}[OPTIML_V];", self.out_ordinal(j)));
                }
                open_columns(c);
                c.line("const long long item = ib * (OPTIML_IT * OPTIML_V) + e * OPTIML_IT + tx;");
                c.line("act[e] = item < items;");
                c.line("const long long it = act[e] ? item : 0LL;");
                emit::coords(c, "it", &self.shape.items, &needed, "long long");
                for k in self.element_inputs() {
                    c.line(format!(
                        "P{k}[e] = in{k} + {} + (long long)sp * cs{k};",
                        emit::offset(&p.inputs[k].axes, reduced)
                    ));
                }
                for &j in &self.passes.element_outputs {
                    let o = self.out_ordinal(j);
                    c.line(format!(
                        "Q{o}[e] = out{o} + {} + (long long)sp * ws{o};",
                        emit::offset(&p.stmts[j].axes, reduced)
                    ));
                }
                for &k in &self.passes.item_inputs {
                    c.line(format!(
                        "SI{k}[e] = act[e] ? IO::get(in{k}[{}]) : 0.f;",
                        emit::offset(&p.inputs[k].axes, &[])
                    ));
                }
                for &j in &self.passes.scalar_outputs {
                    c.line(format!(
                        "O{}[e] = {};",
                        self.out_ordinal(j),
                        emit::offset(&p.stmts[j].axes, &[])
                    ));
                }
                c.close("}");
            }
        }
        // This thread's elements of its columns: `j = 0, 1, …` is each column's element `j · split + sp`. One
        // count bounds every column of the thread (act[0] is set whenever any is).
        c.line(
            "const long long nmine = (act[0] && sp < ncols) ? (ncols - 1 - sp) / OPTIML_S + 1 : 0LL;",
        );
        for (j, s) in p.stmts.iter().enumerate() {
            if self.passes.role[j] != Role::Element {
                let ty = if s.elem == Elem::Float {
                    "float"
                } else {
                    "long long"
                };
                c.line(format!("{ty} S{j}[OPTIML_V];"));
            }
        }
        if self.k > 0 && !self.passes.cached.is_empty() {
            // One test for the launch (not per thread: the passes' barriers must be met by the whole block):
            // a column whose share per thread fits the cache is read once, any longer one is streamed by every
            // pass. Apart, the two keep the registers of the larger, not of both.
            c.line("const bool inreg = (ncols - 1) / OPTIML_S + 1 <= OPTIML_K;");
            c.open("if (inreg) {");
            for k in &self.passes.cached {
                c.line(format!("W rg{k}[OPTIML_K];"));
            }
            self.passes_text(c, mode, true);
            c.mid("} else {");
            self.passes_text(c, mode, false);
            c.close("}");
        } else {
            self.passes_text(c, mode, false);
        }
        if !self.passes.scalar_outputs.is_empty() {
            open_columns(c);
            c.open("if (act[e] && sp == 0) {");
            self.alias_reads(c, &[], &self.passes.scalar_outputs);
            for &j in &self.passes.scalar_outputs {
                let o = self.out_ordinal(j);
                c.line(format!("out{o}[O{o}[e]] = {};", plan::scalar_store(p, j)));
            }
            c.close("}");
            c.close("}");
        }
        c.close("}");
    }

    /// Every pass with the scalars computed between them; `inreg`: the thread's share of each column is in
    /// registers (read by the first pass that needs it).
    fn passes_text(&self, c: &mut Code, mode: Mode, inreg: bool) {
        for pass in 0..=self.passes.reductions.len() {
            self.scalars(c, &self.passes.stages[pass]);
            if pass < self.passes.count() {
                self.pass(c, mode, pass, inreg);
            }
        }
    }

    fn scalars(&self, c: &mut Code, stmts: &[usize]) {
        if stmts.is_empty() {
            return;
        }
        let exprs: Vec<&Expr> = stmts.iter().map(|&j| &self.p.stmts[j].expr).collect();
        let (items, mut scalars) = self.reads(&exprs);
        scalars.retain(|j| !stmts.contains(j));
        let env = ScalarEnv(self.env());
        open_columns(c);
        self.alias_reads(c, &items, &scalars);
        for &j in stmts {
            c.line(format!(
                "const float s{j} = {};",
                emit::expr(&self.p.stmts[j].expr, &env)
            ));
            c.line(format!("S{j}[e] = s{j};"));
        }
        c.close("}");
    }

    /// The text of one word of input `k` at `ptr` (a pointer on the aligned path, an array of one per column
    /// otherwise).
    fn load(&self, mode: Mode, k: usize, ptr: &str) -> String {
        match mode {
            Mode::Vector if self.splat(k) => format!("w_splat(*{ptr})"),
            Mode::Vector => format!("w_load({ptr})"),
            Mode::Lanes => {
                let each: Vec<String> =
                    (0..self.s.vector).map(|e| format!("*{ptr}[{e}]")).collect();
                format!("w_make({})", each.join(", "))
            }
        }
    }

    /// Declares `name` (one pointer, or one per column) at `base` plus `offset` elements.
    fn pointer(&self, c: &mut Code, mode: Mode, ty: &str, name: &str, base: &str, offset: &str) {
        match mode {
            Mode::Vector => c.line(format!("{ty}* {name} = {base} + {offset};")),
            Mode::Lanes => {
                c.line(format!("{ty}* {name}[OPTIML_V];"));
                c.line("#pragma unroll");
                c.line(format!(
                    "for (int e = 0; e < OPTIML_V; ++e) {name}[e] = {base}[e] + {offset};"
                ));
            }
        }
    }

    /// Advances `name` (one pointer, or one per column) by `step` elements.
    fn bump(&self, c: &mut Code, mode: Mode, name: &str, step: &str) {
        match mode {
            Mode::Vector => c.line(format!("{name} += {step};")),
            Mode::Lanes => {
                c.line("#pragma unroll");
                c.line(format!(
                    "for (int e = 0; e < OPTIML_V; ++e) {name}[e] += {step};"
                ));
            }
        }
    }

    fn pass(&self, c: &mut Code, mode: Mode, pass: usize, inreg: bool) {
        let need = &self.passes.need[pass];
        let is_final = self.passes.is_final(pass);
        c.line(format!("// pass {pass}"));
        c.open("{");
        if !is_final {
            for &j in &self.passes.reductions[pass] {
                match self.passes.role[j] {
                    Role::Reduction(op) if op.is_arg() => {
                        let init = if op == Reduce::Argmax {
                            "-optiml_p::inf_f()"
                        } else {
                            "optiml_p::inf_f()"
                        };
                        c.line(format!("float A{j}[OPTIML_V];"));
                        c.line(format!("long long I{j}[OPTIML_V];"));
                        c.line("#pragma unroll");
                        c.line(format!(
                            "for (int e = 0; e < OPTIML_V; ++e) {{ A{j}[e] = {init}; I{j}[e] = optiml_p::arg_none(); }}"
                        ));
                    }
                    Role::Reduction(op) => {
                        c.line(format!("float A{j}[OPTIML_V];"));
                        c.line("#pragma unroll");
                        c.line(format!(
                            "for (int e = 0; e < OPTIML_V; ++e) A{j}[e] = {}::id();",
                            emit::reduce_op(op)
                        ));
                    }
                    _ => {}
                }
            }
        }
        let cached_here: Vec<usize> = need
            .element_inputs
            .iter()
            .copied()
            .filter(|k| self.passes.cached.contains(k))
            .collect();
        if inreg {
            for &k in &cached_here {
                if self.passes.first_use(k) == Some(pass) {
                    c.open("{");
                    self.pointer(c, mode, "const T", &format!("b{k}"), &format!("P{k}"), "0");
                    c.line("#pragma unroll");
                    c.open("for (int j = 0; j < OPTIML_K; ++j) {");
                    c.line(format!(
                        "rg{k}[j] = j < nmine ? {} : w_zero();",
                        self.load(mode, k, &format!("b{k}"))
                    ));
                    self.bump(c, mode, &format!("b{k}"), &format!("st{k}"));
                    c.close("}");
                    c.close("}");
                }
            }
            for &k in &cached_here {
                if self.passes.first_use(k) != Some(pass) {
                    c.line("#pragma unroll");
                    c.line(format!(
                        "for (int j = 0; j < OPTIML_K; ++j) w_opaque(rg{k}[j]);"
                    ));
                }
            }
            // Steps are grouped only to keep the loads of the inputs not cached in flight together.
            let streams = need.element_inputs.len() > cached_here.len();
            let ur = if streams { self.unroll.min(self.k) } else { 1 };
            c.line("#pragma unroll");
            c.open(format!("for (int j0 = 0; j0 < OPTIML_K; j0 += {ur}) {{"));
            // A thread's elements are a prefix of the cache: leaving at the first step past them keeps each
            // step's work after the previous step's check, where per-element guards alone let the compiler
            // evaluate every step at once (a register each) and spill.
            c.line("if (j0 >= nmine) break;");
            self.segment(c, mode, pass, &ur.to_string(), Some("nmine"), &|k| {
                cached_here.contains(&k)
            });
            c.close("}");
        } else {
            // Whole steps need no bounds check; the loop is not unrolled further, so `unroll` alone sets the
            // loads in flight and the registers they take.
            c.line("long long j0 = 0;");
            c.line("#pragma unroll 1");
            c.open("for (; j0 + OPTIML_U <= nmine; j0 += OPTIML_U) {");
            self.segment(c, mode, pass, "OPTIML_U", None, &|_| false);
            c.close("}");
            c.open("if (j0 < nmine) {");
            self.segment(c, mode, pass, "OPTIML_U", Some("nmine"), &|_| false);
            c.close("}");
        }
        if !is_final {
            self.combine(c, mode, pass);
        }
        c.close("}");
    }

    /// `count` steps per thread (`c_ = (j0 + u) · split + sp` of each of its columns): loads of the inputs not
    /// in registers, then the elements; with a `bound`, steps at or past it load and store nothing.
    fn segment(
        &self,
        c: &mut Code,
        mode: Mode,
        pass: usize,
        count: &str,
        bound: Option<&str>,
        in_regs: &dyn Fn(usize) -> bool,
    ) {
        let p = self.p;
        let need = &self.passes.need[pass];
        let is_final = self.passes.is_final(pass);
        let loaded: Vec<usize> = need
            .element_inputs
            .iter()
            .copied()
            .filter(|&k| !in_regs(k))
            .collect();
        for &k in &loaded {
            c.line(format!("W t{k}[{count}];"));
        }
        if !loaded.is_empty() {
            c.open("{");
            for &k in &loaded {
                self.pointer(
                    c,
                    mode,
                    "const T",
                    &format!("b{k}"),
                    &format!("P{k}"),
                    &format!("j0 * st{k}"),
                );
            }
            c.line("#pragma unroll");
            c.open(format!("for (int u = 0; u < {count}; ++u) {{"));
            for &k in &loaded {
                let load = self.load(mode, k, &format!("b{k}"));
                match bound {
                    Some(n) => c.line(format!("t{k}[u] = j0 + u < {n} ? {load} : w_zero();")),
                    None => c.line(format!("t{k}[u] = {load};")),
                }
                self.bump(c, mode, &format!("b{k}"), &format!("st{k}"));
            }
            c.close("}");
            c.close("}");
        }
        if is_final {
            for &j in &self.passes.element_outputs {
                let o = self.out_ordinal(j);
                self.pointer(
                    c,
                    mode,
                    "T",
                    &format!("bw{o}"),
                    &format!("Q{o}"),
                    &format!("j0 * sw{o}"),
                );
            }
        }
        let roots: Vec<&Expr> = if is_final {
            self.passes
                .element_outputs
                .iter()
                .map(|&j| &p.stmts[j].expr)
                .collect()
        } else {
            self.passes.reductions[pass]
                .iter()
                .filter_map(|&j| match &p.stmts[j].expr {
                    Expr::Reduce(_, _, body) => Some(body.as_ref()),
                    _ => None,
                })
                .collect()
        };
        let (items, scalars) = self.reads(&roots);
        let env = self.env();
        c.line("#pragma unroll");
        c.open(format!("for (int u = 0; u < {count}; ++u) {{"));
        if let Some(n) = bound {
            c.open(format!("if (j0 + u < {n}) {{"));
        }
        if is_final {
            for &j in &self.passes.element_outputs {
                c.line(format!("float y{}[OPTIML_V];", self.out_ordinal(j)));
            }
        }
        open_columns(c);
        self.alias_reads(c, &items, &scalars);
        if !is_final {
            self.alias_accumulators(c, &self.passes.reductions[pass]);
        }
        for &k in &need.element_inputs {
            let word = if in_regs(k) {
                format!("rg{k}[j0 + u]")
            } else {
                format!("t{k}[u]")
            };
            c.line(format!("const float x{k} = IO::get(w_get({word}, e));"));
        }
        self.passes.lane(
            c,
            p,
            pass,
            self.passes.reductions_of(pass),
            &env,
            &|j| format!("y{}[e]", self.out_ordinal(j)),
            "((j0 + u) * OPTIML_S + sp)",
        );
        c.close("}");
        if is_final {
            for &j in &self.passes.element_outputs {
                let o = self.out_ordinal(j);
                match mode {
                    Mode::Vector => c.line(format!("if (act[0]) w_store(bw{o}, y{o});")),
                    Mode::Lanes => {
                        c.line("#pragma unroll");
                        c.line(format!(
                            "for (int e = 0; e < OPTIML_V; ++e) if (act[e]) *bw{o}[e] = IO::put(y{o}[e]);"
                        ));
                    }
                }
            }
        }
        if bound.is_some() {
            c.close("}");
        }
        if is_final {
            for &j in &self.passes.element_outputs {
                let o = self.out_ordinal(j);
                self.bump(c, mode, &format!("bw{o}"), &format!("sw{o}"));
            }
        }
        c.close("}");
    }

    fn combine(&self, c: &mut Code, mode: Mode, pass: usize) {
        let reds = &self.passes.reductions[pass];
        if self.s.split > 1 {
            // A column's slot in the scratch: its place in the block, whichever thread holds it.
            let col = match mode {
                Mode::Vector => "tx * OPTIML_V + e",
                Mode::Lanes => "e * OPTIML_IT + tx",
            };
            let at =
                |array: &str, slot: usize, part: &str| format!("{array}[{slot}][{part}][{col}]");
            open_columns(c);
            self.alias_accumulators(c, reds);
            self.passes.store_partials(c, reds, "sp", &at);
            c.close("}");
            c.line("__syncthreads();");
            open_columns(c);
            self.alias_accumulators(c, reds);
            self.passes.fold_partials(c, reds, "OPTIML_S", &at);
            c.close("}");
            // The next pass's combine overwrites the scratch.
            c.line("__syncthreads();");
        }
        open_columns(c);
        for &j in reds {
            if self.is_arg(j) {
                c.line(format!("const long long i{j} = I{j}[e];"));
            } else {
                c.line(format!("const float a{j} = A{j}[e];"));
            }
        }
        self.passes.finish(c, reds);
        for &j in reds {
            c.line(format!("S{j}[e] = s{j};"));
        }
        c.close("}");
    }
}

impl Tunable for ColumnSchedule {
    /// `256 threads, split 4, unroll 8, cache 32, vector 2, grid: a block per column group`.
    fn describe(&self) -> String {
        let grid = if self.blocks_per_sm == 0 {
            "a block per column group".to_string()
        } else {
            format!("{} blocks/SM", self.blocks_per_sm)
        };
        format!(
            "{} threads, split {}, unroll {}, cache {}, vector {}, grid: {grid}",
            self.threads, self.split, self.unroll, self.cache, self.vector
        )
    }

    /// At least a warp of consecutive column slots per block (coalesced loads), cached elements and streamed
    /// loads that leave the registers a thread needs besides, at most 16 elements per input in flight per thread
    /// (more took over 200 registers on the per-column path), a split block's combine scratch no larger than
    /// 1024 columns' (the static shared-memory limit), a grid cap of at most 2048 resident threads per SM.
    fn is_valid(&self) -> bool {
        THREADS.contains(&self.threads)
            && SPLIT.contains(&self.split)
            && self.threads / self.split >= 32
            && UNROLL.contains(&self.unroll)
            && CACHE.contains(&self.cache)
            && VECTOR.contains(&self.vector)
            && self.cache + REG_OVERHEAD <= (65536 / self.threads).min(255)
            && self.unroll * self.vector <= 16
            && 3 * self.unroll * self.vector + REG_OVERHEAD <= (65536 / self.threads).min(255)
            && (self.split == 1 || self.threads * self.vector <= 1024)
            && BLOCKS_PER_SM.contains(&self.blocks_per_sm)
            && self.threads * self.blocks_per_sm <= 2048
    }

    /// 256 threads on 128 columns: two adjacent columns per thread (one 8-byte f32 or 4-byte 16-bit access
    /// where aligned), four threads per column, 16 elements in flight per thread; a column of up to 64 elements
    /// is read once. Three to four resident blocks per SM for an RMS norm over channels or a reduction over dim 1.
    fn default_for(_arch: Arch) -> Self {
        ColumnSchedule {
            threads: 256,
            split: 4,
            unroll: 8,
            cache: 32,
            blocks_per_sm: 0,
            vector: 2,
        }
    }

    fn space() -> Vec<Self> {
        let mut out = Vec::new();
        for threads in THREADS {
            for split in SPLIT {
                for unroll in UNROLL {
                    for cache in CACHE {
                        for blocks_per_sm in BLOCKS_PER_SM {
                            for vector in VECTOR {
                                let s = ColumnSchedule {
                                    threads,
                                    split,
                                    unroll,
                                    cache,
                                    blocks_per_sm,
                                    vector,
                                };
                                if s.is_valid() {
                                    out.push(s);
                                }
                            }
                        }
                    }
                }
            }
        }
        out
    }

    fn catalog() -> Vec<Transform<Self>> {
        vec![
            Transform {
                name: "more-threads",
                rationale: "twice the threads per block (twice the columns): fewer, larger blocks",
                addresses: Bottleneck::Mixed,
                claimed_gain: 1.02,
                apply: |s| {
                    Some(ColumnSchedule {
                        threads: s.threads * 2,
                        ..*s
                    })
                },
            },
            Transform {
                name: "fewer-threads",
                rationale: "half the threads per block: more blocks for few columns, finer balance over SMs",
                addresses: Bottleneck::Mixed,
                claimed_gain: 1.03,
                apply: |s| {
                    Some(ColumnSchedule {
                        threads: s.threads / 2,
                        ..*s
                    })
                },
            },
            Transform {
                name: "more-split",
                rationale: "twice the threads per column: long columns get more parallelism (more loads in \
                            flight per column) for a shared-memory combine",
                addresses: Bottleneck::Mixed,
                claimed_gain: 1.1,
                apply: |s| {
                    Some(ColumnSchedule {
                        split: s.split * 2,
                        ..*s
                    })
                },
            },
            Transform {
                name: "less-split",
                rationale: "half the threads per column: more columns per block, cheaper combine, when columns \
                            are many",
                addresses: Bottleneck::Mixed,
                claimed_gain: 1.03,
                apply: |s| {
                    Some(ColumnSchedule {
                        split: s.split / 2,
                        ..*s
                    })
                },
            },
            Transform {
                name: "deeper-unroll",
                rationale: "twice the loads in flight per thread: more memory-level parallelism down the column",
                addresses: Bottleneck::Memory,
                claimed_gain: 1.05,
                apply: |s| {
                    Some(ColumnSchedule {
                        unroll: s.unroll * 2,
                        ..*s
                    })
                },
            },
            Transform {
                name: "shallower-unroll",
                rationale: "half the loads per step: fewer registers, more resident warps",
                addresses: Bottleneck::Mixed,
                claimed_gain: 1.02,
                apply: |s| {
                    Some(ColumnSchedule {
                        unroll: s.unroll / 2,
                        ..*s
                    })
                },
            },
            Transform {
                name: "more-cache",
                rationale: "twice the elements kept in registers: a longer column is read once instead of once \
                            per pass",
                addresses: Bottleneck::Memory,
                claimed_gain: 1.3,
                apply: |s| {
                    Some(ColumnSchedule {
                        cache: (s.cache * 2).max(4),
                        ..*s
                    })
                },
            },
            Transform {
                name: "less-cache",
                rationale: "half the cached elements: fewer registers when columns are longer than the cache \
                            anyway",
                addresses: Bottleneck::Mixed,
                claimed_gain: 1.03,
                apply: |s| {
                    Some(ColumnSchedule {
                        cache: if s.cache <= 4 { 0 } else { s.cache / 2 },
                        ..*s
                    })
                },
            },
            Transform {
                name: "wider-vector",
                rationale: "twice the adjacent columns per thread: one wider access per element where aligned \
                            (half the load instructions, 16-bit pairs in one word), twice the loads in flight",
                addresses: Bottleneck::Memory,
                claimed_gain: 1.1,
                apply: |s| {
                    Some(ColumnSchedule {
                        vector: s.vector * 2,
                        ..*s
                    })
                },
            },
            Transform {
                name: "narrower-vector",
                rationale: "half the columns per thread: fewer registers, more column groups for few columns",
                addresses: Bottleneck::Mixed,
                claimed_gain: 1.02,
                apply: |s| {
                    Some(ColumnSchedule {
                        vector: s.vector / 2,
                        ..*s
                    })
                },
            },
            Transform {
                name: "persistent-grid",
                rationale: "a grid of a few blocks per SM that loop over columns: no block launch per column group",
                addresses: Bottleneck::Mixed,
                claimed_gain: 1.03,
                apply: |s| {
                    (s.blocks_per_sm == 0).then_some(ColumnSchedule {
                        blocks_per_sm: (2048 / s.threads).min(8),
                        ..*s
                    })
                },
            },
            Transform {
                name: "more-blocks-per-sm",
                rationale: "twice the resident blocks the persistent grid is sized for",
                addresses: Bottleneck::Memory,
                claimed_gain: 1.03,
                apply: |s| {
                    (s.blocks_per_sm > 0).then_some(ColumnSchedule {
                        blocks_per_sm: s.blocks_per_sm * 2,
                        ..*s
                    })
                },
            },
            Transform {
                name: "fewer-blocks-per-sm",
                rationale: "half the blocks of the persistent grid",
                addresses: Bottleneck::Mixed,
                claimed_gain: 1.02,
                apply: |s| {
                    (s.blocks_per_sm > 1).then_some(ColumnSchedule {
                        blocks_per_sm: s.blocks_per_sm / 2,
                        ..*s
                    })
                },
            },
            Transform {
                name: "block-per-column-group",
                rationale: "one block per column group instead of a persistent grid: the hardware balances blocks",
                addresses: Bottleneck::Mixed,
                claimed_gain: 1.02,
                apply: |s| {
                    (s.blocks_per_sm > 0).then_some(ColumnSchedule {
                        blocks_per_sm: 0,
                        ..*s
                    })
                },
            },
        ]
    }
}

#[cfg(test)]
mod tests {
    //! The knobs of this file, checked two ways: compiled by NVRTC (registers, spills), and run on the CPU (the
    //! generated source compiled as C++ by the host compiler with a shim: a thread per CUDA thread, a barrier for
    //! `__syncthreads`, blocks one after another) against the float64 interpreter, and bit for bit across every
    //! schedule that shares a split (thread count, unroll, cache, vector width, grid and the aligned or
    //! per-column path change where elements are loaded from, never the order they are folded in).

    use super::*;
    use crate::families::tensor::codegen::{Shape, classify};
    use optiml_spec::program::interp::{self, HostTensor};
    use std::path::{Path, PathBuf};
    use std::process::Command;

    fn columns(text: &str, dtype: DType) -> (Program, ColumnShape) {
        let spec = optiml_spec::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        let optiml_spec::Family::Tensor(mut p) = spec.family else {
            panic!("{text}: not a tensor program")
        };
        p.dtype = dtype;
        match classify(&p) {
            Ok(Shape::Columns(s)) => (p, s),
            other => panic!("{text}: {other:?}"),
        }
    }

    fn schedule(threads: u32, split: u32, unroll: u32, cache: u32, vector: u32) -> ColumnSchedule {
        let s = ColumnSchedule {
            threads,
            split,
            unroll,
            cache,
            blocks_per_sm: 0,
            vector,
        };
        assert!(s.is_valid(), "{s:?}");
        s
    }

    /// Every dimension's extent in program order: `reduced` for the reduced one, `items` for the others in
    /// column order (outermost first).
    fn extents(shape: &ColumnShape, reduced: usize, items: &[usize]) -> Vec<usize> {
        let mut e = vec![1; shape.program.dims.len()];
        e[shape.reduced[0]] = reduced;
        for (&d, &n) in shape.items.iter().zip(items) {
            e[d] = n;
        }
        e
    }

    // ------------------------------------------------------------------------------------------ the knobs

    #[test]
    fn the_default_reads_a_64_channel_column_once_and_keeps_16_loads_in_flight() {
        let arch = Arch::new(9, 0);
        let s = ColumnSchedule::default_for(arch);
        assert!(s.is_valid());
        let (_, rms) = columns("rms norm over dim 1 of a 4-D tensor, eps 1e-5", DType::F32);
        let passes = Passes::new(&rms.program, &rms.reduced);
        let per_thread = 64u32.div_ceil(s.split) * s.vector * passes.cached.len() as u32;
        assert!(per_thread <= s.cache, "{s:?}");
        assert!(s.unroll * s.vector >= 16, "{s:?}");
        // The shape-aware choice: RMS over 64 channels read once, dim-1 reductions of 4096 split.
        let c = ColumnSchedule::for_columns(&rms, &extents(&rms, 64, &[112, 512, 512]), arch);
        assert!(c.is_valid());
        assert!(64u32.div_ceil(c.split) * c.vector <= c.cache, "{c:?}");
        let (_, sum) = columns("sum over dim 1 of a 3-D tensor, keep dims", DType::F32);
        let c = ColumnSchedule::for_columns(&sum, &extents(&sum, 4096, &[128, 4095]), arch);
        assert!(c.is_valid() && c.split > 1 && c.cache == 0, "{c:?}");
        // Short columns are not split.
        let c = ColumnSchedule::for_columns(&sum, &extents(&sum, 3, &[128, 4096]), arch);
        assert_eq!(c.split, 1, "{c:?}");
    }

    #[test]
    fn recorded_schedules_without_a_vector_width_read_as_one_column_per_thread() {
        let old = r#"{"threads":256,"split":1,"unroll":4,"cache":8,"blocks_per_sm":0}"#;
        let s: ColumnSchedule = serde_json::from_str(old).expect("reads");
        assert_eq!(s.vector, 1);
        assert!(s.is_valid());
        let back: ColumnSchedule =
            serde_json::from_value(serde_json::to_value(s).expect("json")).expect("reads");
        assert_eq!(back, s);
        assert!(s.describe().contains("vector 1"));
    }

    #[test]
    fn the_aligned_path_exists_only_where_columns_are_adjacent() {
        let has = |text: &str, vector: u32| {
            let (_, shape) = columns(text, DType::Bf16);
            let s = schedule(256, 1, 4, 8, vector);
            s.candidate(&shape).source.contains("if (words) {")
        };
        assert!(has("sum over dim 1 of a 3-D tensor, keep dims", 2));
        assert!(!has("sum over dim 1 of a 3-D tensor, keep dims", 1));
        // A weight without the innermost column axis is one element for all of a thread's columns.
        assert!(has(
            "y[b, j, k] = x[b, j, k] * w[b, j] / sum(j) x[b, j, k]",
            2
        ));
    }

    // ------------------------------------------------------------------------------------------ NVRTC

    /// Compiles every job (the generator's shared compile check: errors, warnings, spills, stack frames).
    fn compile_all(jobs: &[(String, String)]) {
        super::super::tests::assert_compiles(jobs.to_vec());
    }

    /// The largest values of the new knobs (a cache of 64, 16 steps in flight, 2 and 4 columns per thread) at
    /// every block size that admits them, for the heaviest column programs: an RMS norm with a gain in 16 bits
    /// (two element inputs, one cached), a softmax (three passes) and four statistics in one pass (an argmax's
    /// 64-bit index per column).
    #[test]
    fn the_largest_new_knob_values_compile_without_spills() {
        let programs = [
            (
                "y[b, c, h, w] = x[b, c, h, w] * rsqrt(mean(c) x[b, c, h, w]^2 + 1e-6) * g[c]",
                DType::Bf16,
            ),
            ("softmax over dim 1 of a 3-D tensor", DType::F32),
            (
                "s[b, k] = sum(j) x[b, j, k]; m[b, k] = max(j) x[b, j, k]; a[b, k] = argmax(j) x[b, j, k]; \
                 u[b, k] = mean(j) x[b, j, k]",
                DType::F32,
            ),
        ];
        let mut jobs = Vec::new();
        for (text, dtype) in programs {
            let (_, shape) = columns(text, dtype);
            for threads in THREADS {
                for vector in VECTOR {
                    // The largest cache and unroll valid at this size, with the split that keeps a warp of slots.
                    let split = (threads / 128).clamp(1, 4);
                    let Some(s) = [64, 32, 16, 8, 4, 0]
                        .iter()
                        .flat_map(|&cache| {
                            [16, 8, 4, 2, 1].map(|unroll| ColumnSchedule {
                                threads,
                                split,
                                unroll,
                                cache,
                                blocks_per_sm: 0,
                                vector,
                            })
                        })
                        .find(ColumnSchedule::is_valid)
                    else {
                        continue;
                    };
                    let c = s.candidate(&shape);
                    jobs.push((format!("{text} {dtype:?}: {}", c.schedule), c.source));
                }
            }
        }
        compile_all(&jobs);
    }

    /// Every block size with the split that keeps 128 slots (at most 4), unroll-by-vector products of 1, 4 and
    /// 16 plus unroll 8, caches of 0 to 64, for five programs (630 sources, minutes on two cores): what
    /// calibrated [`ColumnSchedule::registers`].
    #[test]
    #[ignore]
    fn a_wide_spread_of_column_schedules_compiles_without_spills() {
        let programs = [
            ("softmax over dim 1 of a 3-D tensor", DType::Bf16),
            ("softmax over dim 1 of a 3-D tensor", DType::F32),
            (
                "y[b, c, h, w] = x[b, c, h, w] * rsqrt(mean(c) x[b, c, h, w]^2 + 1e-6) * g[c]",
                DType::Bf16,
            ),
            ("rms norm over dim 1 of a 4-D tensor, eps 1e-5", DType::F32),
            (
                "s[b, k] = sum(j) x[b, j, k]; m[b, k] = max(j) x[b, j, k]; a[b, k] = argmax(j) x[b, j, k]; \
                 u[b, k] = mean(j) x[b, j, k]",
                DType::F32,
            ),
        ];
        let mut jobs = Vec::new();
        for (text, dtype) in programs {
            let (_, shape) = columns(text, dtype);
            for s in ColumnSchedule::space() {
                if s.blocks_per_sm != 0
                    || s.split != (s.threads / 128).clamp(1, 4)
                    || !([1, 4, 16].contains(&(s.unroll * s.vector)) || s.unroll == 8)
                    || ![0, 16, 32, 64].contains(&s.cache)
                {
                    continue;
                }
                let c = s.candidate(&shape);
                jobs.push((format!("{text} {dtype:?}: {}", c.schedule), c.source));
            }
        }
        compile_all(&jobs);
    }

    // ------------------------------------------------------------------------------------------ the CPU

    /// What the generated source needs of CUDA, for the host compiler: the storage types, the bit casts, the
    /// fast math functions, and block-local shared memory (static: blocks run one after another).
    const SHIM: &str = r#"#include <barrier>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>
#define __device__
#define __global__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define OPTIML_ASM(...)
struct dim3_ { unsigned x = 0, y = 0, z = 0; };
extern thread_local dim3_ threadIdx, blockIdx;
extern dim3_ gridDim, blockDim;
void __syncthreads();
struct alignas(16) uint4 { unsigned x, y, z, w; };
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }
struct alignas(8) uint2 { unsigned x, y; };
inline uint2 make_uint2(unsigned x, unsigned y) { return {x, y}; }
struct alignas(8) float2 { float x, y; };
inline float2 make_float2(float x, float y) { return {x, y}; }
struct alignas(16) float4 { float x, y, z, w; };
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
inline float __uint_as_float(unsigned u) { float f; std::memcpy(&f, &u, 4); return f; }
inline unsigned __float_as_uint(float f) { unsigned u; std::memcpy(&u, &f, 4); return u; }
inline float __expf(float x) { return expf(x); }
inline float __logf(float x) { return logf(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
inline float rsqrtf(float x) { return 1.f / sqrtf(x); }
template <class U> U __shfl_xor_sync(unsigned, U, int) { std::abort(); }
template <class U> U __shfl_up_sync(unsigned, U, int) { std::abort(); }
template <class U> U __shfl_sync(unsigned, U, int) { std::abort(); }
template <class U> void __stwb(U* p, U v) { *p = v; }
"#;

    /// The host compiler, or `None` with a note (the CPU runs are skipped where it is missing).
    fn host_compiler() -> Option<&'static str> {
        static FOUND: std::sync::OnceLock<Option<&'static str>> = std::sync::OnceLock::new();
        *FOUND.get_or_init(|| {
            let ok = Command::new("g++")
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success());
            if !ok {
                eprintln!("skipped: no g++ for the CPU runs of generated column kernels");
            }
            ok.then_some("g++")
        })
    }

    /// Inline assembly (16-bit conversions on sm_80+, the optimisation barriers) has host fallbacks or none
    /// needed: it becomes nothing.
    fn hostable(source: &str) -> String {
        source
            .replace("asm volatile(", "OPTIML_ASM(")
            .replace("asm(", "OPTIML_ASM(")
    }

    /// The host program: reads the inputs (`in{k}.bin`, stored `mis` elements past an aligned address), runs
    /// every block of the launch with a thread per CUDA thread, checks 8 guard elements around every output and
    /// writes them (`out{k}.bin`). Arguments: `mis`, the grid cap (0: none), every extent, every parameter.
    fn driver(p: &Program, launch: &ProgramLaunch) -> String {
        let nd = p.dims.len();
        let len = |axes: &[usize]| -> String {
            let mut t = vec!["1LL".to_string()];
            t.extend(axes.iter().map(|d| format!("n[{d}]")));
            t.join(" * ")
        };
        let mut d = String::from("#include \"shim.h\"\n#include \"kernel.cu\"\n");
        d += "thread_local dim3_ threadIdx, blockIdx;\ndim3_ gridDim, blockDim;\nstatic std::barrier<>* bar_;\n";
        d += "void __syncthreads() { bar_->arrive_and_wait(); }\n";
        d += r#"template <class U> static U* load(std::vector<U>& v, const char* path, size_t n, size_t mis) {
    v.assign(n + 16, U());
    FILE* f = fopen(path, "rb");
    if (!f || fread(v.data() + mis, sizeof(U), n, f) != n) { fprintf(stderr, "cannot read %s\n", path); exit(2); }
    fclose(f);
    return v.data() + mis;
}
template <class U> static U* guarded(std::vector<unsigned char>& v, size_t n, size_t mis) {
    v.assign((n + 16 + mis) * sizeof(U), 0xAB);
    return reinterpret_cast<U*>(v.data()) + 8 + mis;
}
template <class U> static void save(const char* path, const std::vector<unsigned char>& v, size_t n, size_t mis) {
    const size_t lo = (8 + mis) * sizeof(U), hi = lo + n * sizeof(U);
    for (size_t i = 0; i < v.size(); ++i)
        if ((i < lo || i >= hi) && v[i] != 0xAB) { fprintf(stderr, "%s: guard byte %zu written\n", path, i); exit(3); }
    FILE* f = fopen(path, "wb");
    fwrite(v.data() + lo, 1, hi - lo, f);
    fclose(f);
}
"#;
        d += "int main(int argc, char** argv) {\n";
        d += &format!(
            "    if (argc != {}) {{ fprintf(stderr, \"arguments\\n\"); return 2; }}\n",
            3 + nd + p.params.len()
        );
        d += "    const size_t mis = strtoull(argv[1], 0, 10);\n    const unsigned long long cap = strtoull(argv[2], 0, 10);\n";
        d += &format!("    long long n[{}];\n", nd.max(1));
        for i in 0..nd {
            d += &format!("    n[{i}] = atoll(argv[{}]);\n", 3 + i);
        }
        let mut args: Vec<String> = Vec::new();
        for (k, t) in p.inputs.iter().enumerate() {
            d += &format!(
                "    std::vector<T> iv{k};\n    const T* a{k} = load(iv{k}, \"in{k}.bin\", {}, mis);\n",
                len(&t.axes)
            );
            args.push(format!("a{k}"));
        }
        let outs: Vec<&optiml_spec::program::Stmt> = p.outputs().map(|(_, s)| s).collect();
        for (o, s) in outs.iter().enumerate() {
            d += &format!(
                "    std::vector<unsigned char> ov{o};\n    {ty}* b{o} = guarded<{ty}>(ov{o}, {}, mis);\n",
                len(&s.axes),
                ty = emit::out_type(s.elem)
            );
            args.push(format!("b{o}"));
        }
        for i in 0..nd {
            args.push(format!("n[{i}]"));
        }
        for k in 0..p.params.len() {
            args.push(format!("(float)atof(argv[{}])", 3 + nd + k));
        }
        let items: Vec<String> = (0..nd)
            .filter(|i| launch.items_mask & (1 << i) != 0)
            .map(|i| format!("n[{i}]"))
            .collect();
        d += &format!(
            "    const unsigned long long items = 1ULL * {};\n",
            if items.is_empty() {
                "1".to_string()
            } else {
                items.join(" * ")
            }
        );
        d += &format!(
            "    unsigned long long blocks = (items + {ipb} - 1) / {ipb};\n    if (cap && blocks > cap) blocks = cap;\n",
            ipb = launch.items_per_block
        );
        d += &format!(
            "    gridDim.x = (unsigned)blocks; blockDim.x = {};\n",
            launch.threads
        );
        d += "    for (unsigned long long b = 0; b < blocks; ++b) {\n";
        d += &format!(
            "        std::barrier<> bar({});\n        bar_ = &bar;\n        std::vector<std::thread> ts;\n",
            launch.threads
        );
        d += &format!(
            "        for (unsigned t = 0; t < {}; ++t)\n            ts.emplace_back([&, t, b] {{ threadIdx.x = t; blockIdx.x = (unsigned)b; optiml_program({}); }});\n",
            launch.threads,
            args.join(", ")
        );
        d += "        for (auto& t : ts) t.join();\n    }\n";
        for (o, s) in outs.iter().enumerate() {
            d += &format!(
                "    save<{}>(\"out{o}.bin\", ov{o}, {}, mis);\n",
                emit::out_type(s.elem),
                len(&s.axes)
            );
        }
        d += "    return 0;\n}\n";
        d
    }

    /// A kernel built for the CPU.
    struct Host {
        dir: PathBuf,
        program: Program,
    }

    /// Builds `s`'s kernel of `shape` for the CPU in a directory of its own under `root`.
    fn build(root: &Path, tag: &str, shape: &ColumnShape, s: &ColumnSchedule) -> Host {
        let cxx = host_compiler().expect("checked by the caller");
        let dir = root.join(tag);
        std::fs::create_dir_all(dir.join("optiml")).expect("temp dir");
        let c = s.candidate(shape);
        let Launch::Program(launch) = c.launch else {
            panic!("{:?}", c.launch)
        };
        std::fs::write(
            dir.join("optiml/program.cuh"),
            hostable(crate::cuda::PROGRAM.text),
        )
        .expect("write");
        std::fs::write(dir.join("shim.h"), SHIM).expect("write");
        std::fs::write(dir.join("kernel.cu"), hostable(&c.source)).expect("write");
        std::fs::write(dir.join("main.cpp"), driver(&shape.program, &launch)).expect("write");
        let out = Command::new(cxx)
            .current_dir(&dir)
            .args([
                "-std=c++20",
                "-O1",
                "-w",
                "-pthread",
                "-I.",
                "main.cpp",
                "-o",
                "kernel",
            ])
            .output()
            .expect("g++ runs");
        assert!(
            out.status.success(),
            "{tag} ({}): g++ failed\n{}",
            c.schedule,
            String::from_utf8_lossy(&out.stderr)
        );
        Host {
            dir,
            program: shape.program.clone(),
        }
    }

    /// The storage bits of `v` (exactly representable in every dtype the tests use).
    fn store(dtype: DType, v: f32) -> Vec<u8> {
        match dtype {
            DType::F32 => v.to_le_bytes().to_vec(),
            // The test values have at most 8 significant bits: the upper half of the f32 is the bf16.
            DType::Bf16 => ((v.to_bits() >> 16) as u16).to_le_bytes().to_vec(),
            DType::F16 => panic!("f16 conversions are inline assembly: not run on the CPU"),
        }
    }

    impl Host {
        /// Runs at `extents` with `inputs` stored `mis` elements past an aligned address, the grid capped at
        /// `cap` blocks (0: none); every output's bytes.
        fn run(
            &self,
            extents: &[usize],
            inputs: &[Vec<f32>],
            params: &[f32],
            mis: usize,
            cap: u32,
        ) -> Vec<Vec<u8>> {
            let p = &self.program;
            for (k, v) in inputs.iter().enumerate() {
                let bytes: Vec<u8> = v.iter().flat_map(|&x| store(p.dtype, x)).collect();
                std::fs::write(self.dir.join(format!("in{k}.bin")), bytes).expect("write");
            }
            let mut args = vec![mis.to_string(), cap.to_string()];
            args.extend(extents.iter().map(usize::to_string));
            args.extend(params.iter().map(|v| format!("{v:e}")));
            let out = Command::new(self.dir.join("kernel"))
                .current_dir(&self.dir)
                .args(&args)
                .output()
                .expect("kernel runs");
            assert!(
                out.status.success(),
                "{}: {}",
                self.dir.display(),
                String::from_utf8_lossy(&out.stderr)
            );
            (0..p.outputs().count())
                .map(|o| std::fs::read(self.dir.join(format!("out{o}.bin"))).expect("output"))
                .collect()
        }
    }

    /// Output bytes as values.
    fn values(p: &Program, elem: Elem, bytes: &[u8]) -> Vec<f64> {
        match (elem, p.dtype) {
            (Elem::I64, _) => bytes
                .chunks(8)
                .map(|c| i64::from_le_bytes(c.try_into().expect("8 bytes")) as f64)
                .collect(),
            (Elem::I32, _) => bytes
                .chunks(4)
                .map(|c| i32::from_le_bytes(c.try_into().expect("4 bytes")) as f64)
                .collect(),
            (_, DType::F32) => bytes
                .chunks(4)
                .map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes")) as f64)
                .collect(),
            _ => bytes
                .chunks(2)
                .map(|c| {
                    f32::from_bits(
                        (u16::from_le_bytes(c.try_into().expect("2 bytes")) as u32) << 16,
                    ) as f64
                })
                .collect(),
        }
    }

    /// Inputs with many ties (multiples of 1/8 in [-4, 4], some runs of equal values): argmax / argmin must
    /// keep the first.
    fn inputs(p: &Program, extents: &[usize], seed: u64) -> Vec<Vec<f32>> {
        let mut state = seed;
        p.inputs
            .iter()
            .map(|t| {
                (0..Program::len_of(&t.axes, extents))
                    .map(|i| {
                        state = crate::search::splitmix(state);
                        let v = ((state >> 40) % 65) as f32 / 8.0 - 4.0;
                        if i % 7 == 3 { 1.5 } else { v }
                    })
                    .collect()
            })
            .collect()
    }

    /// Runs every schedule at every extent, aligned and misaligned, and checks the outputs against the float64
    /// interpreter and, bit for bit, against the first schedule's.
    fn agree(text: &str, dtype: DType, schedules: &[ColumnSchedule], shapes: &[Vec<usize>]) {
        if host_compiler().is_none() {
            return;
        }
        let (original, shape) = columns(text, dtype);
        let root = std::env::temp_dir().join(format!(
            "optiml-columns-{}-{}",
            std::process::id(),
            text.len() * 31 + dtype as usize
        ));
        let params: Vec<f32> = (0..original.params.len()).map(|k| 0.5 + k as f32).collect();
        let hosts: Vec<(String, Host)> = schedules
            .iter()
            .enumerate()
            .map(|(i, s)| (s.describe(), build(&root, &format!("s{i}"), &shape, s)))
            .collect();
        let outputs: Vec<(usize, Elem)> = original
            .outputs()
            .map(|(_, s)| (s.axes.len(), s.elem))
            .collect();
        for (e, extents) in shapes.iter().enumerate() {
            let data = inputs(&original, extents, 7 + e as u64);
            let host_inputs: Vec<HostTensor> = data.iter().map(|v| HostTensor::Float(v)).collect();
            let params64: Vec<f64> = params.iter().map(|&v| v as f64).collect();
            let want = interp::eval(&original, extents, &host_inputs, &params64, None, 1)
                .unwrap_or_else(|e| panic!("{text} at {extents:?}: {e:?}"));
            let mut first: Option<Vec<Vec<u8>>> = None;
            for (name, host) in &hosts {
                for (mis, cap) in [(0, 0), (1, 2)] {
                    let got = host.run(extents, &data, &params, mis, cap);
                    let at = format!("{text} {dtype:?} at {extents:?}, {name}, offset {mis}");
                    match &first {
                        None => {
                            for (o, (bytes, r)) in got.iter().zip(&want).enumerate() {
                                let vals = values(&shape.program, outputs[o].1, bytes);
                                assert_eq!(vals.len(), r.values.len(), "{at}: output {o}");
                                let tol = if dtype == DType::F32 { 1e-4 } else { 2e-2 };
                                for (i, (&g, &w)) in vals.iter().zip(&r.values).enumerate() {
                                    assert!(
                                        (g - w).abs() <= tol * (1.0 + w.abs()),
                                        "{at}: output {o}[{i}] = {g}, the interpreter says {w}"
                                    );
                                }
                            }
                            first = Some(got);
                        }
                        Some(f) => {
                            assert!(got == *f, "{at}: differs from the first schedule's bits")
                        }
                    }
                }
            }
        }
        let _ = std::fs::remove_dir_all(&root);
    }

    /// Schedules of one split that differ in everything else: block size, unroll, cache (the register path and
    /// the streamed one), vector width (aligned and per-column paths), grid.
    fn spread(split: u32) -> Vec<ColumnSchedule> {
        let threads = |t: u32| (t).max(32 * split);
        let mut out = vec![
            schedule(threads(64), split, 1, 0, 1),
            schedule(threads(256), split, 8, 32, 2),
            schedule(threads(128), split, 4, 64, 4),
        ];
        out.push(ColumnSchedule {
            blocks_per_sm: 1,
            ..schedule(threads(256), split, 16, 16, 1)
        });
        out
    }

    #[test]
    fn rms_norm_over_channels_agrees_across_schedules_on_the_cpu() {
        let shapes = [
            vec![2, 64, 3, 6],
            vec![2, 64, 2, 8],
            vec![1, 300, 3, 4],
            vec![2, 7, 3, 5],
        ];
        for dtype in [DType::F32, DType::Bf16] {
            for split in [1, 4] {
                agree(
                    "rms norm over dim 1 of a 4-D tensor, eps 1e-5",
                    dtype,
                    &spread(split),
                    &shapes,
                );
            }
        }
    }

    #[test]
    fn statistics_over_dim_1_agree_across_schedules_on_the_cpu() {
        let text = "s[b, k] = sum(j) x[b, j, k]; m[b, k] = max(j) x[b, j, k]; a[b, k] = argmax(j) x[b, j, k]; \
                    u[b, k] = mean(j) x[b, j, k]; i[b, k] = argmin(j) x[b, j, k], i32 indices";
        let shapes = [vec![3, 37, 10], vec![2, 200, 9], vec![2, 1, 8]];
        for split in [1, 2] {
            agree(text, DType::F32, &spread(split), &shapes);
        }
        agree(text, DType::Bf16, &spread(4), &shapes);
    }

    #[test]
    fn softmax_and_broadcast_operands_agree_across_schedules_on_the_cpu() {
        let shapes = [vec![2, 40, 6], vec![1, 130, 5], vec![3, 5, 8]];
        agree(
            "softmax over dim 1 of a 3-D tensor",
            DType::F32,
            &spread(2),
            &shapes,
        );
        // A weight without the innermost column axis, a per-column bias and a parameter.
        agree(
            "y[b, j, k] = x[b, j, k] * w[b, j] / sum(j) x[b, j, k] + bias[k] * s",
            DType::Bf16,
            &spread(1),
            &shapes,
        );
    }
}
