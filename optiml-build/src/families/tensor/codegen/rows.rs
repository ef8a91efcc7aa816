//! Row programs (softmax, norms, reductions over the innermost axes): one row per warp or per block, the row's
//! passes ([`super::plan`]) over 16-byte chunks, each thread always owning the same chunks of the row.
//!
//! Chunk `j` of a thread (`j = 0, 1, …`) is the row's chunk `j · row_threads + tid`. The first `reg_chunks`
//! chunks per thread of each input worth keeping ([`super::plan::Passes::cached`]) stay in registers, the next
//! ones (as many as `smem_kib` holds) in dynamic shared memory, the rest are read again from global memory by
//! each pass. Because a thread only ever reads back what it stored itself, the cache needs no barrier; the only
//! barriers are the block reductions'. So one kernel serves every row length: short rows live on chip, long rows
//! stream the part that does not fit.
//!
//! A row whose buffers are 16-byte aligned (per row: the base pointers and the row offsets) moves whole chunks
//! with single 16-byte accesses; any other row (a row length that is not a multiple of the chunk, a misaligned
//! base) moves the same chunks element by element, one chunk per input in flight, and keeps no part of the row
//! in registers (element-wise loads take a register each). Either way a thread meets the same elements in the
//! same order, so a reduction, which depends only on that, gives the same bits.
//!
//! Registers: the block size's share is the only cap (`__launch_bounds__(threads, 1)`); within a pass each chunk
//! is ordered after the previous chunk's work, so the compiler does not evaluate the whole cache at once; the
//! streamed chunks in flight are reduced below `unroll` where the program's inputs would not fit. The
//! no-spill tests compile a covering set of the space for the heaviest test programs.
//!
//! Reductions: each thread folds its elements in chunk order, then the warp combines with an xor butterfly, then
//! (a block per row) every thread folds the warps' partials in warp order from shared memory. The order depends
//! on the schedule and the row length only: repeated runs give the same bits.
//!
//! A softmax's max and the sum of exponentials shifted by it share one pass ([`Passes::fuse_online`]): each
//! thread folds a chunk at a time into a running (max, sum) pair, rescaling the sum when the max grows, and the
//! pairs combine like any other partials. The row is then read twice, not three times.
//!
//! L2 hints ([`RowSchedule::l2`]): a pass that streams a chunk some later pass reads again marks its line to
//! stay in L2 (`evict_last`), the last read and the output stores mark theirs to leave first, so the part of
//! the rows in flight that the registers and shared memory do not hold can be read again from L2 rather than
//! DRAM. On the H200 they moved the KernelBench shapes by at most 2% and some slices by up to 14%; the search
//! decides.

use super::classify::{RowShape, Tail, gathers};
use super::emit::{self, Code, Env as _};
use super::plan::{self, ElementEnv, Passes, Role, ScalarEnv};
use crate::experts::Candidate;
use crate::search::{Bottleneck, Transform, Tunable};
use optiml_runtime::{Arch, Launch, ProgramLaunch, TreeLaunch};
use optiml_spec::program::{Expr, Program, Reduce};

/// How a row kernel maps rows to threads and where a row lives between passes: what the search transforms.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
// A recorded schedule reads as this kernel's only if it has no other kernel's fields.
#[serde(deny_unknown_fields)]
pub struct RowSchedule {
    /// Threads per row: 32 (a warp per row) to 1024 (a block per row).
    pub row_threads: u32,
    /// Rows per block (above 1 only with a warp per row).
    pub rows_per_block: u32,
    /// 16-byte chunks per thread kept in registers between passes, shared by the inputs worth keeping.
    pub reg_chunks: u32,
    /// Dynamic shared memory per block for the part of the rows the registers do not hold, in KiB (0: none).
    pub smem_kib: u32,
    /// Chunks per input in flight per thread where a pass streams from shared or global memory (fewer where
    /// the program's inputs would not fit half the block size's register share).
    pub unroll: u32,
    /// Nonzero: the grid holds at most this many blocks per SM and blocks loop over rows (0: a block per row
    /// group).
    pub blocks_per_sm: u32,
    /// Blocks of a thread-block cluster (sm_90) that share each row: the row's chunks interleave over the
    /// cluster's `cluster × row_threads` threads, each block keeps its share on chip, and the blocks combine
    /// their reductions through distributed shared memory. 1: a row is one block's.
    #[serde(default = "one")]
    pub cluster: u32,
    /// L2 eviction hints (sm_80+): 0 none; 1 a pass that reads a streamed chunk some later pass reads again
    /// marks it to stay in L2, and the last read of every chunk and every output store mark theirs to leave
    /// first, so the rows in flight stay in L2 between passes while the rest streams past.
    #[serde(default)]
    pub l2: u32,
    /// The next row's shared-memory part loaded while this row's outputs are stored: as the last pass stores a
    /// chunk's outputs, the thread starts the asynchronous copy (`cp.async`, sm_80+) of the same chunk of the
    /// block's next row into the slot it just read, so the next row's reads overlap this row's writes, and the
    /// next row's first pass waits for them instead of loading. Needs shared memory and blocks that loop over
    /// rows (a persistent grid); a program whose last pass does not read every input shared memory holds, or
    /// whose rows are not evenly spaced in an input, ignores it.
    #[serde(default)]
    pub prefetch: bool,
}

fn one() -> u32 {
    1
}

const ROW_THREADS: [u32; 6] = [32, 64, 128, 256, 512, 1024];
const ROWS_PER_BLOCK: [u32; 5] = [1, 2, 4, 8, 16];
const REG_CHUNKS: [u32; 7] = [0, 1, 2, 4, 8, 16, 32];
/// Shared-memory levels: 8, 4, 2 and 1 resident blocks per SM (228 KiB per SM, 1 KiB reserved per block, a few
/// hundred bytes of reduction scratch), or none. 46, not 48: up to 48 KiB of dynamic and static shared memory
/// together need no opt-in, and the reduction scratch is static.
const SMEM_KIB: [u32; 5] = [0, 24, 46, 100, 220];
const UNROLL: [u32; 4] = [1, 2, 4, 8];
const BLOCKS_PER_SM: [u32; 5] = [0, 1, 2, 4, 8];
const L2: [u32; 2] = [0, 1];
/// Portable cluster sizes (at most 8 blocks need no opt-in).
pub(crate) const CLUSTER: [u32; 4] = [1, 2, 4, 8];
/// The most of a row (bytes of its cached inputs) [`RowSchedule::for_row`] gives one block of a cluster: 132
/// SMs' shares then fit in the H200's 50 MiB L2, from which each pass re-reads what the registers do not hold.
pub(crate) const BLOCK_SHARE: usize = 192 * 1024;
/// Row lengths the build compiles a default variant for (see [`RowSchedule::for_row`]): a row kernel's best
/// schedule depends on the row length far more than on anything else, and one variant per factor of 8 keeps
/// every row length within a factor of 2.8 of a variant's.
pub const ROW_BUCKETS: [usize; 6] = [256, 2048, 16384, 131072, 1 << 20, 1 << 23];

/// Registers a thread needs beside its cached chunks (indices, pointers, accumulators, one step of loads): what
/// [`RowSchedule::is_valid`] keeps free of the block size's register share, checked by the no-spill tests.
const REG_OVERHEAD: u32 = 40;

impl RowSchedule {
    /// Threads per block.
    pub fn threads(&self) -> u32 {
        self.row_threads * self.rows_per_block
    }

