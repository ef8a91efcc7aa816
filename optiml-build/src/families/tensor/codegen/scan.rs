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
//! The fold order is fixed by the schedule (a thread's values in order, a fixed shuffle tree, then the carry), so
//! a run repeats bit for bit; no atomics, no look-back between blocks.

use super::classify::ScanShape;
use super::emit::{self, Code, Env};
use crate::experts::Candidate;
use crate::search::{Bottleneck, Transform, Tunable};
use optiml_runtime::{Arch, Launch, ProgramLaunch};
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
}

const THREADS: [u32; 5] = [64, 128, 256, 512, 1024];
const CHUNKS: [u32; 3] = [1, 2, 4];

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
        format!(
            "{} threads, {group}, {} chunks per thread",
            self.threads, self.chunks
        )
    }

    /// 64 to 1024 threads; a line per thread, warp or block; 1, 2 or 4 chunks per thread and step.
    fn is_valid(&self) -> bool {
        THREADS.contains(&self.threads)
            && (self.row_threads == 1 || self.row_threads == 32 || self.row_threads == self.threads)
            && CHUNKS.contains(&self.chunks)
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
        }
    }

    fn space() -> Vec<Self> {
        let mut out = Vec::new();
        for threads in THREADS {
            for row_threads in [1, 32, threads] {
                for chunks in CHUNKS {
                    let s = ScanSchedule {
                        threads,
                        row_threads,
                        chunks,
                    };
                    if s.is_valid() && !out.contains(&s) {
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
        let mut c = emit::prologue(p, "scan", &describe);
        c.line(format!("typedef {} OP;", emit::reduce_op(scan.op)));
        c.line("");
        emit::entry(&mut c, p, &self.threads.to_string());
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
        c.line(format!(
            "const long long line = (long long)blockIdx.x * {} + threadIdx.x / G;",
            self.lines_per_block()
        ));
        c.line("const int rank = (int)(threadIdx.x % G);");
        c.line(
            "// A thread's or a warp's line past the end returns whole; a block-wide line is never past the end.",
        );
        c.line("if (line >= lines) return;");
        c.line(format!("const long long n = n{d};"));
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
            let ty = match t.elem {
                Elem::Float => "T",
                Elem::Bool => "unsigned char",
                Elem::I64 => "long long",
                Elem::I32 => "int",
            };
            c.line(format!(
                "const {ty}* r{k} = in{k} + ({});",
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
        c.line("float carry = OP::id();");
        c.open("for (long long start = 0; start < n; start += (long long)G * V) {");
        c.line("// The scan-order position of this thread's first value.");
        c.line("const long long o = start + (long long)rank * V;");
        // Physical position of scan-order position `q`.
        let phys = |q: &str| {
            if scan.reverse {
                format!("(n - 1 - ({q}))")
            } else {
                format!("({q})")
            }
        };
        let along_reads: Vec<usize> = reads.iter().copied().filter(|&k| along[k]).collect();
        for &k in &along_reads {
            c.line(format!("float a{k}[V];"));
        }
        let scalar_loads = |c: &mut Code| {
            c.line("#pragma unroll");
            c.open("for (int e = 0; e < V; ++e) {");
            c.line("const long long q = o + e;");
            for &k in &along_reads {
                c.line(format!(
                    "a{k}[e] = q < n ? {} : 0.f;",
                    load(p, k, &format!("{} * st{k}", phys("q")))
                ));
            }
            c.close("}");
        };
        if contiguous {
            c.open("if (vec && o + V <= n) {");
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
            scalar_loads(&mut c);
            c.close("}");
        } else {
            scalar_loads(&mut c);
        }
        let env = Values {
            along: &along,
            fast: p.dtype != optiml_spec::DType::F32,
        };
        c.line("float t[V];");
        c.line("#pragma unroll");
        c.line(format!(
            "for (int e = 0; e < V; ++e) t[e] = o + e < n ? {} : OP::id();",
            emit::expr(body, &env)
        ));
        c.line("#pragma unroll");
        c.line("for (int e = 1; e < V; ++e) t[e] = OP::op(t[e - 1], t[e]);");
        c.line("float all;");
        c.line(format!(
            "const float pre = OP::op(carry, optiml_p::group_scan<OP, G, {}>(t[V - 1], all, warps));",
            self.threads
        ));
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
            c.line(format!("if (q < n) w[{} * sw] = IO::put(y[e]);", phys("q")));
            c.close("}");
        };
        if contiguous {
            c.open("if (vec && o + V <= n) {");
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
            scalar_stores(&mut c);
            c.close("}");
        } else {
            scalar_stores(&mut c);
        }
        c.line("carry = OP::op(carry, all);");
        c.close("}");
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
                tree: None,
            }),
            schedule: describe,
        }
    }
}
