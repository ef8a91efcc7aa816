//! Tree programs (reductions of every dimension, or of dimensions on both sides of a kept one: `‖x‖` over a
//! whole tensor, batch-norm statistics of `x[n, c, h, w]` per channel): few items, each far longer than a
//! block, so each item's elements are cut into `slices` contiguous ranges of tiles, one block each.
//!
//! The kernel runs once per reduction pass and once more to write ([`optiml_runtime::TreeLaunch`]). Launch `k`
//! folds pass `k`'s reductions over its block's tiles (each thread its own elements in order, then a warp xor
//! butterfly, then the warps in order) and stores one partial per reduction in the workspace. Every later
//! launch starts by folding the partials of the earlier passes, per item in slice order, with the same
//! fixed-order block combine: the result depends on the schedule and the shape only, so a run repeats bit for
//! bit.
//!
//! A tile is `threads · unroll` 16-byte chunks of one contiguous run (the `inner` reduced dimensions), each
//! thread `unroll` chunks a block width apart, loaded together then evaluated; a tile whose tensors are 16-byte
//! aligned (checked per tile) moves whole chunks, others element by element. Inputs with outer reduced
//! dimensions but no inner one are read once per tile.

use super::classify::{RowShape, TreeShape};
use super::emit::{self, Code};
use super::plan::{self, ElementEnv, Passes, Role, ScalarEnv};
use super::rows;
use crate::experts::Candidate;
use crate::search::{Bottleneck, Transform, Tunable};
use optiml_runtime::{Arch, Launch, ProgramLaunch, TreeLaunch};
use optiml_spec::program::{Expr, Program, Reduce};

/// Block size, loads in flight and grid of a tree kernel: what the search transforms.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
// A recorded schedule reads as this kernel's only if it has no other kernel's fields.
#[serde(deny_unknown_fields)]
pub struct TreeSchedule {
    /// Threads per block.
    pub threads: u32,
    /// 16-byte chunks per input in flight per thread (a tile is `threads · unroll` chunks).
    pub unroll: u32,
    /// Blocks per launch over all items (the runtime gives each item `blocks / items` of them, at least one).
    pub blocks: u32,
    /// Which blocks run together: `false`, an item's slices are consecutive blocks (item-major); `true`, the
    /// same slice of every item is (slice-major), so the blocks resident at once read the same part of an
    /// input the items share (a layer norm's affine weight and bias: `w[c, h, w]` beside `x[n, c, h, w]`)
    /// and it comes from DRAM once per launch rather than once per few items. The partials and their fold
    /// order do not change: the bits do not either.
    #[serde(default)]
    pub interleave: bool,
}

const THREADS: [u32; 4] = [128, 256, 512, 1024];
const UNROLL: [u32; 4] = [1, 2, 4, 8];
const BLOCKS: [u32; 5] = [264, 528, 1056, 2112, 4224];

/// Registers a thread needs beside its chunks in flight (folds, addresses, the item's scalars).
const REG_OVERHEAD: u32 = 40;

impl TreeSchedule {
    /// The chunks in flight per input that fit the block size's register share for a pass reading `inputs`
    /// tensors per element (at most the schedule's `unroll`): a chunk is 4 packed words and the elements it
    /// unpacks to.
    fn unroll_for(&self, inputs: u32, vec: u32) -> u32 {
        let cap = (65536 / self.threads).min(255);
        let per_chunk = 4 * inputs * (vec / 4).max(1);
        let mut unroll = self.unroll;
        while unroll > 1 && per_chunk * unroll + REG_OVERHEAD > cap {
            unroll /= 2;
        }
        unroll
    }