    /// A schedule for rows of `row_len` elements of `shape`'s program (the default variant of a row-length
    /// bucket, [`ROW_BUCKETS`]): a warp per row (8 rows per block) for rows of up to 8 chunks per lane, else a
    /// block per row with about 4 chunks per thread; each cached input's row in registers where the budget
    /// allows; on sm_90 a row longer than the registers hold spreads over a cluster (see the body for the
    /// measurements).
    pub fn for_row(shape: &RowShape, row_len: usize, arch: Arch) -> Self {
        let passes = passes(shape);
        let cached = passes.cached.len().max(1) as u32;
        let v = emit::vec_width(shape.program.dtype) as usize;
        let chunks = row_len.div_ceil(v).max(1);
        let pow2 = |x: usize| x.next_power_of_two() as u32;
        let mut s = Self::default_for(arch);
        if chunks <= 32 * 8 {
            s.row_threads = 32;
            s.rows_per_block = 8;
            s.reg_chunks = (pow2(chunks.div_ceil(32)) * cached).min(32);
        } else {
            s.row_threads = pow2(chunks.div_ceil(4)).clamp(64, 1024);
            s.rows_per_block = 1;
            s.reg_chunks = (pow2(chunks.div_ceil(s.row_threads as usize)) * cached).min(32);
            if s.row_threads == 1024 {
                // 4 chunks fit the 64-register share of a 1024-thread block for f32 softmax but spilled in
                // 16-bit and RMS-norm programs (the no-spill test of every bucket's default); 2 fit all.
                s.reg_chunks = s.reg_chunks.min(2);
            }
        }
        while !s.is_valid() && s.reg_chunks > 0 {
            s.reg_chunks /= 2;
        }
        let reg_bytes = (s.reg_chunks / cached) as usize * s.row_threads as usize * 16;
        let row_bytes = chunks * 16 * cached as usize;
        if passes.count() < 2 || arch.major < 9 || row_bytes <= reg_bytes {
            // One pass over the row: nothing to keep close. A row the registers hold: no cluster needed. Before
            // sm_90: no clusters.
            return s;
        }
        // A row longer than a block's registers, on sm_90: spread it over a cluster. Measured on the H200 at the
        // KernelBench shapes (`long_rows_across_clusters` with `OPTIML_LONG_ROWS_FULL`, 2026-12-04; f32):
        // - three passes or more (mean, variance, outputs): a row that 8 blocks of 512 threads hold in registers
        //   (16 chunks each, 128 KiB a block) goes to the smallest such cluster. Instance norm over rows of
        //   262144 (1 MiB): 4.70 ms with a cluster of 4 (its bucket's, 131072), 4.89 with 8, 6.20 with 1024
        //   threads, 2 register chunks and a cluster of 8 (the rule before);
        // - longer rows of three passes or more: the smallest cluster whose blocks take at most `BLOCK_SHARE`
        //   each, else 8. The part the registers do not hold is read again by each pass, from L2 while the
        //   rows in flight fit there (layer norm over rows of 4 Mi: 0.387 ms, every other point slower);
        // - two passes (a softmax's online max and sum, then the outputs) over rows longer than 1 MiB: a
        //   cluster of 2 (softmax over 393216: 4.52 ms with 1024 threads, against 4.74 with a block per row and
        //   4.9–5.5 with 512 threads). Shorter two-pass rows keep a block each: the cluster that suits a row
        //   costs more for a row half as long, which a bucket's variant also serves (L2 norm over rows of
        //   65535: 5.86 ms with a cluster of 2, 8.2 with 4, 6.21 with a block per row).
        let held = 512 * 16 * 16;
        if passes.count() == 2 {
            if row_bytes > 8 * held {
                s.cluster = 2;
                s.unroll = 8;
            }
            return s;
        }
        if let Some(cluster) = CLUSTER
            .iter()
            .copied()
            .find(|&c| row_bytes <= c as usize * held)
        {
            let wide = RowSchedule {
                row_threads: 512,
                reg_chunks: 16,
                cluster,
                unroll: 8,
                ..s
            };
            if wide.is_valid() {
                return wide;
            }
        }
        s.cluster = CLUSTER
            .iter()
            .copied()
            .find(|&c| row_bytes.div_ceil(c as usize) <= BLOCK_SHARE)
            .unwrap_or(8);
        s
    }

    /// The ring for rows of `row_len` elements of `shape`'s program: each row held in shared memory (on sm_90
    /// over the smallest cluster whose blocks hold it), a persistent grid, and each block's next row loaded
    /// during the last pass ([`RowSchedule::prefetch`]); 512 and 1024 threads per block. Empty where the
    /// program reads a row once, where `for_row`'s schedule already holds the row in registers, or where no
    /// cluster's shared memory holds it. The walk from the bucket's default does not reach these (four
    /// shared-memory levels, up to three cluster doublings and the grid are more steps than a search's depth),
    /// so a row search evaluates them as roots; the prototype ran at 89% of the copy bandwidth where two passes
    /// ran at 65% (`bench/results/2026-12-07-h100-softmax-ring.md`).
    pub fn rings(shape: &RowShape, row_len: usize, arch: Arch) -> Vec<Self> {
        let passes = passes(shape);
        let vec = emit::vec_width(shape.program.dtype);
        let chunks = row_len.div_ceil(vec as usize).max(1);
        let holds = |s: &RowSchedule| {
            let g = Geometry::new(s, &passes, vec);
            (g.rc + g.sc) as usize * (s.row_threads * s.cluster) as usize >= chunks
        };
        if passes.count() < 2 || passes.cached.is_empty() {
            return Vec::new();
        }
        let default = Self::for_row(shape, row_len, arch);
        if default.smem_kib == 0 && holds(&default) {
            return Vec::new();
        }
        let clusters: &[u32] = if arch.major >= 9 { &CLUSTER } else { &[1] };
        // The most shared memory a block may opt into: 227 KiB on sm_90, 163 on sm_80, 99 on the other sm_8x.
        let smem_kib = match (arch.major, arch.minor) {
            (9.., _) => 220,
            (8, 0) => 100,
            _ => 46,
        };
        for &cluster in clusters {
            let rings: Vec<Self> = [512, 1024]
                .into_iter()
                .map(|row_threads| RowSchedule {
                    row_threads,
                    rows_per_block: 1,
                    reg_chunks: 0,
                    smem_kib,
                    unroll: 4,
                    blocks_per_sm: 1,
                    cluster,
                    l2: 0,
                    prefetch: true,
                })
                .filter(|s| s.is_valid() && holds(s))
                .collect();
            if !rings.is_empty() {
                return rings;
            }
        }
        Vec::new()
    }

    /// This schedule as its kernel for `shape` runs: without a cluster where the program has a tail (its stages
    /// launch the rows' grid), without the prefetch where the program cannot use it ([`RowSchedule::prefetch`]).
    /// The search takes two schedules that launch alike for one kernel.
    pub fn launched(&self, shape: &RowShape) -> Self {
        let s = if shape.tail.is_some() && self.cluster > 1 {
            RowSchedule {
                cluster: 1,
                ..*self
            }
        } else {
            *self
        };
        let passes = passes(shape);
        let g = Geometry::new(&s, &passes, emit::vec_width(shape.program.dtype));
        let k = Kernel {
            p: shape.rows_program(),
            shape,
            passes: &passes,
            g: &g,
            clustered: s.cluster > 1,
            stride: "OPTIML_RT",
            vt: "tid",
            l2: s.l2 == 1,
            prefetch: false,
        };
        RowSchedule {
            prefetch: s.prefetches(&k),
            ..s
        }
    }

    /// Whether this schedule's kernel `k` loads each block's next row during the last pass: asked for, on a
    /// grid that loops over rows, by a program that can use it ([`Kernel::can_prefetch`]).
    fn prefetches(&self, k: &Kernel) -> bool {
        self.prefetch && self.blocks_per_sm > 0 && k.can_prefetch()
    }

