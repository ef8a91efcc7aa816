//! Column programs (reductions over a middle or leading axis: `y[b, k] = sum(j) x[b, j, k]`, a norm over the
//! channels of `x[b, c, h, w]`): a thread per column and split share, consecutive threads on consecutive
//! columns so every step of the walk down the reduced axes reads contiguous memory across a warp.
//!
//! A block holds `threads / split` columns; the `split` threads of a column take its elements `s, s + split, …`
//! (`split > 1` gives long columns more parallelism), fold them in order, and combine in shared memory in split
//! order. The first `cache` elements per thread of each input worth keeping stay in registers between passes (a
//! column short enough is read once); the rest is read again by each pass (`unroll` loads in flight per thread).
//! The combine order depends on the schedule and the shape only: repeated runs give the same bits.

use super::classify::ColumnShape;
use super::emit::{self, Code, Env};
use super::plan::{self, Passes, Role};
use super::rows::accumulate_at;
use crate::experts::Candidate;
use crate::search::{Bottleneck, Transform, Tunable};
use optiml_runtime::{Arch, Launch, ProgramLaunch};
use optiml_spec::program::{Expr, Program, Reduce};

/// How a column kernel maps columns to threads: what the search transforms.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
// A recorded schedule reads as this kernel's only if it has no other kernel's fields.
#[serde(deny_unknown_fields)]
pub struct ColumnSchedule {
    /// Threads per block.
    pub threads: u32,
    /// Threads per column (each folds every `split`-th element).
    pub split: u32,
    /// Loads in flight per input per thread in a streamed step.
    pub unroll: u32,
    /// Elements per thread kept in registers between passes, shared by the inputs worth keeping.
    pub cache: u32,
    /// Nonzero: the grid holds at most this many blocks per SM and blocks loop over columns (0: a block per
    /// column group).
    pub blocks_per_sm: u32,
}

const THREADS: [u32; 5] = [64, 128, 256, 512, 1024];
const SPLIT: [u32; 6] = [1, 2, 4, 8, 16, 32];
const UNROLL: [u32; 4] = [1, 2, 4, 8];
const CACHE: [u32; 5] = [0, 4, 8, 16, 32];
const BLOCKS_PER_SM: [u32; 5] = [0, 1, 2, 4, 8];

/// Registers a thread needs beside its cached elements.
const REG_OVERHEAD: u32 = 40;

impl ColumnSchedule {
    /// Columns per block.
    pub fn columns_per_block(&self) -> u32 {
        self.threads / self.split
    }

    /// The candidate computing `shape`'s program.
    pub fn candidate(&self, shape: &ColumnShape) -> Candidate {
        let p = &shape.program;
        let passes = Passes::new(p, &shape.reduced);
        let cached = passes.cached.len() as u32;
        let k = self.cache.checked_div(cached).unwrap_or(0);
        let describe = self.describe();
        let mut c = emit::prologue(p, "columns", &describe);
        c.line(format!(
            "#define OPTIML_IT {}  // columns per block",
            self.columns_per_block()
        ));
        c.line(format!(
            "#define OPTIML_S {}  // threads per column",
            self.split
        ));
        c.line(format!(
            "#define OPTIML_K {k}  // register elements per thread per cached input"
        ));
        c.line(format!(
            "#define OPTIML_U {}  // loads in flight",
            self.unroll
        ));
        c.line("");
        emit::entry(&mut c, p, &format!("{}, 1", self.threads));
        Kernel {
            p,
            shape,
            passes: &passes,
            s: self,
            k,
        }
        .body(&mut c);
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
            }),
            schedule: describe,
        }
    }
}

struct Kernel<'a> {
    p: &'a Program,
    shape: &'a ColumnShape,
    passes: &'a Passes,
    s: &'a ColumnSchedule,
    /// Register elements per thread per cached input.
    k: u32,
}

struct ElementEnv<'a> {
    k: &'a Kernel<'a>,
}