    /// The candidate computing `shape`'s program.
    pub fn candidate(&self, shape: &TreeShape) -> Candidate {
        let p = &shape.program;
        let mut passes = Passes::new(p, &shape.reduced);
        // Batch statistics read the data once for mean and variance, not twice.
        passes.fuse_moments(p);
        let vec = emit::vec_width(p.dtype);
        let unroll = self.unroll_for(passes.max_element_inputs(), vec);
        let describe = self.describe();
        let mut c = emit::prologue(p, "tree", &describe);
        c.line(format!(
            "#define OPTIML_TH {}  // threads per block",
            self.threads
        ));
        c.line(format!(
            "#define OPTIML_U {unroll}  // chunks in flight per input"
        ));
        c.line("#define OPTIML_TILE (OPTIML_TH * OPTIML_U * IO::V)  // elements per tile");
        c.line("");
        emit::entry_full(
            &mut c,
            p,
            &format!("{}, 1", self.threads),
            "",
            &["float* ws", "int stage", "long long slices"],
        );
        let k = Kernel {
            p,
            shape,
            passes: &passes,
            warps: self.threads / 32,
            interleave: self.interleave,
        };
        k.body(&mut c);
        c.close("}");
        let partials = k.slot(usize::MAX) as u32;
        Candidate {
            source: c.finish(),
            entry: super::ENTRY,
            launch: Launch::Program(ProgramLaunch {
                threads: self.threads,
                smem_bytes: 0,
                items_mask: emit::mask(shape.items.iter().copied()),
                items_per_block: 1,
                max_blocks_per_sm: 0,
                cluster: 1,
                nonempty_mask: emit::nonempty_mask(p),
                tree: Some(TreeLaunch {
                    blocks: self.blocks,
                    tile: self.threads * unroll * vec,
                    passes: passes.reductions.len() as u32,
                    partials,
                }),
            }),
            schedule: describe,
        }
    }
}

impl TreeShape {
    /// The tree for rows of `row_len` elements of `shape`'s program, where it reads the data fewer times than
    /// the row kernel: rows longer than a cluster keeps close (192 KiB per block, 8
    /// blocks), which the row kernel reads from DRAM once per pass, of a program whose mean and variance fuse
    /// into one pass (group norm over 8 · 512 · 512 elements: two reads and a write instead of three reads and
    /// a write). `None` where the row kernel does as well, and for a program with a tail ([`super::Tail`]).
    pub fn for_long_rows(shape: &RowShape, row_len: usize, arch: Arch) -> Option<TreeShape> {
        // A tail folds per-row values, which only the row kernel stores.
        if shape.tail.is_some() {
            return None;
        }
        let p = &shape.program;
        // The row kernel's passes, against the tree's.
        let plain = rows::passes(shape);
        let mut fused = plain.clone();
        fused.fuse_moments(p);
        let cached = plain.cached.len().max(1);
        let row_bytes = row_len * p.dtype.bytes() * cached;
        let cluster = if arch.major >= 9 {
            *rows::CLUSTER.last().unwrap_or(&1) as usize
        } else {
            1
        };
        if fused.count() < plain.count() && row_bytes > cluster * rows::BLOCK_SHARE {
            TreeShape::of_rows(shape)
        } else {
            None
        }
    }

    /// The tree over `shape`'s rows, whatever their length (`None` for a program with a tail): what
    /// [`TreeShape::for_long_rows`] gives where it pays, and what a tree schedule logged for a row program reads
    /// as.
    pub fn of_rows(shape: &RowShape) -> Option<TreeShape> {
        shape.tail.is_none().then(|| TreeShape {
            program: shape.program.clone(),
            reduced: shape.reduced.clone(),
            inner: shape.reduced.len(),
            items: shape.items.clone(),
        })
    }
}

struct Kernel<'a> {
    p: &'a Program,
    shape: &'a TreeShape,
    passes: &'a Passes,
    warps: u32,
    /// See [`TreeSchedule::interleave`].
    interleave: bool,
}