    /// The candidate computing `shape`'s program.
    pub fn candidate(&self, shape: &RowShape) -> Candidate {
        if shape.tail.is_some() && self.cluster > 1 {
            // A tail's stages launch the rows' grid, which a cluster would have to divide.
            return RowSchedule {
                cluster: 1,
                ..*self
            }
            .candidate(shape);
        }
        let full = &shape.program;
        let p = shape.rows_program();
        let passes = passes(shape);
        let g = Geometry::new(self, &passes, emit::vec_width(p.dtype));
        let describe = self.describe();
        let mut c = emit::prologue(full, "rows", &describe);
        c.line(format!(
            "#define OPTIML_RT {}  // threads per row",
            self.row_threads
        ));
        c.line(format!(
            "#define OPTIML_RPB {}  // rows per block",
            self.rows_per_block
        ));
        c.line(format!(
            "#define OPTIML_RC {}  // register chunks per thread per cached input",
            g.rc
        ));
        c.line(format!(
            "#define OPTIML_SC {}  // shared-memory chunks per thread per cached input",
            g.sc
        ));
        c.line(format!(
            "#define OPTIML_U {}  // chunks in flight",
            g.unroll
        ));
        let clustered = self.cluster > 1;
        if clustered {
            c.line(format!(
                "#define OPTIML_CL {}  // blocks per row (a cluster)",
                self.cluster
            ));
            c.line(
                "#define OPTIML_VRT (OPTIML_RT * OPTIML_CL)  // threads per row over the cluster",
            );
            c.line("#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900");
            c.line("#error \"thread-block clusters need sm_90 or newer\"");
            c.line("#endif");
        }
        c.line("");
        // No register cap beyond the block size's: a cap the cache cannot meet spills, and the register use
        // follows the schedule's knobs (cached chunks, unroll), which the search moves.
        let attrs = if clustered {
            format!("__cluster_dims__({}, 1, 1) ", self.cluster)
        } else {
            String::new()
        };
        let tail_args: &[&str] = if shape.tail.is_some() {
            &["float* ws", "int stage", "long long slices"]
        } else {
            &[]
        };
        emit::entry_full(
            &mut c,
            full,
            &format!("{}, 1", self.threads()),
            &attrs,
            tail_args,
        );
        let k = Kernel {
            p,
            shape,
            passes: &passes,
            g: &g,
            clustered,
            stride: if clustered { "OPTIML_VRT" } else { "OPTIML_RT" },
            vt: if clustered { "vtid" } else { "tid" },
            l2: self.l2 == 1,
            prefetch: false,
        };
        let k = Kernel {
            prefetch: self.prefetches(&k),
            ..k
        };
        k.body(&mut c);
        c.close("}");
        Candidate {
            source: c.finish(),
            entry: "optiml_program",
            launch: Launch::Program(ProgramLaunch {
                threads: self.threads(),
                smem_bytes: g.smem_bytes,
                items_mask: emit::mask(shape.items.iter().copied()),
                items_per_block: self.rows_per_block,
                max_blocks_per_sm: self.blocks_per_sm,
                cluster: self.cluster,
                // A tail over no row launches nothing, so it would write nothing: refused like a mean.
                nonempty_mask: emit::nonempty_mask(full)
                    | shape
                        .tail
                        .as_ref()
                        .map_or(0, |_| emit::mask(shape.items.iter().copied())),
                tree: shape.tail.as_ref().map(|t| TreeLaunch {
                    blocks: 0,
                    tile: 0,
                    passes: 1,
                    partials: t.folds(full).count() as u32,
                }),
            }),
            schedule: describe,
        }
    }
}

/// The passes of a row program: a softmax's max and shifted sum in one ([`Passes::fuse_online`]).
pub(crate) fn passes(shape: &RowShape) -> Passes {
    let p = shape.rows_program();
    let mut passes = Passes::new(p, &shape.reduced);
    passes.fuse_online(p);
    passes
}

/// What a schedule becomes for one program.
struct Geometry {
    /// Register chunks per thread per cached input.
    rc: u32,
    /// Shared-memory chunks per thread per cached input.
    sc: u32,
    /// Dynamic shared memory per block, bytes.
    smem_bytes: u32,
    rt: u32,
    unroll: u32,
}

impl Geometry {
    fn new(s: &RowSchedule, passes: &Passes, vec: u32) -> Self {
        let n = passes.cached.len() as u32;
        let per_group = s.smem_kib * 1024 / s.rows_per_block;
        let rc = s.reg_chunks.checked_div(n).unwrap_or(0);
        let sc = per_group.checked_div(s.row_threads * 16 * n).unwrap_or(0);
        // Streamed chunks in flight cost a register per packed word and one per unpacked element: at most half
        // the block size's register share for them (a 1024-thread layer norm on bf16 spilled at 4 in flight).
        let threads = s.row_threads * s.rows_per_block;
        let cap = (65536 / threads).min(255);
        let inputs = passes.max_element_inputs();
        let per_chunk = 4 * inputs * (vec / 4).max(1);
        let mut unroll = s.unroll;
        while unroll > 1 && per_chunk * unroll > cap / 2 {
            unroll /= 2;
        }
        Geometry {
            rc,
            sc,
            smem_bytes: sc * s.row_threads * 16 * n * s.rows_per_block,
            rt: s.row_threads,
            unroll,
        }
    }

    fn warps(&self) -> u32 {
        self.rt / 32
    }
}

struct Kernel<'a> {
    p: &'a Program,
    shape: &'a RowShape,
    passes: &'a Passes,
    g: &'a Geometry,
    /// The row spreads over a cluster's blocks.
    clustered: bool,
    /// Threads sharing a row: `OPTIML_RT`, or `OPTIML_VRT` over a cluster. A thread's chunk `j` is the row's
    /// chunk `j · stride + vt`; shared memory stays indexed by the block's own `tid`.
    stride: &'static str,
    /// The thread's place among them: `tid`, or `vtid` over a cluster.
    vt: &'static str,
    /// The schedule's L2 hints ([`RowSchedule::l2`]).
    l2: bool,
    /// The next row's shared-memory part is loaded during this row's last pass ([`RowSchedule::prefetch`],
    /// where [`Kernel::can_prefetch`] holds).
    prefetch: bool,
}

/// Where a segment's chunks are. Each step of a segment addresses its chunks from a base `ob` (elements past the
/// thread's first one; absent for the register segment, whose offsets are all constants) with int offsets
/// against an int bound `rr` (elements left from the base): the unrolled chunk offsets are then constants
/// folded into the loads and the bounds checks, and no 64-bit value is live per chunk.
struct Segment<'a> {
    /// Chunks per step.
    count: &'a str,
    /// Which of them exist (empty: all).
    guard: &'a str,
    /// The step's base: `None` for 0 (and `rr` = `remi`), else a `long long` expression.
    base: Option<&'a str>,
    /// Chunk `u`'s offset from the base.
    offset: &'a str,
}

/// Where a segment's chunks of one input come from.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Source {
    Registers,
    Shared { store: bool },
    Global,
}

/// The leaves of a tail statement: earlier tail statements (a tail reads no input).
struct TailEnv;

impl emit::Env for TailEnv {
    fn input(&self, _k: usize) -> String {
        // `classify` keeps inputs out of the tail's statements; a compile error names the bug.
        "OPTIML_INPUT_IN_A_TAIL".into()
    }
    fn value(&self, j: usize) -> String {
        format!("s{j}")
    }
}

/// An element input's value: element `l` of its unpacked chunk.
fn chunk_element(k: usize) -> String {
    format!("x{k}[l]")
}