impl Env for ElementEnv<'_> {
    fn input(&self, k: usize) -> String {
        if self.k.passes.item_inputs.contains(&k) {
            format!("si{k}")
        } else {
            format!("x{k}")
        }
    }
    fn value(&self, j: usize) -> String {
        if self.k.passes.role[j] == Role::Element {
            format!("v{j}")
        } else {
            plan::scalar_ref(self.k.p, j)
        }
    }
    fn fast(&self) -> bool {
        self.k.p.dtype != optiml_spec::DType::F32
    }
    fn invariant(&self, e: &Expr) -> bool {
        let passes = self.k.passes;
        emit::leaves_all(e, &|leaf| match leaf {
            Expr::Input(k) => passes.item_inputs.contains(k),
            Expr::Value(j) => passes.role[*j] != Role::Element,
            _ => false,
        })
    }
}

/// Per-item values, computed once: divisions stay divisions.
struct ScalarEnv<'a>(ElementEnv<'a>);

impl Env for ScalarEnv<'_> {
    fn input(&self, k: usize) -> String {
        self.0.input(k)
    }
    fn value(&self, j: usize) -> String {
        self.0.value(j)
    }
}

impl Kernel<'_> {
    fn is_c(&self, d: usize) -> bool {
        self.shape.reduced.contains(&d)
    }

    /// The element stride of the reduced run in a tensor with `axes` (1 when they are its last axes).
    fn c_stride(&self, axes: &[usize]) -> String {
        match axes.iter().rposition(|&d| self.is_c(d)) {
            Some(last) => emit::product(&axes[last + 1..]),
            None => "0LL".into(),
        }
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

    fn body(&self, c: &mut Code) {
        let p = self.p;
        let (plain_slots, arg_slots) = self.passes.slots();
        let split = self.s.split;
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
        c.line("(void)sp;");
        for k in 0..p.params.len() {
            c.line(format!("(void)p{k};"));
        }
        if split > 1 && plain_slots > 0 {
            c.line(format!(
                "__shared__ float red_f[{plain_slots}][OPTIML_S][OPTIML_IT];"
            ));
            if arg_slots > 0 {
                c.line(format!(
                    "__shared__ long long red_i[{arg_slots}][OPTIML_S][OPTIML_IT];"
                ));
            }
        }
        // Every thread runs every iteration (the combine's barriers); those past the last column compute on
        // column 0 and neither load nor store.
        c.open("for (long long ib = blockIdx.x; ib * OPTIML_IT < items; ib += gridDim.x) {");
        c.line("const long long item = ib * OPTIML_IT + tx;");
        c.line("const bool act = item < items;");
        c.line("const long long it = act ? item : 0LL;");
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
        emit::coords(c, "it", &self.shape.items, &needed, "long long");
        for k in self.element_inputs() {
            let axes = &p.inputs[k].axes;
            c.line(format!(
                "const T* r{k} = in{k} + {};",
                emit::offset(axes, &self.shape.reduced)
            ));
            c.line(format!("const long long cs{k} = {};", self.c_stride(axes)));
        }
        for &j in &self.passes.element_outputs {
            let o = self.out_ordinal(j);
            let axes = &p.stmts[j].axes;
            c.line(format!(
                "T* w{o} = out{o} + {};",
                emit::offset(axes, &self.shape.reduced)
            ));
            c.line(format!("const long long ws{o} = {};", self.c_stride(axes)));
        }
        for &k in &self.passes.item_inputs {
            c.line(format!(
                "const float si{k} = act ? IO::get(in{k}[{}]) : 0.f;",
                emit::offset(&p.inputs[k].axes, &[])
            ));
        }
        // This thread's elements of the column: `j = 0, 1, …` is the column's element `j · split + sp`. Addresses
        // step by a per-tensor stride from a per-thread start, and one count bounds every check (0 past the last
        // column), so an element costs no 64-bit index arithmetic beyond its address.
        c.line(
            "const long long nmine = (act && sp < ncols) ? (ncols - 1 - sp) / OPTIML_S + 1 : 0LL;",
        );
        for k in self.element_inputs() {
            c.line(format!("const T* pr{k} = r{k} + (long long)sp * cs{k};"));
            c.line(format!("const long long st{k} = OPTIML_S * cs{k};"));
        }
        for &j in &self.passes.element_outputs {
            let o = self.out_ordinal(j);
            c.line(format!("T* pw{o} = w{o} + (long long)sp * ws{o};"));
            c.line(format!("const long long sw{o} = OPTIML_S * ws{o};"));
        }
        if self.k > 0 {
            for k in &self.passes.cached {
                c.line(format!("T rg{k}[OPTIML_K];"));
            }
        }
        for pass in 0..=self.passes.reductions.len() {
            self.scalars(c, &self.passes.stages[pass]);
            if pass < self.passes.count() {
                self.pass(c, pass);
            }
        }
        if !self.passes.scalar_outputs.is_empty() {
            c.open("if (act && sp == 0) {");
            for &j in &self.passes.scalar_outputs {
                let o = self.out_ordinal(j);
                c.line(format!(
                    "out{o}[{}] = {};",
                    emit::offset(&p.stmts[j].axes, &[]),
                    plan::scalar_store(p, j)
                ));
            }
            c.close("}");
        }
        c.close("}");
    }

    fn scalars(&self, c: &mut Code, stmts: &[usize]) {
        let env = ScalarEnv(ElementEnv { k: self });
        for &j in stmts {
            c.line(format!(
                "const float s{j} = {};",
                emit::expr(&self.p.stmts[j].expr, &env)
            ));
        }
    }

    fn pass(&self, c: &mut Code, pass: usize) {
        let need = &self.passes.need[pass];
        let is_final = self.passes.is_final(pass);
        c.line(format!("// pass {pass}"));
        if !is_final {
            for &j in &self.passes.reductions[pass] {
                match self.passes.role[j] {
                    Role::Reduction(op) if op.is_arg() => {
                        let init = if op == Reduce::Argmax {
                            "-optiml_p::inf_f()"
                        } else {
                            "optiml_p::inf_f()"
                        };
                        c.line(format!("float a{j} = {init};"));
                        c.line(format!("long long i{j} = optiml_p::arg_none();"));
                    }
                    Role::Reduction(op) => {
                        c.line(format!("float a{j} = {}::id();", emit::reduce_op(op)));
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
        if self.k > 0 {
            for &k in &cached_here {
                if self.passes.first_use(k) == Some(pass) {
                    c.line("#pragma unroll");
                    c.line(format!(
                        "for (int j = 0; j < OPTIML_K; ++j) rg{k}[j] = j < nmine ? pr{k}[j * st{k}] : (T)0;"
                    ));
                }
            }
            let ur = self.s.unroll.min(self.k);
            c.line("#pragma unroll");
            c.open(format!("for (int j0 = 0; j0 < OPTIML_K; j0 += {ur}) {{"));
            self.segment(c, pass, &ur.to_string(), &|k| cached_here.contains(&k));
            c.close("}");
        }
        c.open("for (long long j0 = OPTIML_K; j0 < nmine; j0 += OPTIML_U) {");
        self.segment(c, pass, "OPTIML_U", &|_| false);
        c.close("}");
        if !is_final {
            self.combine(c, pass);
        }
    }

    /// `count` elements per thread (`c_ = (j0 + u) · split + sp`): loads of the inputs not in registers, then
    /// the elements.
    fn segment(&self, c: &mut Code, pass: usize, count: &str, in_regs: &dyn Fn(usize) -> bool) {
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
            c.line(format!("T t{k}[{count}];"));
        }
        if !loaded.is_empty() {
            for &k in &loaded {
                c.line(format!("const T* b{k} = pr{k} + j0 * st{k};"));
            }
            c.line("#pragma unroll");
            c.open(format!("for (int u = 0; u < {count}; ++u) {{"));
            for &k in &loaded {
                c.line(format!(
                    "t{k}[u] = j0 + u < nmine ? b{k}[u * st{k}] : (T)0;"
                ));
            }
            c.close("}");
        }
        let env = ElementEnv { k: self };
        if is_final {
            for &j in &self.passes.element_outputs {
                let o = self.out_ordinal(j);
                c.line(format!("T* bw{o} = pw{o} + j0 * sw{o};"));
            }
        }
        c.line("#pragma unroll");
        c.open(format!("for (int u = 0; u < {count}; ++u) {{"));
        c.open("if (j0 + u < nmine) {");
        for &k in &need.element_inputs {
            let v = if in_regs(k) {
                format!("rg{k}[j0 + u]")
            } else {
                format!("t{k}[u]")
            };
            c.line(format!("const float x{k} = IO::get({v});"));
        }
        for &j in &need.elems {
            c.line(format!(
                "const float v{j} = {};",
                emit::expr(&p.stmts[j].expr, &env)
            ));
        }
        if is_final {
            for &j in &self.passes.element_outputs {
                let o = self.out_ordinal(j);
                c.line(format!("bw{o}[u * sw{o}] = IO::put(v{j});"));
            }
        } else {
            for &j in &self.passes.reductions[pass] {
                let (Role::Reduction(op), Expr::Reduce(_, _, body)) =
                    (self.passes.role[j], &p.stmts[j].expr)
                else {
                    continue;
                };
                c.line(accumulate_at(
                    op,
                    j,
                    &emit::expr(body, &env),
                    "((j0 + u) * OPTIML_S + sp)",
                ));
            }
        }
        c.close("}");
        c.close("}");
    }

    fn combine(&self, c: &mut Code, pass: usize) {
        let reds = &self.passes.reductions[pass];
        if self.s.split > 1 {
            let at = |array: &str, slot: usize, part: &str| format!("{array}[{slot}][{part}][tx]");
            self.passes.store_partials(c, reds, "sp", &at);
            c.line("__syncthreads();");
            self.passes.fold_partials(c, reds, "OPTIML_S", &at);
            // The next pass's combine overwrites the scratch.
            c.line("__syncthreads();");
        }
        self.passes.finish(c, reds);
    }
}

impl Tunable for ColumnSchedule {
    /// `256 threads, split 1, unroll 4, cache 8, grid: a block per column group`.
    fn describe(&self) -> String {
        let grid = if self.blocks_per_sm == 0 {
            "a block per column group".to_string()
        } else {
            format!("{} blocks/SM", self.blocks_per_sm)
        };
        format!(
            "{} threads, split {}, unroll {}, cache {}, grid: {grid}",
            self.threads, self.split, self.unroll, self.cache
        )
    }

    /// At least a warp of consecutive columns per block (coalesced loads), cached elements that leave the
    /// registers a thread needs besides, a grid cap of at most 2048 resident threads per SM.
    fn is_valid(&self) -> bool {
        THREADS.contains(&self.threads)
            && SPLIT.contains(&self.split)
            && self.threads / self.split >= 32
            && UNROLL.contains(&self.unroll)
            && CACHE.contains(&self.cache)
            && self.cache + REG_OVERHEAD <= (65536 / self.threads).min(255)
            && BLOCKS_PER_SM.contains(&self.blocks_per_sm)
            && self.threads * self.blocks_per_sm <= 2048
    }

    /// 256 threads on 256 columns, 4 loads in flight each, columns of up to 8 elements read once.
    fn default_for(_arch: Arch) -> Self {
        ColumnSchedule {
            threads: 256,
            split: 1,
            unroll: 4,
            cache: 8,
            blocks_per_sm: 0,
        }
    }

    fn space() -> Vec<Self> {
        let mut out = Vec::new();
        for threads in THREADS {
            for split in SPLIT {
                for unroll in UNROLL {
                    for cache in CACHE {
                        for blocks_per_sm in BLOCKS_PER_SM {
                            let s = ColumnSchedule {
                                threads,
                                split,
                                unroll,
                                cache,
                                blocks_per_sm,
                            };
                            if s.is_valid() {
                                out.push(s);
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