impl Kernel<'_> {
    /// The values at an element of this kernel, the element inputs as `element` names them.
    fn env<'b>(&'b self, element: &'b dyn Fn(usize) -> String) -> ElementEnv<'b> {
        ElementEnv {
            p: self.p,
            passes: self.passes,
            element,
        }
    }

    /// An element input's value: element `l` of its unpacked chunk, or for an input without the inner
    /// dimensions its value for the tile.
    fn element(&self, k: usize) -> String {
        if self.chunked(k) {
            format!("x{k}[l]")
        } else {
            format!("c{k}")
        }
    }

    /// Whether input `k` has the inner (contiguous) dimensions: read in chunks, else once per tile.
    fn chunked(&self, k: usize) -> bool {
        let inner = self.shape.inner_dims();
        self.p.inputs[k].axes.iter().any(|d| inner.contains(d))
    }

    fn out_ordinal(&self, j: usize) -> usize {
        emit::output_ordinals(self.p)[j].unwrap_or(usize::MAX)
    }

    /// The first workspace slot of reduction `j` (for a statement that is none, the slots in all): the
    /// reductions in pass order, one slot each but a moment pair's three (count, mean, squared distance) on
    /// its mean.
    fn slot(&self, j: usize) -> usize {
        let mut at = 0;
        for &r in self.passes.reductions.iter().flatten() {
            if r == j {
                return at;
            }
            at += match self.passes.moment_of(r) {
                Some((m, _)) if m == r => 3,
                Some(_) => 0,
                None => 1,
            };
        }
        at
    }

    /// Pass `pass`'s reductions that fold one value each (every one but the moment pairs').
    fn plain(&self, pass: usize) -> Vec<usize> {
        self.passes
            .reductions_of(pass)
            .iter()
            .copied()
            .filter(|&j| self.passes.moment_of(j).is_none())
            .collect()
    }

    /// Pass `pass`'s moment pairs `(mean, spread)`.
    fn pairs(&self, pass: usize) -> Vec<(usize, usize)> {
        self.passes
            .moments
            .iter()
            .copied()
            .filter(|(m, _)| self.passes.reductions_of(pass).contains(m))
            .collect()
    }

    fn body(&self, c: &mut Code) {
        let p = self.p;
        let shape = self.shape;
        let npasses = self.passes.reductions.len();
        let plain_slots = (0..npasses).map(|k| self.plain(k).len()).max().unwrap_or(0);
        let pair_slots = (0..npasses)
            .map(|k| 3 * self.pairs(k).len())
            .max()
            .unwrap_or(0);
        c.line(format!(
            "const long long G = {};",
            emit::product(&shape.items)
        ));
        c.line(format!(
            "const long long ncols = {};",
            emit::product(&shape.reduced)
        ));
        c.line(format!(
            "const long long ninner = {};",
            emit::product(shape.inner_dims())
        ));
        c.line(format!(
            "const long long nouter = {};",
            emit::product(shape.outer_dims())
        ));
        c.line("(void)G; (void)ncols;");
        for k in 0..p.params.len() {
            c.line(format!("(void)p{k};"));
        }
        if self.interleave {
            c.line("const long long sl = (long long)blockIdx.x / G;");
            c.line("const long long g = (long long)blockIdx.x - sl * G;");
        } else {
            c.line("const long long g = (long long)blockIdx.x / slices;");
            c.line("const long long sl = (long long)blockIdx.x - g * slices;");
        }
        c.line("const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;");
        c.line("(void)lane; (void)warp;");
        emit::coords(c, "g", &shape.items, &shape.items, "long long");
        for &k in &self.passes.item_inputs {
            c.line(format!(
                "const float si{k} = IO::get(in{k}[{}]);",
                emit::offset(&p.inputs[k].axes, &[])
            ));
        }
        if self.warps > 1 && plain_slots > 0 {
            c.line(format!(
                "__shared__ float red_f[2][{plain_slots}][{}];",
                self.warps
            ));
        }
        if self.warps > 1 && pair_slots > 0 {
            c.line(format!(
                "__shared__ float red_m[2][{pair_slots}][{}];",
                self.warps
            ));
        }
        if self.warps > 1 && plain_slots + pair_slots > 0 {
            c.line("int buf = 0;");
        }
        // This block's tiles: an even share of the item's, the first `ntiles % slices` blocks one more (no
        // product of two counts, which could overflow).
        c.line("const long long tpu = (ninner + OPTIML_TILE - 1) / OPTIML_TILE;");
        c.line("const long long ntiles = nouter * tpu;");
        c.line("const long long per = ntiles / slices, extra = ntiles - per * slices;");
        c.line("const long long tb = sl * per + (sl < extra ? sl : extra);");
        c.line("const long long te = tb + per + (sl < extra ? 1 : 0);");
        c.line("const long long my0 = (long long)tid * IO::V;");
        c.line("(void)te; (void)my0;");
        for pass in 0..npasses {
            self.scalars(c, &self.passes.stages[pass]);
            c.open(format!("if (stage == {pass}) {{"));
            self.init(c, pass);
            self.tiles(c, pass);
            self.combine(c, pass);
            c.open("if (tid == 0) {");
            for j in self.plain(pass) {
                c.line(format!(
                    "ws[({} * G + g) * slices + sl] = a{j};",
                    self.slot(j)
                ));
            }
            for (m, _) in self.pairs(pass) {
                for (i, v) in ["cn", "cm", "cq"].iter().enumerate() {
                    c.line(format!(
                        "ws[({} * G + g) * slices + sl] = {v}{m};",
                        self.slot(m) + i
                    ));
                }
            }
            c.close("}");
            c.line("return;");
            c.close("}");
            // Later launches: this pass's value from every block's partial, in slice order.
            c.line(format!("// pass {pass}'s values from the workspace"));
            self.init(c, pass);
            c.open("for (long long s = tid; s < slices; s += OPTIML_TH) {");
            for j in self.plain(pass) {
                let Role::Reduction(op) = self.passes.role[j] else {
                    continue;
                };
                c.line(format!(
                    "a{j} = {}::op(a{j}, ws[({} * G + g) * slices + s]);",
                    emit::reduce_op(op),
                    self.slot(j)
                ));
            }
            for (m, _) in self.pairs(pass) {
                let at = |i: usize| format!("ws[({} * G + g) * slices + s]", self.slot(m) + i);
                c.line(format!(
                    "optiml_p::moments_merge(cn{m}, cm{m}, cq{m}, {}, {}, {});",
                    at(0),
                    at(1),
                    at(2)
                ));
            }
            c.close("}");
            self.combine(c, pass);
            self.passes.finish(c, &self.plain(pass));
            for (m, q) in self.pairs(pass) {
                c.line(format!("const float s{m} = cm{m};"));
                if self.passes.role[q] == Role::Reduction(Reduce::Mean) {
                    c.line(format!("const float s{q} = cq{m} / (float)ncols;"));
                } else {
                    c.line(format!("const float s{q} = cq{m};"));
                }
            }
        }
        self.scalars(c, &self.passes.stages[npasses]);
        if !self.passes.element_outputs.is_empty() {
            self.tiles(c, npasses);
        }
        if !self.passes.scalar_outputs.is_empty() {
            c.open("if (sl == 0 && tid == 0) {");
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
    }

    fn scalars(&self, c: &mut Code, stmts: &[usize]) {
        let element = |k| self.element(k);
        let env = ScalarEnv(self.env(&element));
        for &j in stmts {
            c.line(format!(
                "const float s{j} = {};",
                emit::expr(&self.p.stmts[j].expr, &env)
            ));
        }
    }

    /// The accumulators of pass `pass`'s reductions, at their identities.
    fn init(&self, c: &mut Code, pass: usize) {
        for j in self.plain(pass) {
            if let Role::Reduction(op) = self.passes.role[j] {
                c.line(format!("float a{j} = {}::id();", emit::reduce_op(op)));
            }
        }
        for (m, _) in self.pairs(pass) {
            c.line(format!("float cn{m} = 0.f, cm{m} = 0.f, cq{m} = 0.f;"));
        }
    }

    /// The block's tiles for pass `pass` (the final one writes the element outputs).
    fn tiles(&self, c: &mut Code, pass: usize) {
        let p = self.p;
        let shape = self.shape;
        let inner = shape.inner_dims();
        let need = &self.passes.need[pass];
        let is_final = self.passes.is_final(pass);
        c.line(format!(
            "// pass {pass}{}",
            if is_final {
                ": outputs".to_string()
            } else {
                format!(": reductions {:?}", self.passes.reductions[pass])
            }
        ));
        c.open("for (long long t = tb; t < te; ++t) {");
        c.line("const long long ot = t / tpu;");
        c.line("const long long i0 = (t - ot * tpu) * OPTIML_TILE;");
        emit::coords(c, "ot", shape.outer_dims(), shape.outer_dims(), "long long");
        let mut aligned = Vec::new();
        for &k in &need.element_inputs {
            let axes = &p.inputs[k].axes;
            if self.chunked(k) {
                c.line(format!(
                    "const T* b{k} = in{k} + ({}) + i0 + my0;",
                    emit::offset(axes, inner)
                ));
                aligned.push(format!("optiml_p::aligned16(b{k} - my0)"));
            } else {
                c.line(format!(
                    "const float c{k} = IO::get(in{k}[{}]);",
                    emit::offset(axes, &[])
                ));
            }
        }
        if is_final {
            for &j in &self.passes.element_outputs {
                let o = self.out_ordinal(j);
                c.line(format!(
                    "T* w{o} = out{o} + ({}) + i0 + my0;",
                    emit::offset(&p.stmts[j].axes, inner)
                ));
                aligned.push(format!("optiml_p::aligned16(w{o} - my0)"));
            }
        }
        if aligned.is_empty() {
            aligned.push("true".into());
        }
        // Elements of the run left from this thread's first one (negative past the end).
        c.line("const long long left = ninner - i0 - my0;");
        c.line("const int rr = (int)(left < 0x7FFFFFFFLL ? left : 0x7FFFFFFFLL);");
        c.open(format!("if ({}) {{", aligned.join(" && ")));
        self.tile(c, pass, true);
        c.mid("} else {");
        self.tile(c, pass, false);
        c.close("}");
        c.close("}");
    }

    /// One tile's chunks: every load of the thread in flight, then the elements.
    fn tile(&self, c: &mut Code, pass: usize, aligned: bool) {
        let p = self.p;
        let need = &self.passes.need[pass];
        let is_final = self.passes.is_final(pass);
        let al = if aligned { "true" } else { "false" };
        let chunked: Vec<usize> = need
            .element_inputs
            .iter()
            .copied()
            .filter(|&k| self.chunked(k))
            .collect();
        for &k in &chunked {
            c.line(format!("uint4 ch{k}[OPTIML_U];"));
        }
        if !chunked.is_empty() {
            c.line("#pragma unroll");
            c.open("for (int u = 0; u < OPTIML_U; ++u) {");
            for &k in &chunked {
                c.line(format!(
                    "ch{k}[u] = optiml_p::ld_rel<IO, {al}>(b{k}, u * (OPTIML_TH * IO::V), rr);"
                ));
            }
            c.close("}");
        }
        let element = |k| self.element(k);
        let env = self.env(&element);
        // Moment pairs: the thread's values of the tile first, then their own mean and squared distance (two
        // passes over registers), merged into the running ones once per tile.
        let pairs = if is_final {
            Vec::new()
        } else {
            self.pairs(pass)
        };
        for &(m, _) in &pairs {
            c.line(format!("float bv{m}[OPTIML_U * IO::V];"));
            c.line(format!("float bs{m} = 0.f;"));
        }
        if !pairs.is_empty() {
            c.line("int bc = 0;");
        }
        c.line("#pragma unroll");
        c.open("for (int u = 0; u < OPTIML_U; ++u) {");
        c.line("const int o = u * (OPTIML_TH * IO::V);");
        c.open("if (o < rr) {");
        for &k in &chunked {
            c.line(format!("float x{k}[IO::V];"));
            c.line(format!("IO::unpack(ch{k}[u], x{k});"));
        }
        if is_final {
            for &j in &self.passes.element_outputs {
                c.line(format!("float y{j}[IO::V] = {{}};"));
            }
        }
        c.line("#pragma unroll");
        c.open("for (int l = 0; l < IO::V; ++l) {");
        c.open("if (o + l < rr) {");
        self.passes.lane(
            c,
            p,
            pass,
            &self.plain(pass),
            &env,
            &|j| format!("y{j}[l]"),
            "0",
        );
        if !is_final {
            for &(m, _) in &pairs {
                let Expr::Reduce(_, _, body) = &p.stmts[m].expr else {
                    continue;
                };
                c.line(format!("const float mv{m} = {};", emit::expr(body, &env)));
                c.line(format!("bv{m}[u * IO::V + l] = mv{m};"));
                c.line(format!("bs{m} = bs{m} + mv{m};"));
            }
            if !pairs.is_empty() {
                c.line("bc += 1;");
            }
        }
        c.close("}");
        c.close("}");
        if is_final {
            for &j in &self.passes.element_outputs {
                let o = self.out_ordinal(j);
                c.line(format!(
                    "optiml_p::st_rel<IO, {al}>(w{o}, o, rr, IO::pack(y{j}));"
                ));
            }
        }
        c.close("}");
        c.close("}");
        if !pairs.is_empty() {
            c.open("if (bc > 0) {");
            for &(m, _) in &pairs {
                c.line(format!("const float lm{m} = bs{m} / (float)bc;"));
                c.line(format!("float lq{m} = 0.f;"));
            }
            c.line("#pragma unroll");
            c.open("for (int i = 0; i < OPTIML_U * IO::V; ++i) {");
            c.open("if ((i / IO::V) * (OPTIML_TH * IO::V) + i % IO::V < rr) {");
            for &(m, _) in &pairs {
                c.line(format!("const float md{m} = bv{m}[i] - lm{m};"));
                c.line(format!("lq{m} = lq{m} + md{m} * md{m};"));
            }
            c.close("}");
            c.close("}");
            for &(m, _) in &pairs {
                c.line(format!(
                    "optiml_p::moments_merge(cn{m}, cm{m}, cq{m}, (float)bc, lm{m}, lq{m});"
                ));
            }
            c.close("}");
        }
    }

    /// The block-wide combine of pass `pass`'s accumulators: every thread ends with the same values.
    fn combine(&self, c: &mut Code, pass: usize) {
        let plain = self.plain(pass);
        let pairs = self.pairs(pass);
        for &j in &plain {
            if let Role::Reduction(op) = self.passes.role[j] {
                c.line(format!(
                    "a{j} = optiml_p::warp_all<{}>(a{j});",
                    emit::reduce_op(op)
                ));
            }
        }
        for &(m, _) in &pairs {
            c.line(format!("optiml_p::warp_moments(cn{m}, cm{m}, cq{m});"));
        }
        if self.warps > 1 {
            let at = |array: &str, slot: usize, part: &str| format!("{array}[buf][{slot}][{part}]");
            c.open("if (lane == 0) {");
            self.passes.store_partials(c, &plain, "warp", &at);
            for (i, &(m, _)) in pairs.iter().enumerate() {
                for (k, v) in ["cn", "cm", "cq"].iter().enumerate() {
                    c.line(format!("red_m[buf][{}][warp] = {v}{m};", 3 * i + k));
                }
            }
            c.close("}");
            c.line("__syncthreads();");
            self.passes
                .fold_partials(c, &plain, &self.warps.to_string(), &at);
            for (i, &(m, _)) in pairs.iter().enumerate() {
                let r = |k: usize, w: &str| format!("red_m[buf][{}][{w}]", 3 * i + k);
                c.line(format!(
                    "cn{m} = {}; cm{m} = {}; cq{m} = {};",
                    r(0, "0"),
                    r(1, "0"),
                    r(2, "0")
                ));
                c.line("#pragma unroll");
                c.line(format!(
                    "for (int w = 1; w < {}; ++w) optiml_p::moments_merge(cn{m}, cm{m}, cq{m}, {}, {}, {});",
                    self.warps,
                    r(0, "w"),
                    r(1, "w"),
                    r(2, "w")
                ));
            }
            // The next combine writes the other buffer; the one after that, this one, is behind that combine's
            // barrier, which every thread reaches only after reading this one.
            c.line("buf ^= 1;");
        }
    }
}