impl Kernel<'_> {
    /// The values at an element of this kernel.
    fn env(&self) -> ElementEnv<'_> {
        ElementEnv {
            p: self.p,
            passes: self.passes,
            element: &chunk_element,
        }
    }

    fn is_c(&self, d: usize) -> bool {
        self.shape.reduced.contains(&d)
    }

    /// The element offset of the start of the current row in a tensor with `axes`.
    fn row_offset(&self, axes: &[usize]) -> String {
        let outer: Vec<usize> = axes.iter().copied().filter(|&d| !self.is_c(d)).collect();
        let inner: Vec<usize> = axes.iter().copied().filter(|&d| self.is_c(d)).collect();
        if outer.is_empty() {
            "0LL".into()
        } else if outer == self.shape.items {
            format!("row * ({})", emit::product(&inner))
        } else {
            emit::offset(axes, &self.shape.reduced)
        }
    }

    /// Whether input `k`'s rows are evenly spaced (or all the same row): the next row's start is then this
    /// row's plus a fixed step.
    fn rows_evenly_spaced(&self, k: usize) -> bool {
        let outer: Vec<usize> = self.p.inputs[k]
            .axes
            .iter()
            .copied()
            .filter(|&d| !self.is_c(d))
            .collect();
        outer.is_empty() || outer == self.shape.items
    }

    /// Whether the next row's shared-memory part can be loaded during this row's last pass: shared memory holds
    /// part of a row, every input it holds is first read before the last pass and read again by it (each slot
    /// is refilled right after its last read), and each such input's next row is a fixed step away.
    fn can_prefetch(&self) -> bool {
        let last = self.passes.count().saturating_sub(1);
        self.g.sc > 0
            && self.passes.count() >= 2
            && !self.passes.cached.is_empty()
            && self.passes.cached.iter().all(|&k| {
                self.passes.first_use(k).is_some_and(|f| f < last)
                    && self.passes.need[last].element_inputs.contains(&k)
                    && self.rows_evenly_spaced(k)
            })
    }

    /// Elements from a row's start in input `k` to the next row's that the same block (or cluster) takes.
    fn next_row_step(&self, k: usize) -> String {
        let inner: Vec<usize> = self.p.inputs[k]
            .axes
            .iter()
            .copied()
            .filter(|&d| self.is_c(d))
            .collect();
        if inner.len() == self.p.inputs[k].axes.len() {
            // Every row reads the same elements.
            "0LL".into()
        } else {
            format!("nstep * ({})", emit::product(&inner))
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

    /// Whether a pass after `pass` reads input `k`'s streamed chunks again.
    fn read_again(&self, k: usize, pass: usize) -> bool {
        self.passes.need[pass + 1..self.passes.count()]
            .iter()
            .any(|n| n.element_inputs.contains(&k))
    }

    /// The L2 hint argument of an access (empty without hints): keep a chunk read again, else let it go first.
    fn hint(&self, again: bool) -> &'static str {
        match (self.l2, again) {
            (false, _) => "",
            (true, true) => ", optiml_p::HINT_KEEP",
            (true, false) => ", optiml_p::HINT_LAST",
        }
    }

    fn body(&self, c: &mut Code) {
        let p = self.p;
        let g = self.g;
        let (plain_slots, arg_slots) = self.passes.slots();
        c.line(format!(
            "const long long rows = {};",
            emit::product(&self.shape.items)
        ));
        c.line(format!(
            "const long long ncols = {};",
            emit::product(&self.shape.reduced)
        ));
        c.line("const long long nchunks = (ncols + IO::V - 1) / IO::V;");
        c.line("const int tid = threadIdx.x % OPTIML_RT;");
        c.line("const int grp = threadIdx.x / OPTIML_RT;");
        c.line("(void)nchunks; (void)grp;");
        if let Some(tail) = &self.shape.tail {
            self.fold_tail(c, tail);
        }
        if self.clustered {
            c.line("const int vtid = (int)optiml_p::cluster_rank() * OPTIML_RT + tid;");
        }
        for k in 0..p.params.len() {
            c.line(format!("(void)p{k};"));
        }
        if g.warps() > 1 && plain_slots > 0 {
            c.line("const int lane = threadIdx.x & 31, warp = tid >> 5;");
            c.line(format!(
                "__shared__ float red_f[2][{plain_slots}][{}];",
                g.warps()
            ));
            if arg_slots > 0 {
                c.line(format!(
                    "__shared__ long long red_i[2][{arg_slots}][{}];",
                    g.warps()
                ));
            }
            c.line("int buf = 0;");
        }
        if self.clustered && plain_slots > 0 {
            // Each block's partials for the cluster, double-buffered as `red_f` is.
            c.line(format!("__shared__ float cx_f[2][{plain_slots}];"));
            if arg_slots > 0 {
                c.line(format!("__shared__ long long cx_i[2][{arg_slots}];"));
            }
            c.line("int cbuf = 0;");
        }
        if g.sc > 0 {
            c.line("extern __shared__ uint4 optiml_smem[];");
            for (m, k) in self.passes.cached.iter().enumerate() {
                c.line(format!(
                    "uint4* sm{k} = optiml_smem + (long long)(grp * {} + {m}) * (OPTIML_SC * OPTIML_RT);",
                    self.passes.cached.len()
                ));
            }
        }
        if self.prefetch {
            // Whether shared memory already holds (or is being sent) this row's part.
            c.line("bool pf = false;");
        }
        if self.clustered {
            // A cluster per row; with a persistent grid the clusters loop over the rows.
            c.open(
                "for (long long row = (long long)optiml_p::cluster_id(); row < rows; \
                 row += (long long)optiml_p::cluster_count()) {",
            );
        } else {
            c.open(
                "for (long long row = (long long)blockIdx.x * OPTIML_RPB + grp; row < rows; \
                 row += (long long)gridDim.x * OPTIML_RPB) {",
            );
        }
        // Coordinates of the row, for the tensors whose row offset is not a multiple of the row index.
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
            let outer: Vec<usize> = axes.iter().copied().filter(|&d| !self.is_c(d)).collect();
            if !outer.is_empty() && outer != self.shape.items {
                for d in outer {
                    if !needed.contains(&d) {
                        needed.push(d);
                    }
                }
            }
        }
        let gathers = gathers(p);
        for &(g, k) in &gathers {
            let at = p.inputs[g.input].axes.iter().enumerate();
            let x_axes = at.filter(|&(a, _)| a != g.axis).map(|(_, &d)| d);
            for d in x_axes.chain(p.inputs[k].axes.iter().copied()) {
                if !needed.contains(&d) {
                    needed.push(d);
                }
            }
        }
        emit::coords(c, "row", &self.shape.items, &needed, "long long");
        let mut aligned = Vec::new();
        for k in self.element_inputs() {
            c.line(format!(
                "const T* r{k} = in{k} + {};",
                self.row_offset(&p.inputs[k].axes)
            ));
            aligned.push(format!("optiml_p::aligned16(r{k})"));
        }
        for &j in &self.passes.element_outputs {
            let o = self.out_ordinal(j);
            c.line(format!(
                "T* w{o} = out{o} + {};",
                self.row_offset(&p.stmts[j].axes)
            ));
            aligned.push(format!("optiml_p::aligned16(w{o})"));
        }
        for &k in &self.passes.item_inputs {
            c.line(format!(
                "const float si{k} = IO::get(in{k}[{}]);",
                self.row_offset(&p.inputs[k].axes)
            ));
        }
        for &(g, k) in &gathers {
            // The row's index, then the value it selects: NaN outside the axis, as the interpreter reads it.
            let axes = &p.inputs[g.input].axes;
            let name =
                emit::gathered(&Expr::Gather(g, Box::new(Expr::Input(k)))).unwrap_or_default();
            c.line(format!(
                "const long long gi_{name} = (long long)in{k}[{}];",
                emit::offset(&p.inputs[k].axes, &[])
            ));
            c.line(format!(
                "const float {name} = (gi_{name} >= 0 && gi_{name} < n{}) ? IO::get(in{}[{} + gi_{name} * ({})]) : optiml_p::nan_f();",
                axes[g.axis],
                g.input,
                emit::offset(axes, &[axes[g.axis]]),
                emit::product(&axes[g.axis + 1..])
            ));
        }
        if aligned.is_empty() {
            aligned.push("true".into());
        }
        // Offsets from here on are from this thread's first element: a chunk's offset is then a constant in the
        // unrolled segments, and one bound serves every check.
        c.line(format!(
            "const long long my0 = (long long){} * IO::V;",
            self.vt
        ));
        c.line("const long long rem = ncols - my0;");
        c.line("const int remi = (int)(rem < 0x7FFFFFFFLL ? rem : 0x7FFFFFFFLL);");
        c.line("(void)remi;");
        for k in self.element_inputs() {
            c.line(format!("const T* pr{k} = r{k} + my0;"));
        }
        for &j in &self.passes.element_outputs {
            let o = self.out_ordinal(j);
            c.line(format!("T* pw{o} = w{o} + my0;"));
        }
        c.line(format!("const bool al = {};", aligned.join(" && ")));
        if self.prefetch {
            c.line(format!(
                "const long long nstep = {};",
                if self.clustered {
                    "(long long)optiml_p::cluster_count()"
                } else {
                    "(long long)gridDim.x * OPTIML_RPB"
                }
            ));
            let mut next_aligned = vec!["row + nstep < rows".to_string()];
            for &k in &self.passes.cached {
                c.line(format!(
                    "const T* pn{k} = pr{k} + {};",
                    self.next_row_step(k)
                ));
                next_aligned.push(format!("optiml_p::aligned16(pn{k})"));
            }
            // The next row's part is started during this row's last pass only on the aligned path (cp.async
            // copies whole 16-byte chunks).
            c.line(format!(
                "const bool pfn = al && {};",
                next_aligned.join(" && ")
            ));
            c.line("(void)nstep;");
            c.line("if (pf) optiml_p::cp_async_wait_all();");
        }
        c.open("if (al) {");
        self.row(c, true);
        c.mid("} else {");
        self.row(c, false);
        c.close("}");
        if self.prefetch {
            c.line("pf = pfn;");
        }
        c.close("}");
        if self.clustered {
            // No block may exit while another still reads its partials from distributed shared memory.
            c.line("optiml_p::cluster_sync();");
        }
    }

    /// One row, with chunk accesses proven 16-byte aligned (`aligned`) or not.
    fn row(&self, c: &mut Code, aligned: bool) {
        let p = self.p;
        if self.g.rc > 0 && aligned {
            for k in &self.passes.cached {
                c.line(format!("uint4 rg{k}[OPTIML_RC];"));
            }
        }
        for pass in 0..=self.passes.reductions.len() {
            self.scalars(c, &self.passes.stages[pass]);
            if pass < self.passes.count() {
                self.pass(c, pass, aligned);
            }
        }
        if !self.passes.scalar_outputs.is_empty() {
            c.open(format!("if ({} == 0) {{", self.vt));
            for &j in &self.passes.scalar_outputs {
                let o = self.out_ordinal(j);
                c.line(format!(
                    "out{o}[{}] = {};",
                    self.row_offset(&p.stmts[j].axes),
                    plan::scalar_store(p, j)
                ));
            }
            c.close("}");
        }
        if let Some(tail) = &self.shape.tail {
            c.open(format!("if ({} == 0) {{", self.vt));
            for (q, (j, _)) in tail.folds(&self.shape.program).enumerate() {
                c.line(format!("ws[{q}LL * rows + row] = s{j};"));
            }
            c.close("}");
        }
    }

    /// The tail's launch (stage 1): block 0 folds each fold's per-row values, which stage 0 stored in row order,
    /// then computes the tail's statements and stores its outputs. Each thread folds the rows `t, t + T, …` in
    /// order (eight loads in flight), then a warp xor butterfly, then thread 0 the warps in order: the order
    /// depends on the row count and the block size only. Sums and products fold in double, rounded once.
    fn fold_tail(&self, c: &mut Code, tail: &Tail) {
        let full = &self.shape.program;
        c.open("if (stage != 0) {");
        c.line("(void)slices;");
        c.line("if (blockIdx.x != 0) return;");
        c.line("const int t_ = threadIdx.x, nt_ = blockDim.x;");
        c.line("__shared__ double tail_w[32];");
        let folds: Vec<(usize, Reduce)> = tail.folds(full).collect();
        for &(j, _) in &folds {
            c.line(format!("float s{j} = 0.f;"));
        }
        for (q, &(j, op)) in folds.iter().enumerate() {
            let (ty, id, step) = match op {
                Reduce::Prod => ("double", "1.0", "a_ * (double)v_"),
                Reduce::Max => ("float", "(-optiml_p::inf_f())", "optiml_p::maxf(a_, v_)"),
                Reduce::Min => ("float", "optiml_p::inf_f()", "optiml_p::minf(a_, v_)"),
                _ => ("double", "0.0", "a_ + (double)v_"),
            };
            let fold = |v: &str| step.replace("v_", v);
            c.open("{");
            c.line(format!("{ty} a_ = {id};"));
            c.line("long long r_ = t_;");
            c.line(format!("const float* w_ = ws + {q}LL * rows;"));
            c.open("for (; r_ + 7LL * nt_ < rows; r_ += 8LL * nt_) {");
            c.line("float v_[8];");
            c.line("#pragma unroll");
            c.line("for (int u = 0; u < 8; ++u) v_[u] = w_[r_ + (long long)u * nt_];");
            c.line("#pragma unroll");
            c.line(format!(
                "for (int u = 0; u < 8; ++u) a_ = {};",
                fold("v_[u]")
            ));
            c.close("}");
            c.line(format!(
                "for (; r_ < rows; r_ += nt_) a_ = {};",
                fold("w_[r_]")
            ));
            c.line("#pragma unroll");
            c.line(format!(
                "for (int o = 16; o > 0; o >>= 1) a_ = {};",
                fold("__shfl_xor_sync(0xffffffffu, a_, o)")
            ));
            c.line("if ((t_ & 31) == 0) tail_w[t_ >> 5] = a_;");
            c.line("__syncthreads();");
            c.open("if (t_ == 0) {");
            c.line("a_ = tail_w[0];");
            c.line(format!(
                "for (int w = 1; w < (nt_ + 31) / 32; ++w) a_ = {};",
                fold("tail_w[w]")
            ));
            c.line(if op == Reduce::Mean {
                format!("s{j} = (float)(a_ / (double)rows);")
            } else {
                format!("s{j} = (float)a_;")
            });
            c.close("}");
            c.line("__syncthreads();");
            c.close("}");
        }
        c.open("if (t_ == 0) {");
        let env = TailEnv;
        let ord = emit::output_ordinals(full);
        for (j, st) in full.stmts.iter().enumerate().skip(tail.start) {
            if !matches!(st.expr, optiml_spec::program::Expr::Reduce(..)) {
                c.line(format!(
                    "const float s{j} = {};",
                    emit::expr(&st.expr, &env)
                ));
            }
            if let Some(o) = ord[j] {
                c.line(format!("out{o}[0] = {};", plan::scalar_store(full, j)));
            }
        }
        c.close("}");
        c.line("return;");
        c.close("}");
    }

    fn scalars(&self, c: &mut Code, stmts: &[usize]) {
        let env = ScalarEnv(self.env());
        // A tail's statements but its folds' bodies are the second launch's.
        let rows_own = |j: &&usize| match &self.shape.tail {
            Some(t) => **j < t.start || t.folds(&self.shape.program).any(|(f, _)| f == **j),
            None => true,
        };
        for &j in stmts.iter().filter(rows_own) {
            c.line(format!(
                "const float s{j} = {};",
                emit::expr(&self.p.stmts[j].expr, &env)
            ));
        }
    }

    fn pass(&self, c: &mut Code, pass: usize, aligned: bool) {
        let g = self.g;
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
        // A misaligned row keeps nothing in registers: it reads the register part of the row again in each pass,
        // in the same chunk order (so its reductions give the same bits). Its loads are element by element, each
        // in a register of its own before packing, and a whole cache of them in flight spilled (16 chunks of 8
        // bf16 elements). Shared memory still holds its part.
        let cached_here: Vec<usize> = need
            .element_inputs
            .iter()
            .copied()
            .filter(|k| aligned && self.passes.cached.contains(k))
            .collect();
        let in_smem: Vec<usize> = need
            .element_inputs
            .iter()
            .copied()
            .filter(|k| self.passes.cached.contains(k))
            .collect();
        let first = |k: usize| self.passes.first_use(k) == Some(pass);
        let al = if aligned { "true" } else { "false" };
        // Registers: the cached inputs' first chunks, all loads in flight at once on first use. Offsets are
        // compile-time constants here, folded into the bounds checks against `remi`.
        if g.rc > 0 {
            for &k in &cached_here {
                if !first(k) {
                    c.line("#pragma unroll");
                    c.line(format!(
                        "for (int j = 0; j < OPTIML_RC; ++j) optiml_p::opaque(rg{k}[j]);"
                    ));
                }
            }
            for &k in &cached_here {
                if first(k) {
                    c.line("#pragma unroll");
                    c.open("for (int j = 0; j < OPTIML_RC; ++j) {");
                    c.line(format!(
                        "rg{k}[j] = optiml_p::ld_rel<IO, {al}{}>(pr{k}, j * ({} * IO::V), remi);",
                        self.hint(false),
                        self.stride
                    ));
                    c.close("}");
                }
            }
            let ur = g.unroll.min(g.rc);
            // Unrolled where the chunks live in the register array (constant indices); a misaligned row streams
            // this part and keeps it a loop, so its loads are not all hoisted into flight at once.
            c.line(if aligned {
                "#pragma unroll"
            } else {
                "#pragma unroll 1"
            });
            c.open(format!("for (int j0 = 0; j0 < OPTIML_RC; j0 += {ur}) {{"));
            let sources = |k: usize| {
                if cached_here.contains(&k) {
                    Source::Registers
                } else {
                    Source::Global
                }
            };
            let offset = format!("(j0 + u) * ({} * IO::V)", self.stride);
            let seg = Segment {
                count: &ur.to_string(),
                guard: "",
                base: None,
                offset: &offset,
            };
            self.segment(c, pass, &seg, &sources, aligned);
            c.close("}");
        }
        // A misaligned row streams one chunk per input at a time: its element-wise loads take a register each.
        let step = if aligned { "OPTIML_U" } else { "1" };
        // Shared memory.
        if g.sc > 0 {
            c.open(format!(
                "for (int j0 = OPTIML_RC; j0 < OPTIML_RC + OPTIML_SC && (long long)j0 * {} < nchunks; \
                 j0 += {step}) {{",
                self.stride
            ));
            let sources = |k: usize| {
                if in_smem.contains(&k) {
                    Source::Shared { store: first(k) }
                } else {
                    Source::Global
                }
            };
            let base = format!("(long long)j0 * ({} * IO::V)", self.stride);
            let offset = format!("u * ({} * IO::V)", self.stride);
            let seg = Segment {
                count: step,
                guard: "j0 + u < OPTIML_RC + OPTIML_SC",
                base: Some(&base),
                offset: &offset,
            };
            self.segment(c, pass, &seg, &sources, aligned);
            c.close("}");
        }
        // Global memory: the rest of the row, in 64-bit offsets (a row may be longer than 2^31 elements).
        c.open(format!(
            "for (long long j0 = OPTIML_RC + OPTIML_SC; j0 * {} < nchunks; j0 += {step}) {{",
            self.stride
        ));
        let base = format!("j0 * (long long)({} * IO::V)", self.stride);
        let offset = format!("u * ({} * IO::V)", self.stride);
        let seg = Segment {
            count: step,
            guard: "",
            base: Some(&base),
            offset: &offset,
        };
        self.segment(c, pass, &seg, &|_| Source::Global, aligned);
        c.close("}");
        if !is_final {
            self.combine(c, pass);
        }
    }

    /// `count` chunks of the pass (`u` in `0..count`, those failing `guard` skipped; thread chunk index
    /// `j0 + u`): loads from each input's source, stores of first-use cached chunks to shared memory, then the
    /// elements.
    fn segment(
        &self,
        c: &mut Code,
        pass: usize,
        seg: &Segment<'_>,
        source: &dyn Fn(usize) -> Source,
        aligned: bool,
    ) {
        let need = &self.passes.need[pass];
        let al = if aligned { "true" } else { "false" };
        let (count, guard, off) = (seg.count, seg.guard, seg.offset);
        let at = |ptr: &str| match seg.base {
            Some(_) => format!("{ptr} + ob"),
            None => ptr.to_string(),
        };
        if let Some(base) = seg.base {
            c.line(format!("const long long ob = {base};"));
            c.line("const int rr = (int)(rem - ob < 0x7FFFFFFFLL ? rem - ob : 0x7FFFFFFFLL);");
        } else {
            c.line("const int rr = remi;");
        }
        let loaded: Vec<usize> = need
            .element_inputs
            .iter()
            .copied()
            .filter(|&k| source(k) != Source::Registers)
            .collect();
        for &k in &loaded {
            c.line(format!("uint4 t{k}[{count}];"));
        }
        if !loaded.is_empty() {
            c.line("#pragma unroll");
            c.open(format!("for (int u = 0; u < {count}; ++u) {{"));
            let guarded = !guard.is_empty();
            if guarded {
                c.open(format!("if ({guard}) {{"));
            }
            for &k in &loaded {
                match source(k) {
                    Source::Shared { store: false } => c.line(format!(
                        "t{k}[u] = sm{k}[(j0 + u - OPTIML_RC) * OPTIML_RT + tid];"
                    )),
                    Source::Shared { store: true } if self.prefetch => c.line(format!(
                        "t{k}[u] = pf ? sm{k}[(j0 + u - OPTIML_RC) * OPTIML_RT + tid] \
                         : optiml_p::ld_rel<IO, {al}{}>({}, {off}, rr);",
                        self.hint(false),
                        at(&format!("pr{k}"))
                    )),
                    Source::Shared { store: true } => c.line(format!(
                        "t{k}[u] = optiml_p::ld_rel<IO, {al}{}>({}, {off}, rr);",
                        self.hint(false),
                        at(&format!("pr{k}"))
                    )),
                    _ => c.line(format!(
                        "t{k}[u] = optiml_p::ld_rel<IO, {al}{}>({}, {off}, rr);",
                        self.hint(self.read_again(k, pass)),
                        at(&format!("pr{k}"))
                    )),
                }
            }
            if guarded {
                c.mid("} else {");
                for &k in &loaded {
                    c.line(format!("t{k}[u] = make_uint4(0u, 0u, 0u, 0u);"));
                }
                c.close("}");
            }
            c.close("}");
            // Stores to shared memory after all loads are issued, so they do not serialise the loads.
            let stored: Vec<usize> = loaded
                .iter()
                .copied()
                .filter(|&k| source(k) == Source::Shared { store: true })
                .collect();
            if !stored.is_empty() {
                c.line("#pragma unroll");
                c.open(format!("for (int u = 0; u < {count}; ++u) {{"));
                let mut when = if guarded {
                    guard.to_string()
                } else {
                    "true".into()
                };
                if self.prefetch {
                    // Already there: the previous row's last pass started these copies.
                    when = format!("!pf && ({when})");
                }
                c.open(format!("if ({when}) {{"));
                for k in stored {
                    c.line(format!(
                        "sm{k}[(j0 + u - OPTIML_RC) * OPTIML_RT + tid] = t{k}[u];"
                    ));
                }
                c.close("}");
                c.close("}");
            }
        }
        c.line("#pragma unroll");
        c.open(format!("for (int u = 0; u < {count}; ++u) {{"));
        if !guard.is_empty() {
            c.open(format!("if ({guard}) {{"));
        }
        let chunk = |k: usize| match source(k) {
            Source::Registers => format!("rg{k}[j0 + u]"),
            _ => format!("t{k}[u]"),
        };
        self.element(c, pass, seg, &chunk, al);
        if !guard.is_empty() {
            c.close("}");
        }
        c.close("}");
        // The last pass (the outputs', or a program of per-row values only, its last reduction's) has read these
        // slots: start the next row's chunks into them.
        let refilled: Vec<usize> = self
            .passes
            .cached
            .iter()
            .copied()
            .filter(|&k| source(k) == Source::Shared { store: false })
            .collect();
        if self.prefetch && aligned && pass + 1 == self.passes.count() && !refilled.is_empty() {
            let ob = if seg.base.is_some() { " + ob" } else { "" };
            c.open("if (pfn) {");
            c.line("#pragma unroll");
            c.open(format!("for (int u = 0; u < {count}; ++u) {{"));
            if !guard.is_empty() {
                c.open(format!("if ({guard}) {{"));
            }
            for k in refilled {
                c.line(format!(
                    "optiml_p::ld_async_rel<IO>(&sm{k}[(j0 + u - OPTIML_RC) * OPTIML_RT + tid], pn{k}{ob}, {off}, rr);"
                ));
            }
            if !guard.is_empty() {
                c.close("}");
            }
            c.close("}");
            c.close("}");
        }
    }

    /// The elements of one chunk, at offset `seg.offset` from the thread's first element.
    fn element(
        &self,
        c: &mut Code,
        pass: usize,
        seg: &Segment<'_>,
        chunk: &dyn Fn(usize) -> String,
        al: &str,
    ) {
        let p = self.p;
        let need = &self.passes.need[pass];
        let is_final = self.passes.is_final(pass);
        let env = self.env();
        c.line(format!("const int o = {};", seg.offset));
        // Chunks past the row's end skip their elements (a branch, not a predicate per element): a row shorter
        // than the register cache costs only the chunks it has.
        c.open("if (o < rr) {");
        // One chunk at a time: each chunk's data passes through an empty volatile asm that also takes the pass's
        // accumulators (a reduction pass) or orders after the previous chunk's stores (the final pass), so its
        // elements are not computed before the previous chunk's are done. Without it the compiler unpacked and
        // evaluated every cached chunk at once (16 chunks of 8 bf16 elements: 128 live floats) and spilled.
        let mut deps: Vec<String> = Vec::new();
        if !is_final {
            for &j in &self.passes.reductions[pass] {
                deps.push(format!("\"f\"(a{j})"));
                if matches!(self.passes.role[j], Role::Reduction(op) if op.is_arg()) {
                    deps.push(format!("\"l\"(i{j})"));
                }
            }
        }
        for &k in &need.element_inputs {
            let ch = chunk(k);
            c.line(format!(
                "asm volatile(\"\" : \"+r\"({ch}.x), \"+r\"({ch}.y), \"+r\"({ch}.z), \"+r\"({ch}.w) : {} : \"memory\");",
                deps.join(", ")
            ));
        }
        for &k in &need.element_inputs {
            c.line(format!("float x{k}[IO::V];"));
            c.line(format!("IO::unpack({}, x{k});", chunk(k)));
        }
        if is_final {
            for &j in &self.passes.element_outputs {
                c.line(format!("float y{j}[IO::V] = {{}};"));
            }
        }
        let online = self.passes.online_in(pass);
        for &(m, _) in &online {
            c.line(format!("float ob{m}[IO::V];"));
            c.line("#pragma unroll");
            c.line(format!(
                "for (int l = 0; l < IO::V; ++l) ob{m}[l] = -optiml_p::inf_f();"
            ));
        }
        c.line("#pragma unroll");
        c.open("for (int l = 0; l < IO::V; ++l) {");
        c.open("if (o + l < rr) {");
        let at = if seg.base.is_some() {
            "(my0 + ob + o + l)"
        } else {
            "(my0 + o + l)"
        };
        self.passes.lane(
            c,
            p,
            pass,
            self.passes.reductions_of(pass),
            &env,
            &|j| format!("y{j}[l]"),
            at,
        );
        c.close("}");
        c.close("}");
        for &(m, s) in &online {
            c.line(format!(
                "optiml_p::online_chunk<{}>(a{m}, a{s}, ob{m});",
                env.fast()
            ));
        }
        if is_final {
            for &j in &self.passes.element_outputs {
                let o = self.out_ordinal(j);
                let ptr = if seg.base.is_some() {
                    format!("pw{o} + ob")
                } else {
                    format!("pw{o}")
                };
                c.line(format!(
                    "optiml_p::st_rel<IO, {al}{}>({ptr}, o, rr, IO::pack(y{j}));",
                    self.hint(false)
                ));
            }
        }
        c.close("}");
    }

    /// The row-wide combine of a pass's reductions, then their values `s{j}`.
    fn combine(&self, c: &mut Code, pass: usize) {
        let reds = &self.passes.reductions[pass];
        for &j in reds {
            match self.passes.online_of(j) {
                Some((m, s)) if m == j => {
                    c.line(format!("optiml_p::warp_online(a{m}, a{s});"));
                    continue;
                }
                Some(_) => continue,
                None => {}
            }
            match self.passes.role[j] {
                Role::Reduction(op) if op.is_arg() => c.line(format!(
                    "optiml_p::warp_arg<{}>(a{j}, i{j});",
                    op == Reduce::Argmax
                )),
                Role::Reduction(op) => c.line(format!(
                    "a{j} = optiml_p::warp_all<{}>(a{j});",
                    emit::reduce_op(op)
                )),
                _ => {}
            }
        }
        let nw = self.g.warps();
        if nw > 1 {
            let at = |array: &str, slot: usize, part: &str| format!("{array}[buf][{slot}][{part}]");
            c.open("if (lane == 0) {");
            self.passes.store_partials(c, reds, "warp", &at);
            c.close("}");
            c.line("__syncthreads();");
            self.passes.fold_partials(c, reds, &nw.to_string(), &at);
            // The next combine writes the other buffer; the one after that, this one, is behind that combine's
            // barrier, which every thread reaches only after reading this one.
            c.line("buf ^= 1;");
        }
        if self.clustered {
            // Every block now holds its own combination; the cluster folds the blocks' in rank order, each
            // block reading the others' from distributed shared memory after the barrier that publishes them.
            let cx = |array: &str| if array == "red_f" { "cx_f" } else { "cx_i" };
            c.open("if (threadIdx.x == 0) {");
            self.passes.store_partials(c, reds, "", &|array, slot, _| {
                format!("{}[cbuf][{slot}]", cx(array))
            });
            c.close("}");
            c.line("optiml_p::cluster_sync();");
            self.passes
                .fold_partials(c, reds, "OPTIML_CL", &|array, slot, part| {
                    format!("optiml_p::cluster_ld(&{}[cbuf][{slot}], {part})", cx(array))
                });
            c.line("cbuf ^= 1;");
        }
        self.passes.finish(c, reds);
    }
}

