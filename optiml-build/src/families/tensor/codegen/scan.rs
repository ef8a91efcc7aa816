//! Scans: a running sum, product, max or min along one axis (`y[r, c] = cumsum(c) x[r, c]`), inclusive or
//! exclusive, forward or reversed, of a pointwise body of the inputs (a mask: `x[r, c] * m[r, c]`).
//!
//! One kernel for both layouts. A *line* is the scanned axis at one combination of the other axes; a group of
//! `row_threads` consecutive threads (one thread, a warp, or the whole block) walks a line in steps of
//! `row_threads × V` values, `V` = `chunks` 16-byte chunks of the storage type per thread:
//! 1. each thread loads its `V` consecutive values in scan order (16-byte loads when the scanned axis is
//!    contiguous and the line's pointers are aligned; a reversed scan reads its chunks from the line's end) and
//!    evaluates the body;
//! 2. it scans them in registers, then the group scans the threads' totals (`optiml_p::group_scan`: warp
//!    shuffles, and for a block-wide group the warps' totals through shared memory);
//! 3. each value is combined with the carry (the line so far) and the group's earlier threads, and stored; the
//!    carry takes the group's total.
//!
//! Along a strided axis (dimensions after the scanned one) the loads are scalar, and a warp's threads take
//! adjacent lines when `row_threads` is 1, so every load instruction reads one contiguous run.
//!
//! Few long lines do not fill the GPU a block per line. A schedule with `blocks` set cuts each line into slices, a
//! block each, in three launches of one kernel ([`optiml_runtime::TreeLaunch`]): every block folds its slice to
//! one total; one thread per line turns the totals into their exclusive prefixes (in slice order) in the
//! workspace; every block scans its slice again from its prefix and writes it. That reads the input twice, where a decoupled
//! look-back reads it once, but a look-back's prefix is a sum of whichever predecessors had finished, so its
//! rounding would change from run to run.
//!
//! The fold order is fixed by the schedule and the shape (a thread's values in order, a fixed shuffle tree, then
//! the carry; for split lines the slice totals in order), so a run repeats bit for bit; no atomics.

use super::classify::ScanShape;
use super::emit::{self, Code, Env};
use crate::experts::Candidate;
use crate::search::{Bottleneck, Transform, Tunable};
use optiml_runtime::{Arch, Launch, ProgramLaunch, TreeLaunch};
use optiml_spec::program::{Elem, Expr, Program};

/// Launch shape of the scan kernel: what the search transforms.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
// A recorded schedule reads as this kernel's only if it has no other kernel's fields.
#[serde(deny_unknown_fields)]
pub struct ScanSchedule {
    /// Threads per block.
    pub threads: u32,
    /// Threads that walk one line together: 1 (a line per thread), 32 (a line per warp) or `threads` (a line
    /// per block).
    pub row_threads: u32,
    /// 16-byte chunks of values each thread takes per step (4 f32 or 8 16-bit values each).
    pub chunks: u32,
    /// 0: a line's group walks all of it. Otherwise lines are cut into slices of a block each, about this many
    /// blocks per launch over all lines (only with a line per block): few long lines then fill the GPU.
    #[serde(default)]
    pub blocks: u32,
}

const THREADS: [u32; 5] = [64, 128, 256, 512, 1024];
const CHUNKS: [u32; 3] = [1, 2, 4];
/// Blocks per launch of a split scan (0: lines are not split): about 8 and 31 per SM of an H200.
const BLOCKS: [u32; 3] = [0, 1024, 4096];

impl ScanSchedule {
    /// The default for `shape` on `arch`: [`Tunable::default_for`] where the scanned axis is contiguous; along a
    /// strided axis a line per thread (a warp's loads are 32 adjacent lines) with 16 values in flight per
    /// thread. Measured on the H200 (`scans_across_their_schedule_space`, f32 `[64, 4096, 1024]` scanned along
    /// the 4096): 256 threads with 16 values per thread at 3.25 TB/s, 4 values at 2.44, a line per warp 0.45.
    pub fn for_scan(shape: &ScanShape, arch: Arch) -> Self {
        let s = Self::default_for(arch);
        if shape.inner.is_empty() {
            s
        } else {
            ScanSchedule {
                row_threads: 1,
                chunks: 16 / emit::vec_width(shape.program.dtype),
                ..s
            }
        }
    }