impl Tunable for TreeSchedule {
    /// `256 threads, unroll 4, 1056 blocks`.
    fn describe(&self) -> String {
        format!(
            "{} threads, unroll {}, {} blocks{}",
            self.threads,
            self.unroll,
            self.blocks,
            if self.interleave { ", slice-major" } else { "" }
        )
    }

    /// 128 to 1024 threads, 1 to 8 chunks in flight, 2 to 32 blocks of every SM of an H200 per launch, and
    /// at most 4096 resident threads per SM's share of the grid (more only queues blocks).
    fn is_valid(&self) -> bool {
        THREADS.contains(&self.threads)
            && UNROLL.contains(&self.unroll)
            && BLOCKS.contains(&self.blocks)
            && self.threads * (self.blocks / 132) <= 8192
    }

    /// Blocks of 256 threads with 8 chunks in flight each, 8 blocks per SM of an H200 (its 2048 resident
    /// threads). Measured on the H200 (`trees_across_launch_shapes`, 14 launch shapes each, 2²⁶ f32 elements):
    /// within 2% of the best for batch norm and group norm and 5% for a Frobenius norm, 2–3% faster than 4
    /// chunks in flight; more than 2048 threads per SM's share of the grid only adds partials and tails.
    fn default_for(_arch: Arch) -> Self {
        TreeSchedule {
            threads: 256,
            unroll: 8,
            blocks: 1056,
            interleave: false,
        }
    }