impl Tunable for RowSchedule {
    /// `256 threads/row, 1 row/block, 8 reg chunks, 0 KiB smem, unroll 4, grid: a block per row group`.
    fn describe(&self) -> String {
        let grid = if self.blocks_per_sm == 0 {
            "a block per row group".to_string()
        } else {
            format!("{} blocks/SM", self.blocks_per_sm)
        };
        let cluster = if self.cluster > 1 {
            format!(", cluster {}", self.cluster)
        } else {
            String::new()
        };
        let l2 = if self.l2 == 1 { ", L2 hints" } else { "" };
        let prefetch = if self.prefetch {
            ", next row prefetched"
        } else {
            ""
        };
        format!(
            "{} threads/row, {} rows/block, {} reg chunks, {} KiB smem, unroll {}, grid: {grid}{cluster}{l2}{prefetch}",
            self.row_threads, self.rows_per_block, self.reg_chunks, self.smem_kib, self.unroll
        )
    }

    /// Threads per row 32 to 1024, several rows per block only with a warp per row, at most 1024 threads, cached
    /// chunks that leave the registers a thread needs besides (at the block size's register share), a grid cap
    /// of at most 2048 resident threads per SM.
    fn is_valid(&self) -> bool {
        let threads = self.row_threads * self.rows_per_block;
        ROW_THREADS.contains(&self.row_threads)
            && ROWS_PER_BLOCK.contains(&self.rows_per_block)
            && (self.rows_per_block == 1 || self.row_threads == 32)
            && threads <= 1024
            && REG_CHUNKS.contains(&self.reg_chunks)
            && 4 * self.reg_chunks + REG_OVERHEAD <= (65536 / threads).min(255)
            && SMEM_KIB.contains(&self.smem_kib)
            && UNROLL.contains(&self.unroll)
            && BLOCKS_PER_SM.contains(&self.blocks_per_sm)
            && threads * self.blocks_per_sm <= 2048
            && CLUSTER.contains(&self.cluster)
            // A persistent cluster grid is the clusters resident at once (`blocks_per_sm` 1).
            && (self.cluster == 1 || (self.rows_per_block == 1 && self.blocks_per_sm <= 1))
            && L2.contains(&self.l2)
            && (!self.prefetch || (self.smem_kib > 0 && self.blocks_per_sm > 0))
    }