    /// The default for few long lines (a line of 2²⁴ elements): each line cut over 1024 blocks of 256 threads,
    /// one chunk per thread and step. Measured on the H200 (`scans_across_their_schedule_space`, 4 lines of 2²⁶
    /// f32): 2.45 TB/s of the minimum traffic (the split reads the input twice: at most two thirds of the copy
    /// bandwidth), against 1.63 and 1.33 TB/s with 2 and 4 chunks, 2.35 TB/s over 4096 blocks, and 0.04 TB/s for
    /// the same schedule walking whole lines (51 ms against 0.88).
    pub fn for_long_lines(arch: Arch) -> Self {
        ScanSchedule {
            blocks: BLOCKS[1],
            ..Self::default_for(arch)
        }
    }

    /// Lines one block walks.
    fn lines_per_block(&self) -> u32 {
        self.threads / self.row_threads
    }
}

impl Tunable for ScanSchedule {
    /// `256 threads, a line per warp, 2 chunks per thread`.
    fn describe(&self) -> String {
        let group = match self.row_threads {
            1 => "a line per thread".to_string(),
            32 => "a line per warp".to_string(),
            _ => "a line per block".to_string(),
        };
        let split = if self.blocks == 0 {
            String::new()
        } else {
            format!(", lines split over {} blocks", self.blocks)
        };
        format!(
            "{} threads, {group}, {} chunks per thread{split}",
            self.threads, self.chunks
        )
    }

    /// 64 to 1024 threads; a line per thread, warp or block; 1, 2 or 4 chunks per thread and step; lines split
    /// over 1024 or 4096 blocks only where a block walks a line.
    fn is_valid(&self) -> bool {
        THREADS.contains(&self.threads)
            && (self.row_threads == 1 || self.row_threads == 32 || self.row_threads == self.threads)
            && CHUNKS.contains(&self.chunks)
            && BLOCKS.contains(&self.blocks)
            && (self.blocks == 0 || self.row_threads == self.threads)
    }

    /// A block of 256 threads per line, one chunk (4 f32) per thread and step. Measured on the H200
    /// (`scans_across_their_schedule_space`, 8192 rows of 32768 f32): 3.97 TB/s for the cumsum (the reversed
    /// exclusive one too), against 3.67 TB/s for a warp per line with 2 chunks (the first guess) and 0.64 for a
    /// line per thread; the masked cumsum 4.03 against 3.48.
    fn default_for(_arch: Arch) -> Self {
        ScanSchedule {
            threads: 256,
            row_threads: 256,
            chunks: 1,
            blocks: 0,
        }
    }