    fn space() -> Vec<Self> {
        let mut out = Vec::new();
        for threads in THREADS {
            for unroll in UNROLL {
                for blocks in BLOCKS {
                    for interleave in [false, true] {
                        let s = TreeSchedule {
                            threads,
                            unroll,
                            blocks,
                            interleave,
                        };
                        if s.is_valid() {
                            out.push(s);
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
                name: "more-tree-loads",
                rationale: "twice the chunks in flight per thread: more bytes requested per SM to cover DRAM latency",
                addresses: Bottleneck::Memory,
                claimed_gain: 1.05,
                apply: |s| {
                    Some(TreeSchedule {
                        unroll: s.unroll * 2,
                        ..*s
                    })
                },
            },
            Transform {
                name: "fewer-tree-loads",
                rationale: "half the chunks in flight per thread: fewer registers, more resident warps",
                addresses: Bottleneck::Compute,
                claimed_gain: 1.03,
                apply: |s| {
                    (s.unroll > 1).then_some(TreeSchedule {
                        unroll: s.unroll / 2,
                        ..*s
                    })
                },
            },
            Transform {
                name: "more-tree-blocks",
                rationale: "twice the blocks per launch: shorter slices, a shorter last wave, more partials to fold",
                addresses: Bottleneck::Mixed,
                claimed_gain: 1.03,
                apply: |s| {
                    Some(TreeSchedule {
                        blocks: s.blocks * 2,
                        ..*s
                    })
                },
            },
            Transform {
                name: "fewer-tree-blocks",
                rationale: "half the blocks per launch: longer slices, fewer partials and less tail per slice",
                addresses: Bottleneck::Mixed,
                claimed_gain: 1.02,
                apply: |s| {
                    Some(TreeSchedule {
                        blocks: s.blocks / 2,
                        ..*s
                    })
                },
            },
            Transform {
                name: "wider-tree-blocks",
                rationale: "twice the threads per block, half the blocks: the same threads in flight, fewer \
                            partials, a wider combine",
                addresses: Bottleneck::Mixed,
                claimed_gain: 1.02,
                apply: |s| {
                    Some(TreeSchedule {
                        threads: s.threads * 2,
                        blocks: s.blocks / 2,
                        ..*s
                    })
                },
            },
            Transform {
                name: "interleave-tree-items",
                rationale: "slice-major blocks: the blocks resident at once hold the same slice of every item, so an \
                            input the items share (an affine weight) is read from DRAM once, not once per few items",
                addresses: Bottleneck::Memory,
                claimed_gain: 1.1,
                apply: |s| {
                    (!s.interleave).then_some(TreeSchedule {
                        interleave: true,
                        ..*s
                    })
                },
            },
            Transform {
                name: "narrower-tree-blocks",
                rationale: "half the threads per block, twice the blocks: more independent blocks per SM",
                addresses: Bottleneck::Mixed,
                claimed_gain: 1.02,
                apply: |s| {
                    Some(TreeSchedule {
                        threads: s.threads / 2,
                        blocks: s.blocks * 2,
                        ..*s
                    })
                },
            },
        ]
    }
}