    /// A block of 256 threads per row with 8 chunks per thread in registers: rows up to 8192 f32 (16384 16-bit)
    /// are read once, longer ones stream the rest; a launch of one block per row.
    fn default_for(_arch: Arch) -> Self {
        RowSchedule {
            row_threads: 256,
            rows_per_block: 1,
            reg_chunks: 8,
            smem_kib: 0,
            unroll: 4,
            blocks_per_sm: 0,
            cluster: 1,
            l2: 0,
            prefetch: false,
        }
    }

    fn space() -> Vec<Self> {
        let mut out = Vec::new();
        for row_threads in ROW_THREADS {
            for rows_per_block in ROWS_PER_BLOCK {
                for reg_chunks in REG_CHUNKS {
                    for smem_kib in SMEM_KIB {
                        for unroll in UNROLL {
                            for blocks_per_sm in BLOCKS_PER_SM {
                                for cluster in CLUSTER {
                                    for l2 in L2 {
                                        for prefetch in [false, true] {
                                            let s = RowSchedule {
                                                row_threads,
                                                rows_per_block,
                                                reg_chunks,
                                                smem_kib,
                                                unroll,
                                                blocks_per_sm,
                                                cluster,
                                                l2,
                                                prefetch,
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
                }
            }
        }
        out
    }

    fn catalog() -> Vec<Transform<Self>> {
        vec![
            Transform {
                name: "more-row-threads",
                rationale: "twice the threads per row, half the register chunks each: the same row on chip, spread \
                            over more warps (more loads in flight per row, shorter per-thread loops)",
                addresses: Bottleneck::Mixed,
                claimed_gain: 1.05,
                apply: |s| {
                    (s.rows_per_block == 1).then_some(RowSchedule {
                        row_threads: s.row_threads * 2,
                        reg_chunks: s.reg_chunks / 2,
                        ..*s
                    })
                },
            },
            Transform {
                name: "fewer-row-threads",
                rationale: "half the threads per row, twice the register chunks each: cheaper block reductions \
                            (fewer warps to combine) for rows that fit",
                addresses: Bottleneck::Mixed,
                claimed_gain: 1.03,
                apply: |s| {
                    (s.rows_per_block == 1).then_some(RowSchedule {
                        row_threads: s.row_threads / 2,
                        reg_chunks: (s.reg_chunks * 2).max(1),
                        ..*s
                    })
                },
            },
            Transform {
                name: "more-rows-per-block",
                rationale: "a warp per row, twice the rows per block: short rows need no block barrier, and larger \
                            blocks cost fewer block launches",
                addresses: Bottleneck::Mixed,
                claimed_gain: 1.04,
                apply: |s| {
                    (s.row_threads == 32).then_some(RowSchedule {
                        rows_per_block: s.rows_per_block * 2,
                        ..*s
                    })
                },
            },
            Transform {
                name: "fewer-rows-per-block",
                rationale: "half the rows per block: finer load balance over SMs when rows are few",
                addresses: Bottleneck::Mixed,
                claimed_gain: 1.02,
                apply: |s| {
                    Some(RowSchedule {
                        rows_per_block: s.rows_per_block / 2,
                        ..*s
                    })
                },
            },
            Transform {
                name: "more-register-chunks",
                rationale: "twice the chunks kept in registers: a longer row is read from global memory once \
                            instead of once per pass",
                addresses: Bottleneck::Memory,
                claimed_gain: 1.3,
                apply: |s| {
                    Some(RowSchedule {
                        reg_chunks: (s.reg_chunks * 2).max(1),
                        ..*s
                    })
                },
            },
            Transform {
                name: "fewer-register-chunks",
                rationale: "half the chunks in registers: fewer registers per thread, more resident warps to hide \
                            latency when the row is short or streamed anyway",
                addresses: Bottleneck::Mixed,
                claimed_gain: 1.05,
                apply: |s| {
                    Some(RowSchedule {
                        reg_chunks: s.reg_chunks / 2,
                        ..*s
                    })
                },
            },
            Transform {
                name: "more-shared-memory",
                rationale: "the next shared-memory level for the part of the row the registers do not hold: rows \
                            too long for registers are read once instead of once per pass",
                addresses: Bottleneck::Memory,
                claimed_gain: 1.3,
                apply: |s| {
                    SMEM_KIB
                        .iter()
                        .copied()
                        .find(|&l| l > s.smem_kib)
                        .map(|smem_kib| RowSchedule { smem_kib, ..*s })
                },
            },
            Transform {
                name: "less-shared-memory",
                rationale: "the previous shared-memory level: more resident blocks per SM when the row fits in less",
                addresses: Bottleneck::Mixed,
                claimed_gain: 1.05,
                apply: |s| {
                    SMEM_KIB
                        .iter()
                        .rev()
                        .copied()
                        .find(|&l| l < s.smem_kib)
                        .map(|smem_kib| RowSchedule { smem_kib, ..*s })
                },
            },
            Transform {
                name: "deeper-unroll",
                rationale: "twice the chunks in flight per thread where a pass streams: more memory-level \
                            parallelism for rows longer than the cache",
                addresses: Bottleneck::Memory,
                claimed_gain: 1.05,
                apply: |s| {
                    Some(RowSchedule {
                        unroll: s.unroll * 2,
                        ..*s
                    })
                },
            },
            Transform {
                name: "shallower-unroll",
                rationale: "half the chunks in flight per streamed step: fewer registers",
                addresses: Bottleneck::Mixed,
                claimed_gain: 1.02,
                apply: |s| {
                    Some(RowSchedule {
                        unroll: s.unroll / 2,
                        ..*s
                    })
                },
            },
            Transform {
                name: "persistent-grid",
                rationale: "a grid of a few blocks per SM that loop over rows: no block launch per row, which pays \
                            for many short rows",
                addresses: Bottleneck::Mixed,
                claimed_gain: 1.05,
                apply: |s| {
                    // A cluster grid's persistent form is the clusters resident at once.
                    (s.blocks_per_sm == 0).then_some(RowSchedule {
                        blocks_per_sm: if s.cluster > 1 {
                            1
                        } else {
                            (2048 / (s.row_threads * s.rows_per_block)).min(8)
                        },
                        ..*s
                    })
                },
            },
            Transform {
                name: "more-blocks-per-sm",
                rationale: "twice the resident blocks the persistent grid is sized for: more rows in flight",
                addresses: Bottleneck::Memory,
                claimed_gain: 1.04,
                apply: |s| {
                    (s.blocks_per_sm > 0).then_some(RowSchedule {
                        blocks_per_sm: s.blocks_per_sm * 2,
                        ..*s
                    })
                },
            },
            Transform {
                name: "fewer-blocks-per-sm",
                rationale: "half the blocks of the persistent grid: when registers or shared memory limit residency, \
                            blocks beyond it only wait",
                addresses: Bottleneck::Mixed,
                claimed_gain: 1.02,
                apply: |s| {
                    (s.blocks_per_sm > 1).then_some(RowSchedule {
                        blocks_per_sm: s.blocks_per_sm / 2,
                        ..*s
                    })
                },
            },
            Transform {
                name: "split-row-over-cluster",
                rationale: "twice the blocks per row in a thread-block cluster (sm_90): each keeps half as much of \
                            the row on chip, so a row too long for one block is read once, and few long rows \
                            spread over more SMs",
                addresses: Bottleneck::Memory,
                claimed_gain: 1.3,
                apply: |s| {
                    (s.rows_per_block == 1 && s.blocks_per_sm <= 1).then_some(RowSchedule {
                        cluster: s.cluster * 2,
                        ..*s
                    })
                },
            },
            Transform {
                name: "smaller-cluster",
                rationale: "half the blocks per row: fewer cluster barriers and less distributed-shared-memory \
                            traffic when the row fits in fewer blocks",
                addresses: Bottleneck::Mixed,
                claimed_gain: 1.03,
                apply: |s| {
                    (s.cluster > 1).then_some(RowSchedule {
                        cluster: s.cluster / 2,
                        ..*s
                    })
                },
            },
            Transform {
                name: "block-per-row-group",
                rationale: "one block per row group instead of a persistent grid: the hardware balances blocks \
                            across SMs, which pays when rows are long and few",
                addresses: Bottleneck::Mixed,
                claimed_gain: 1.03,
                apply: |s| {
                    (s.blocks_per_sm > 0).then_some(RowSchedule {
                        blocks_per_sm: 0,
                        prefetch: false,
                        ..*s
                    })
                },
            },
            Transform {
                name: "keep-rows-in-l2",
                rationale: "L2 hints: the streamed part of each row stays in L2 for the next pass, outputs and last \
                            reads leave first, so a pass reads again from L2 what it would read from DRAM",
                addresses: Bottleneck::Memory,
                claimed_gain: 1.2,
                apply: |s| (s.l2 == 0).then_some(RowSchedule { l2: 1, ..*s }),
            },
            Transform {
                name: "no-l2-hints",
                rationale: "plain loads and stores: the hints pin lines that later passes do not reach in time",
                addresses: Bottleneck::Mixed,
                claimed_gain: 1.02,
                apply: |s| (s.l2 == 1).then_some(RowSchedule { l2: 0, ..*s }),
            },
            Transform {
                name: "prefetch-next-row",
                rationale: "the next row's shared-memory part loaded as this row's outputs are stored: reads and \
                            writes overlap instead of alternating, where the rows a grid holds at once (one block \
                            or cluster per SM holding its row on chip) leave DRAM idle between them",
                addresses: Bottleneck::Memory,
                claimed_gain: 1.25,
                apply: |s| {
                    (!s.prefetch && s.smem_kib > 0).then_some(RowSchedule {
                        prefetch: true,
                        blocks_per_sm: s.blocks_per_sm.max(1),
                        ..*s
                    })
                },
            },
            Transform {
                name: "no-prefetch",
                rationale: "each row loaded when its first pass starts: the copies in flight across a row's last \
                            pass compete with its stores",
                addresses: Bottleneck::Mixed,
                claimed_gain: 1.02,
                apply: |s| {
                    s.prefetch.then_some(RowSchedule {
                        prefetch: false,
                        ..*s
                    })
                },
            },
        ]
    }
}