    fn space() -> Vec<Self> {
        let mut out = Vec::new();
        for threads in THREADS {
            for row_threads in [1, 32, threads] {
                for chunks in CHUNKS {
                    for blocks in BLOCKS {
                        let s = ScanSchedule {
                            threads,
                            row_threads,
                            chunks,
                            blocks,
                        };
                        if s.is_valid() && !out.contains(&s) {
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
                name: "line-per-warp",
                rationale: "a warp walks a line: its loads are one contiguous run per instruction and its scan \
                            is shuffles only, with no barrier between steps",
                addresses: Bottleneck::Memory,
                claimed_gain: 1.05,
                apply: |s| {
                    (s.row_threads != 32).then_some(ScanSchedule {
                        row_threads: 32,
                        ..*s
                    })
                },
            },
            Transform {
                name: "line-per-block",
                rationale: "the whole block walks a line: long lines take fewer, longer steps, and few lines \
                            still fill the GPU",
                addresses: Bottleneck::Mixed,
                claimed_gain: 1.03,
                apply: |s| {
                    (s.row_threads != s.threads).then_some(ScanSchedule {
                        row_threads: s.threads,
                        ..*s
                    })
                },
            },
            Transform {
                name: "line-per-thread",
                rationale: "a thread walks a line alone: no shuffles, and along a strided axis a warp reads 32 \
                            adjacent lines per instruction",
                addresses: Bottleneck::Compute,
                claimed_gain: 1.03,
                apply: |s| {
                    (s.row_threads != 1).then_some(ScanSchedule {
                        row_threads: 1,
                        ..*s
                    })
                },
            },
            Transform {
                name: "split-lines",
                rationale: "cut each line into slices of a block each (three launches): few long lines fill the \
                            GPU, for a second read of the input",
                addresses: Bottleneck::Mixed,
                claimed_gain: 1.5,
                apply: |s| {
                    (s.blocks == 0).then_some(ScanSchedule {
                        row_threads: s.threads,
                        blocks: BLOCKS[1],
                        ..*s
                    })
                },
            },
            Transform {
                name: "more-slices",
                rationale: "four times the blocks per launch of a split scan: more bytes in flight for lines too \
                            few to fill the GPU",
                addresses: Bottleneck::Memory,
                claimed_gain: 1.05,
                apply: |s| {
                    (s.blocks == BLOCKS[1]).then_some(ScanSchedule {
                        blocks: BLOCKS[2],
                        ..*s
                    })
                },
            },
            Transform {
                name: "whole-lines",
                rationale: "a line's block walks all of it, in one launch that reads the input once",
                addresses: Bottleneck::Memory,
                claimed_gain: 1.3,
                apply: |s| (s.blocks > 0).then_some(ScanSchedule { blocks: 0, ..*s }),
            },
            Transform {
                name: "more-chunks",
                rationale: "twice the values per thread and step: more 16-byte loads in flight and half the \
                            shuffle scans per value",
                addresses: Bottleneck::Memory,
                claimed_gain: 1.04,
                apply: |s| {
                    Some(ScanSchedule {
                        chunks: s.chunks * 2,
                        ..*s
                    })
                },
            },
            Transform {
                name: "fewer-chunks",
                rationale: "half the values per thread: fewer registers (more resident warps) and shorter padding \
                            at the end of short lines",
                addresses: Bottleneck::Mixed,
                claimed_gain: 1.02,
                apply: |s| {
                    Some(ScanSchedule {
                        chunks: s.chunks / 2,
                        ..*s
                    })
                },
            },
            Transform {
                name: "wider-blocks",
                rationale: "twice the threads per block: more lines per block (or a longer step of a block's \
                            line), fewer blocks to schedule",
                addresses: Bottleneck::Mixed,
                claimed_gain: 1.02,
                apply: |s| {
                    Some(ScanSchedule {
                        threads: s.threads * 2,
                        row_threads: if s.row_threads == s.threads {
                            s.threads * 2
                        } else {
                            s.row_threads
                        },
                        ..*s
                    })
                },
            },
            Transform {
                name: "narrower-blocks",
                rationale: "half the threads per block: finer load balance across SMs, and a block-wide line's \
                            barrier waits on fewer warps",
                addresses: Bottleneck::Mixed,
                claimed_gain: 1.02,
                apply: |s| {
                    Some(ScanSchedule {
                        threads: s.threads / 2,
                        row_threads: if s.row_threads == s.threads {
                            s.threads / 2
                        } else {
                            s.row_threads
                        },
                        ..*s
                    })
                },
            },
        ]
    }
}

/// The body's leaves at value `e` of a thread's step: `a{k}[e]` for an input along the scanned axis, `b{k}` for
/// one loaded once per line.
struct Values<'a> {
    along: &'a [bool],
    fast: bool,
}

impl Env for Values<'_> {
    fn input(&self, k: usize) -> String {
        if self.along[k] {
            format!("a{k}[e]")
        } else {
            format!("b{k}")
        }
    }

    fn value(&self, j: usize) -> String {
        // A scan program has one statement (`classify` refuses others): nothing earlier to read.
        format!("OPTIML_NO_STATEMENT_{j}")
    }

    fn fast(&self) -> bool {
        self.fast
    }
}

/// A load of element `at` of input `k`'s line, as f32.
fn load(p: &Program, k: usize, at: &str) -> String {
    match p.inputs[k].elem {
        Elem::Float => format!("IO::get(r{k}[{at}])"),
        _ => format!("(float)r{k}[{at}]"),
    }
}

impl ScanSchedule {
    /// The candidate computing `shape`'s program.
    pub fn candidate(&self, shape: &ScanShape) -> Candidate {
        let p = &shape.program;
        let s = &p.stmts[0];
        let (scan, body) = match &s.expr {
            Expr::Scan(scan, body) => (*scan, body.as_ref()),
            // `classify` builds a scan shape from a scan statement only.
            other => unreachable!("a scan shape's statement is a scan, not {other:?}"),
        };
        let describe = self.describe();
        let contiguous = shape.inner.is_empty();
        let d = scan.dim;
        let split = self.blocks > 0;
        let mut c = emit::prologue(p, "scan", &describe);
        c.line(format!("typedef {} OP;", emit::reduce_op(scan.op)));
        c.line("");
        if split {
            emit::entry_full(
                &mut c,
                p,
                &self.threads.to_string(),
                "",
                &["float* ws", "int stage", "long long slices"],
            );
        } else {
            emit::entry(&mut c, p, &self.threads.to_string());
        }
        c.line(format!(
            "constexpr int G = {}, V = {} * IO::V;",
            self.row_threads, self.chunks
        ));
        if self.row_threads > 32 {
            c.line(format!("__shared__ float warps[{}];", self.threads / 32));
        } else {
            c.line("float* warps = nullptr;");
        }
        c.line(format!(
            "const long long lines = {};",
            emit::product(&shape.items)
        ));
        if split {
            c.line("const long long line = (long long)blockIdx.x / slices;");
            c.line("const long long slice = (long long)blockIdx.x % slices;");
        } else {
            c.line(format!(
                "const long long line = (long long)blockIdx.x * {} + threadIdx.x / G;",
                self.lines_per_block()
            ));
        }
        c.line("const int rank = (int)(threadIdx.x % G);");
        c.line(
            "// A thread's or a warp's line past the end returns whole; a block-wide line is never past the end.",
        );
        c.line("if (line >= lines) return;");
        c.line(format!("const long long n = n{d};"));
        if split {
            c.line("const long long step = (long long)G * V;");
            c.line("// Slices start on a step, so that 16-byte chunks stay on the grid.");
            c.line("const long long per = (n + slices * step - 1) / (slices * step) * step;");
            c.line("const long long lo = slice * per;");
            c.line("const long long hi = lo + per < n ? lo + per : n;");
            c.line("float* total = ws + line * slices;");
            c.open("if (stage == 1) {");
            c.line("// The slices' totals to their exclusive prefixes, in slice order, by one thread per line.");
            c.open("if (slices > 1 && slice == 0 && threadIdx.x == 0) {");
            c.line("float run = OP::id();");
            c.open("for (long long k = 0; k < slices; ++k) {");
            c.line("const float t = total[k];");
            c.line("total[k] = run;");
            c.line("run = OP::op(run, t);");
            c.close("}");
            c.close("}");
            c.line("return;");
            c.close("}");
            c.line("// A line of one slice needs no totals.");
            c.line("if (stage == 0 && slices == 1) return;");
        } else {
            c.line("const long long lo = 0, hi = n;");
        }
        emit::coords(&mut c, "line", &shape.items, &shape.items, "long long");
        let mut reads = Vec::new();
        emit::refs(body, &mut reads, &mut Vec::new());
        reads.sort_unstable();
        let along: Vec<bool> = p.inputs.iter().map(|t| t.axes.contains(&d)).collect();
        // Every tensor's line: its start, and its stride along the scanned axis.
        let stride = |axes: &[usize]| {
            let at = axes
                .iter()
                .position(|&a| a == d)
                .map_or(axes.len(), |i| i + 1);
            emit::product(&axes[at..])
        };
        for &k in &reads {
            let t = &p.inputs[k];
            c.line(format!(
                "{} r{k} = in{k} + ({});",
                emit::in_type(t.elem),
                emit::offset(&t.axes, &[d])
            ));
            if along[k] {
                c.line(format!("const long long st{k} = {};", stride(&t.axes)));
            } else {
                c.line(format!("const float b{k} = {};", load(p, k, "0")));
            }
        }
        c.line(format!("T* w = out0 + ({});", emit::offset(&s.axes, &[d])));
        c.line(format!("const long long sw = {};", stride(&s.axes)));
        // 16-byte chunks where every floating line along the axis starts on a 16-byte boundary; a reversed scan
        // reads chunks from the end, which stay on the grid when the length is a multiple of a chunk.
        if contiguous {
            let mut conds = vec!["optiml_p::aligned16(w)".to_string()];
            for &k in &reads {
                if along[k] && p.inputs[k].elem == Elem::Float {
                    conds.push(format!("optiml_p::aligned16(r{k})"));
                }
            }
            if scan.reverse {
                conds.push("n % IO::V == 0".into());
            }
            c.line(format!("const bool vec = {};", conds.join(" && ")));
        }
        // Physical position of scan-order position `q`.
        let phys = |q: &str| {
            if scan.reverse {
                format!("(n - 1 - ({q}))")
            } else {
                format!("({q})")
            }
        };
        let along_reads: Vec<usize> = reads.iter().copied().filter(|&k| along[k]).collect();
        // One walk over [lo, hi): with `write`, the scanned values are stored; without, only the carry runs
        // (a split line's first launch, which keeps its slice's total).
        let walk = |c: &mut Code, write: bool| {
            c.open("for (long long start = lo; start < hi; start += (long long)G * V) {");
            c.line("// The scan-order position of this thread's first value.");
            c.line("const long long o = start + (long long)rank * V;");
            for &k in &along_reads {
                c.line(format!("float a{k}[V];"));
            }
            let scalar_loads = |c: &mut Code| {
                c.line("#pragma unroll");
                c.open("for (int e = 0; e < V; ++e) {");
                c.line("const long long q = o + e;");
                for &k in &along_reads {
                    c.line(format!(
                        "a{k}[e] = q < hi ? {} : 0.f;",
                        load(p, k, &format!("{} * st{k}", phys("q")))
                    ));
                }
                c.close("}");
            };
            if contiguous {
                c.open("if (vec && o + V <= hi) {");
                // The first chunk's physical start: forward at o; reversed, the run [n - o - V, n - o) backwards.
                let first = if scan.reverse { "n - o - V" } else { "o" };
                c.line(format!("const long long at = {first};"));
                c.line("#pragma unroll");
                c.open("for (int j = 0; j < V / IO::V; ++j) {");
                c.line("float f[IO::V];");
                for &k in &along_reads {
                    if p.inputs[k].elem == Elem::Float {
                        c.line(format!(
                            "IO::unpack(*reinterpret_cast<const uint4*>(r{k} + at + j * IO::V), f);"
                        ));
                        c.line("#pragma unroll");
                        let slot = if scan.reverse {
                            "V - 1 - (j * IO::V + e)"
                        } else {
                            "j * IO::V + e"
                        };
                        c.line(format!(
                            "for (int e = 0; e < IO::V; ++e) a{k}[{slot}] = f[e];"
                        ));
                    } else {
                        c.line("#pragma unroll");
                        let (slot, pos) = if scan.reverse {
                            ("V - 1 - (j * IO::V + e)", "at + j * IO::V + e")
                        } else {
                            ("j * IO::V + e", "at + j * IO::V + e")
                        };
                        c.line(format!(
                            "for (int e = 0; e < IO::V; ++e) a{k}[{slot}] = {};",
                            load(p, k, pos)
                        ));
                    }
                }
                c.close("}");
                c.mid("} else {");
                scalar_loads(c);
                c.close("}");
            } else {
                scalar_loads(c);
            }
            let env = Values {
                along: &along,
                fast: p.dtype != optiml_spec::DType::F32,
            };
            c.line("float t[V];");
            c.line("#pragma unroll");
            c.line(format!(
                "for (int e = 0; e < V; ++e) t[e] = o + e < hi ? {} : OP::id();",
                emit::expr(body, &env)
            ));
            c.line("#pragma unroll");
            c.line("for (int e = 1; e < V; ++e) t[e] = OP::op(t[e - 1], t[e]);");
            c.line("float all;");
            c.line(format!(
            "const float pre = OP::op(carry, optiml_p::group_scan<OP, G, {}>(t[V - 1], all, warps));",
            self.threads
        ));
            if write {
                c.line("float y[V];");
                if scan.exclusive {
                    c.line("y[0] = pre;");
                    c.line("#pragma unroll");
                    c.line("for (int e = 1; e < V; ++e) y[e] = OP::op(pre, t[e - 1]);");
                } else {
                    c.line("#pragma unroll");
                    c.line("for (int e = 0; e < V; ++e) y[e] = OP::op(pre, t[e]);");
                }
                let scalar_stores = |c: &mut Code| {
                    c.line("#pragma unroll");
                    c.open("for (int e = 0; e < V; ++e) {");
                    c.line("const long long q = o + e;");
                    c.line(format!(
                        "if (q < hi) w[{} * sw] = IO::put(y[e]);",
                        phys("q")
                    ));
                    c.close("}");
                };
                if contiguous {
                    c.open("if (vec && o + V <= hi) {");
                    let first = if scan.reverse { "n - o - V" } else { "o" };
                    c.line(format!("const long long at = {first};"));
                    c.line("#pragma unroll");
                    c.open("for (int j = 0; j < V / IO::V; ++j) {");
                    c.line("float f[IO::V];");
                    c.line("#pragma unroll");
                    let slot = if scan.reverse {
                        "V - 1 - (j * IO::V + e)"
                    } else {
                        "j * IO::V + e"
                    };
                    c.line(format!("for (int e = 0; e < IO::V; ++e) f[e] = y[{slot}];"));
                    c.line("*reinterpret_cast<uint4*>(w + at + j * IO::V) = IO::pack(f);");
                    c.close("}");
                    c.mid("} else {");
                    scalar_stores(c);
                    c.close("}");
                } else {
                    scalar_stores(c);
                }
            }
            c.line("carry = OP::op(carry, all);");
            c.close("}");
        };
        if split {
            c.open("if (stage == 0) {");
            c.line("float carry = OP::id();");
            walk(&mut c, false);
            c.line("// The slice's total, for the prefix launch.");
            c.line("if (threadIdx.x == 0) total[slice] = carry;");
            c.line("return;");
            c.close("}");
            c.line("float carry = slices > 1 ? total[slice] : OP::id();");
        } else {
            c.line("float carry = OP::id();");
        }
        walk(&mut c, true);
        c.close("}");
        Candidate {
            source: c.finish(),
            entry: super::ENTRY,
            launch: Launch::Program(ProgramLaunch {
                threads: self.threads,
                smem_bytes: 0,
                items_mask: emit::mask(shape.items.iter().copied()),
                items_per_block: self.lines_per_block(),
                max_blocks_per_sm: 0,
                cluster: 1,
                nonempty_mask: 0,
                tree: split.then_some(TreeLaunch {
                    blocks: self.blocks,
                    tile: self.threads * self.chunks * emit::vec_width(p.dtype),
                    passes: 2,
                    partials: 1,
                }),
            }),
            schedule: describe,
        }
    }
}
