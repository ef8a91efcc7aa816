//! The transpose family: tensor programs that swap the last two axes of one input and compute nothing else,
//! `y[c, r] = x[r, c]` or with leading batch axes kept in place, `y[b, c, r] = x[b, r, c]` ("transpose",
//! "batched transpose" in plain words). The tensor family would make it a map whose reads or writes stride by a
//! whole row; this family's kernel ([`TEMPLATE`]) moves a tile through shared memory so that both are rows of
//! 16-byte chunks.
//!
//! It is the smallest family and shows what one needs: this folder and one line in [`super::FAMILIES`]. Its
//! specs are tensor programs, so it takes the rest from the tensor family: the signature and the runtime's
//! program launcher (its kernel takes the program ABI), and the gate, which checks every candidate against the
//! float64 interpreter of the program.

use super::tensor::{self, Extents};
use super::{Catalog, Family, is_schedule_of, read_schedule};
use crate::config::{Dims, KernelSettings};
use crate::eval::{Evaluable, Problem};
use crate::experts::{Candidate, Def};
use crate::search::{Bottleneck, Transform, Tunable};
use crate::tune::{self, Bucket, Progress, Rate, Request, Target, TuneError};
use optiml_runtime::{Arch, Launch, ProgramLaunch};
use optiml_spec::program::{Elem, Expr, Program};
use optiml_spec::{Dim, Spec};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;

/// The family.
pub struct Transpose;

/// The family's name, in listings.
const FAMILY: &str = "transpose";

/// The kernel's template.
pub const TEMPLATE: &str = include_str!("transpose.cu");

/// What a candidate is made from: the template and the code that writes its header (this file), so that a change
/// to either retires the entries made from them (`prepare` carries over the tuned ones whose CUBIN did not change).
const SOURCES: [&str; 2] = [TEMPLATE, include_str!("mod.rs")];

/// Its entry point.
pub const ENTRY: &str = "optiml_transpose";

/// The elements a transpose is tuned at when its spec fixes no size: 2²⁶ (256 MiB of f32), far past L2.
const TUNED_ELEMENTS: usize = 1 << 26;

/// Where the axes of a transpose program are: the dimensions (indices into the program's) that are the batch,
/// the rows of `x` (the columns of `y`) and the columns of `x`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// The leading axes, in order (empty for a matrix).
    pub batch: Vec<usize>,
    /// `x`'s second-to-last axis.
    pub rows: usize,
    /// `x`'s last axis.
    pub cols: usize,
}

impl Layout {
    /// The layout of `p` when it is a transpose: one statement that writes its one float input with the last
    /// two axes swapped (`y[…, c, r] = x[…, r, c]`), no parameter, no other arithmetic.
    pub fn of(p: &Program) -> Option<Layout> {
        let ([stmt], [x]) = (&p.stmts[..], &p.inputs[..]) else {
            return None;
        };
        if !p.params.is_empty()
            || !stmt.output
            || stmt.elem != Elem::Float
            || x.elem != Elem::Float
            || stmt.expr != Expr::Input(0)
        {
            return None;
        }
        let n = x.axes.len();
        if n < 2 || stmt.axes.len() != n {
            return None;
        }
        let (rows, cols) = (x.axes[n - 2], x.axes[n - 1]);
        let swapped = stmt.axes[..n - 2] == x.axes[..n - 2]
            && stmt.axes[n - 2] == cols
            && stmt.axes[n - 1] == rows;
        (swapped && rows != cols).then(|| Layout {
            batch: x.axes[..n - 2].to_vec(),
            rows,
            cols,
        })
    }
}

/// A transpose program and its layout: what a candidate is made for.
#[derive(Clone, Debug)]
pub struct TransposeShape {
    /// The program (its dimensions and dtype).
    pub program: Program,
    /// Where its axes are.
    pub layout: Layout,
}

impl TransposeShape {
    /// `spec`'s program, when it is a transpose.
    pub fn of(spec: &Spec) -> Option<TransposeShape> {
        let optiml_spec::Family::Tensor(p) = &spec.family else {
            return None;
        };
        Layout::of(p).map(|layout| TransposeShape {
            program: p.clone(),
            layout,
        })
    }
}

/// How the kernel moves a tile.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Schedule {
    /// Rows of `x` per tile (32, 64 or 128).
    pub tile_rows: u32,
    /// Columns of `x` per tile (32, 64 or 128).
    pub tile_cols: u32,
    /// Bytes one thread loads or stores at once (4, 8 or 16).
    pub chunk_bytes: u32,
    /// Threads per block.
    pub threads: u32,
    /// The grid holds at most this many blocks per multiprocessor; each block loops over tiles.
    pub blocks_per_sm: u32,
    /// 4-byte words of padding at the end of each shared-memory row (0 or 1).
    pub pad: u32,
}

const TILES: [u32; 3] = [32, 64, 128];
/// The most elements a tile holds: 64 × 128 × 4 bytes plus padding stays under 48 KiB of static shared memory.
const MAX_TILE: u32 = 64 * 128;
const CHUNKS: [u32; 3] = [4, 8, 16];
const THREADS: [u32; 3] = [128, 256, 512];
const BLOCKS_PER_SM: [u32; 5] = [1, 2, 4, 8, 16];
const PADS: [u32; 2] = [0, 1];

impl Schedule {
    /// The candidate moving `shape`'s tensor with this schedule.
    pub fn candidate(&self, shape: &TransposeShape) -> Candidate {
        let p = &shape.program;
        let l = &shape.layout;
        let dim = |d: usize| format!("e{d}");
        let dims: Vec<String> = (0..p.dims.len())
            .map(|d| format!("long long {}", dim(d)))
            .collect();
        let batch = if l.batch.is_empty() {
            "1LL".to_string()
        } else {
            let parts: Vec<String> = l.batch.iter().map(|&d| dim(d)).collect();
            format!("({})", parts.join(" * "))
        };
        let elem_bytes: u32 = match p.dtype {
            optiml_spec::DType::F32 => 4,
            optiml_spec::DType::Bf16 | optiml_spec::DType::F16 => 2,
        };
        let mut source = format!(
            "// @generated by optiml-build {}: transpose {}, {}\n",
            env!("CARGO_PKG_VERSION"),
            p.canonical(),
            self.describe()
        );
        let defs: [(&str, Def); 6] = [
            ("OPTIML_ELEM_BYTES", elem_bytes.into()),
            ("OPTIML_CHUNK_BYTES", self.chunk_bytes.into()),
            ("OPTIML_TILE_ROWS", self.tile_rows.into()),
            ("OPTIML_TILE_COLS", self.tile_cols.into()),
            ("OPTIML_THREADS", self.threads.into()),
            ("OPTIML_PAD", self.pad.into()),
        ];
        for (name, value) in defs {
            source.push_str(&format!("#define {name} {value}\n"));
        }
        source.push_str(&format!("#define OPTIML_DIMS {}\n", dims.join(", ")));
        source.push_str(&format!("#define OPTIML_BATCH {batch}\n"));
        source.push_str(&format!("#define OPTIML_ROWS {}\n", dim(l.rows)));
        source.push_str(&format!("#define OPTIML_COLS {}\n", dim(l.cols)));
        source.push_str(TEMPLATE);
        Candidate {
            source,
            entry: ENTRY,
            launch: Launch::Program(self.launch(p)),
            schedule: self.describe(),
        }
    }

    /// The launch: a tile's elements per block over every element, capped at [`Schedule::blocks_per_sm`] per
    /// multiprocessor (the kernel loops over the tiles, so the grid may be smaller than their number).
    fn launch(&self, p: &Program) -> ProgramLaunch {
        ProgramLaunch {
            threads: self.threads,
            smem_bytes: 0,
            items_mask: (1u32 << p.dims.len()) - 1,
            items_per_block: self.tile_rows * self.tile_cols,
            max_blocks_per_sm: self.blocks_per_sm,
            cluster: 1,
            nonempty_mask: 0,
            tree: None,
        }
    }

    /// Chunks of one tile for the narrowest element (2 bytes): the most a block's threads can share. A wider
    /// element has twice as many, which the same threads divide too.
    fn chunks_per_tile(&self) -> u32 {
        self.tile_rows * self.tile_cols * 2 / self.chunk_bytes
    }
}

impl Tunable for Schedule {
    /// `64x64 tiles, 16-byte chunks, 128 threads, 16 blocks/SM, padded`.
    fn describe(&self) -> String {
        format!(
            "{}x{} tiles, {}-byte chunks, {} threads, {} blocks/SM, {}",
            self.tile_rows,
            self.tile_cols,
            self.chunk_bytes,
            self.threads,
            self.blocks_per_sm,
            if self.pad > 0 { "padded" } else { "unpadded" },
        )
    }

    /// The template's constraints: the threads divide a tile's chunks, each holds at most 8 of them for 4-byte
    /// elements (16 spilled in some tiles), and at most 2048 threads per SM.
    fn is_valid(&self) -> bool {
        TILES.contains(&self.tile_rows)
            && TILES.contains(&self.tile_cols)
            && self.tile_rows * self.tile_cols <= MAX_TILE
            && CHUNKS.contains(&self.chunk_bytes)
            && THREADS.contains(&self.threads)
            && BLOCKS_PER_SM.contains(&self.blocks_per_sm)
            && PADS.contains(&self.pad)
            && self.chunks_per_tile().is_multiple_of(self.threads)
            && self.chunks_per_tile() * 2 <= 8 * self.threads
            && self.threads * self.blocks_per_sm <= 2048
    }

    /// 64 × 64 tiles of 16-byte chunks, 128 threads, 16 blocks per SM, padded rows. Over the 336 schedules on the
    /// H200 (`transposes_across_their_schedule_space`, `bench/results/2026-12-04-h200-transpose/`), it is the one
    /// least behind the fastest on both 8192² f32 and bf16 (2.5% at worst: 3.70 against 3.76 TB/s, 3.08 against
    /// 3.15), and the fastest of a spread on a batch of 16 of 2048² f32 (3.77 TB/s).
    fn default_for(_arch: Arch) -> Self {
        Schedule {
            tile_rows: 64,
            tile_cols: 64,
            chunk_bytes: 16,
            threads: 128,
            blocks_per_sm: 16,
            pad: 1,
        }
    }

    fn space() -> Vec<Self> {
        let mut out = Vec::new();
        for tile_rows in TILES {
            for tile_cols in TILES {
                for chunk_bytes in CHUNKS {
                    for threads in THREADS {
                        for blocks_per_sm in BLOCKS_PER_SM {
                            for pad in PADS {
                                let s = Schedule {
                                    tile_rows,
                                    tile_cols,
                                    chunk_bytes,
                                    threads,
                                    blocks_per_sm,
                                    pad,
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
                name: "wider-chunks",
                rationale: "twice the bytes per load and store: fewer instructions and more bytes in flight per thread",
                addresses: Bottleneck::Memory,
                claimed_gain: 1.08,
                apply: |s| {
                    Some(Schedule {
                        chunk_bytes: s.chunk_bytes * 2,
                        ..*s
                    })
                },
            },
            Transform {
                name: "narrower-chunks",
                rationale: "half the bytes per access: a 16-bit column read from shared memory packs fewer \
                            elements per chunk, and more threads share a tile",
                addresses: Bottleneck::Compute,
                claimed_gain: 1.03,
                apply: |s| {
                    Some(Schedule {
                        chunk_bytes: s.chunk_bytes / 2,
                        ..*s
                    })
                },
            },
            Transform {
                name: "longer-tile-rows",
                rationale: "twice the columns of x per tile: each row of x is read in runs twice as long, fewer DRAM \
                            pages opened per byte read",
                addresses: Bottleneck::Memory,
                claimed_gain: 1.04,
                apply: |s| {
                    Some(Schedule {
                        tile_cols: s.tile_cols * 2,
                        ..*s
                    })
                },
            },
            Transform {
                name: "longer-tile-columns",
                rationale: "twice the rows of x per tile: each row of y is written in runs twice as long",
                addresses: Bottleneck::Memory,
                claimed_gain: 1.04,
                apply: |s| {
                    Some(Schedule {
                        tile_rows: s.tile_rows * 2,
                        ..*s
                    })
                },
            },
            Transform {
                name: "smaller-tile",
                rationale: "half the tile both ways: a quarter of the shared memory, more tiles for a small tensor",
                addresses: Bottleneck::Mixed,
                claimed_gain: 1.03,
                apply: |s| {
                    Some(Schedule {
                        tile_rows: s.tile_rows / 2,
                        tile_cols: s.tile_cols / 2,
                        ..*s
                    })
                },
            },
            Transform {
                name: "pad-shared-rows",
                rationale: "a word of padding per shared row puts a column's elements in distinct banks: the \
                            transposed reads stop conflicting",
                addresses: Bottleneck::Compute,
                claimed_gain: 1.15,
                apply: |s| (s.pad == 0).then_some(Schedule { pad: 1, ..*s }),
            },
            Transform {
                name: "unpad-shared-rows",
                rationale: "unpadded rows keep 16-byte alignment in shared memory",
                addresses: Bottleneck::Mixed,
                claimed_gain: 1.01,
                apply: |s| (s.pad == 1).then_some(Schedule { pad: 0, ..*s }),
            },
            Transform {
                name: "more-blocks-per-sm",
                rationale: "more resident blocks: while one waits at its barrier, others have loads in flight",
                addresses: Bottleneck::Memory,
                claimed_gain: 1.05,
                apply: |s| {
                    Some(Schedule {
                        blocks_per_sm: s.blocks_per_sm * 2,
                        ..*s
                    })
                },
            },
            Transform {
                name: "fewer-blocks-per-sm",
                rationale: "fewer resident blocks, each looping over more tiles: less contention for L2 and DRAM \
                            pages",
                addresses: Bottleneck::Mixed,
                claimed_gain: 1.02,
                apply: |s| {
                    Some(Schedule {
                        blocks_per_sm: s.blocks_per_sm / 2,
                        ..*s
                    })
                },
            },
            Transform {
                name: "wider-blocks",
                rationale: "twice the threads per block, half the blocks per SM: each thread holds half the chunks, \
                            so fewer registers per thread",
                addresses: Bottleneck::Mixed,
                claimed_gain: 1.02,
                apply: |s| {
                    Some(Schedule {
                        threads: s.threads * 2,
                        blocks_per_sm: (s.blocks_per_sm / 2).max(1),
                        ..*s
                    })
                },
            },
            Transform {
                name: "narrower-blocks",
                rationale: "half the threads per block, each with twice the chunks in flight before its barrier",
                addresses: Bottleneck::Memory,
                claimed_gain: 1.03,
                apply: |s| {
                    Some(Schedule {
                        threads: s.threads / 2,
                        blocks_per_sm: s.blocks_per_sm * 2,
                        ..*s
                    })
                },
            },
        ]
    }
}

impl Evaluable for Schedule {
    type Spec = TransposeShape;
    type Shape = Extents;

    fn candidate(&self, spec: &TransposeShape) -> Candidate {
        Schedule::candidate(self, spec)
    }

    fn problem(spec: &TransposeShape, shape: Extents) -> Problem {
        tensor::problem(&spec.program, &shape.get())
    }

    fn work(spec: &TransposeShape, shape: Extents) -> (f64, f64) {
        let extents = shape.get();
        (
            tensor::largest(&spec.program, &extents) as f64,
            tensor::min_bytes(&spec.program, &extents),
        )
    }
}

/// Every dimension's extent when the user gives no shape: square matrices of 2²⁶ elements in all (8192 × 8192,
/// or a batch of 16 of 2048 × 2048); fixed dimensions keep their value.
pub fn default_extents(shape: &TransposeShape) -> Vec<usize> {
    let p = &shape.program;
    let l = &shape.layout;
    let mut extents: Vec<usize> = p
        .dims
        .iter()
        .map(|d| match d.size {
            Dim::Fixed(v) => v as usize,
            Dim::Runtime => 1,
        })
        .collect();
    let runtime = |d: usize| p.dims[d].size == Dim::Runtime;
    let side = if l.batch.iter().any(|&d| runtime(d)) {
        for &d in l.batch.iter().filter(|&&d| runtime(d)) {
            extents[d] = 16;
        }
        2048
    } else {
        8192
    };
    for d in [l.rows, l.cols] {
        if runtime(d) {
            extents[d] = side;
        }
    }
    let total: usize = extents.iter().product();
    if let Some(&first) = l.batch.iter().find(|&&d| runtime(d))
        && total > TUNED_ELEMENTS
    {
        extents[first] = (extents[first] * TUNED_ELEMENTS / total).max(1);
    }
    extents
}

/// The gate's extra shapes besides the tensor family's plan: several tiles both ways with ragged edges, and rows
/// of one element.
fn edge_shapes(shape: &TransposeShape) -> Vec<Dims> {
    let p = &shape.program;
    let l = &shape.layout;
    let at = |rows: usize, cols: usize, batch: usize| -> Option<Dims> {
        let extents: Vec<usize> = (0..p.dims.len())
            .map(|d| {
                if d == l.rows {
                    rows
                } else if d == l.cols {
                    cols
                } else {
                    batch
                }
            })
            .collect();
        let fits = p
            .dims
            .iter()
            .zip(&extents)
            .all(|(d, &e)| d.size.fixed().is_none_or(|v| v as usize == e));
        fits.then(|| {
            Dims(
                p.dims
                    .iter()
                    .zip(&extents)
                    .filter(|(d, _)| d.size == Dim::Runtime)
                    .map(|(_, &e)| e)
                    .collect(),
            )
        })
    };
    [at(67, 130, 3), at(1, 4097, 2), at(129, 1, 1)]
        .into_iter()
        .flatten()
        .collect()
}

impl Family for Transpose {
    fn name(&self) -> &'static str {
        FAMILY
    }

    fn claims(&self, spec: &Spec) -> bool {
        TransposeShape::of(spec).is_some()
    }

    fn sources(&self, _spec: &Spec) -> Vec<Cow<'static, str>> {
        SOURCES.iter().map(|s| Cow::Borrowed(*s)).collect()
    }

    fn default_candidate(&self, spec: &Spec, arch: Arch) -> Candidate {
        match TransposeShape::of(spec) {
            Some(shape) => Schedule::default_for(arch).candidate(&shape),
            None => super::of(spec).default_candidate(spec, arch),
        }
    }

    fn scheduled_candidate(
        &self,
        spec: &Spec,
        schedule: &serde_json::Value,
    ) -> Result<Candidate, serde_json::Error> {
        match TransposeShape::of(spec) {
            Some(shape) => Ok(read_schedule::<Schedule>(schedule)?.candidate(&shape)),
            None => super::of(spec).scheduled_candidate(spec, schedule),
        }
    }

    fn gate(&self) -> &'static dyn crate::eval::Gate {
        &tensor::gate::ProgramGate
    }

    fn catalogs(&self) -> Vec<Catalog> {
        vec![Catalog::of::<Schedule>(FAMILY, "tiled transpose")]
    }

    fn searched_catalog(&self, _spec: &Spec) -> Catalog {
        Catalog::of::<Schedule>(FAMILY, "tiled transpose")
    }

    fn catalog_of(&self, schedule: &serde_json::Value) -> Option<Catalog> {
        is_schedule_of::<Schedule>(schedule).then(|| self.catalogs().remove(0))
    }

    /// A shape is the run-time dimensions' extents in program order (`8192x8192` for `y[c, r] = x[r, c]`); the
    /// default is [`default_extents`].
    fn targets(
        &self,
        spec: &Spec,
        settings: &KernelSettings,
        shapes: Option<&[Dims]>,
    ) -> Result<Vec<Target>, String> {
        let Some(shape) = TransposeShape::of(spec) else {
            return super::of(spec).targets(spec, settings, shapes);
        };
        let p = &shape.program;
        let given = shapes.unwrap_or(&settings.shapes);
        let all: Vec<Vec<usize>> = if given.is_empty() {
            vec![default_extents(&shape)]
        } else {
            given
                .iter()
                .map(|d| p.extents(&d.0))
                .collect::<Result<_, _>>()?
        };
        let launch = Schedule::default_for(Arch::new(9, 0)).launch(p);
        all.into_iter()
            .map(|extents| {
                let e = Extents::new(&extents).map_err(|e| e.to_string())?;
                Ok(Target {
                    bucket: Some(optiml_runtime::program::shape_key(&launch, &extents)),
                    dims: extents,
                    label: e.labelled(p),
                    rate: Rate::Bytes,
                })
            })
            .collect()
    }

    /// `c=8192, r=8192`: the program's dimensions at the size the search ran at.
    fn tuned_for(&self, bucket: Option<[u64; 4]>, searched_at: Option<&str>) -> String {
        tensor::Tensor.tuned_for(bucket, searched_at)
    }

    fn tune(
        &self,
        request: &Request<'_>,
        report: &mut dyn FnMut(Progress),
    ) -> Result<Bucket, TuneError> {
        let kernel = request.kernel;
        let unsupported = || TuneError::Unsupported {
            kernel: kernel.name.clone(),
            family: FAMILY,
        };
        let shape = TransposeShape::of(&kernel.spec).ok_or_else(unsupported)?;
        let extents = Extents::new(&request.target.dims).map_err(|_| unsupported())?;
        let mut extra = edge_shapes(&shape);
        extra.extend(request.settings.test_shapes.iter().cloned());
        let plan = tensor::gate::test_plan(&shape.program, &extra);
        tune::search::<Schedule>(request, shape, extents, plan, report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(text: &str) -> Spec {
        optiml_spec::parse(text).unwrap()
    }

    #[test]
    fn transposes_are_claimed_and_nothing_else() {
        for text in [
            "transpose",
            "batched transpose, bf16",
            "transpose of a 4-D tensor, f16",
            "y[j, i] = x[i, j]",
            "out[n, w, h] = img[n, h, w]",
        ] {
            assert!(Transpose.claims(&spec(text)), "{text}");
            assert_eq!(super::super::of(&spec(text)).name(), FAMILY, "{text}");
        }
        for text in [
            // A map, a scaled transpose, a permutation of the leading axes, a copy, a matmul.
            "relu",
            "y[c, r] = 2 * x[r, c]",
            "y[c, b, r] = x[b, c, r]",
            "y[r, c] = x[r, c]",
            "y[c, r] = x[r, c] + z[c, r]",
            "matmul, f32",
        ] {
            assert!(!Transpose.claims(&spec(text)), "{text}");
        }
    }

    #[test]
    fn the_layout_names_the_batch_rows_and_columns() {
        let s = TransposeShape::of(&spec("batched transpose")).unwrap();
        // `y[b, c, r] = x[b, r, c]`: dimensions b, c, r in order of appearance.
        assert_eq!(
            s.layout,
            Layout {
                batch: vec![0],
                rows: 2,
                cols: 1
            }
        );
        let c = Schedule::default_for(Arch::new(9, 0)).candidate(&s);
        for line in [
            "#define OPTIML_DIMS long long e0, long long e1, long long e2",
            "#define OPTIML_BATCH (e0)",
            "#define OPTIML_ROWS e2",
            "#define OPTIML_COLS e1",
            "#define OPTIML_ELEM_BYTES 4",
        ] {
            assert!(c.source.contains(line), "{line}\n{}", c.source);
        }
        let m = TransposeShape::of(&spec("transpose, bf16")).unwrap();
        let c = Schedule::default_for(Arch::new(9, 0)).candidate(&m);
        assert!(c.source.contains("#define OPTIML_BATCH 1LL"));
        assert!(c.source.contains("#define OPTIML_ELEM_BYTES 2"));
    }

    #[test]
    fn the_space_holds_the_default_and_every_transformation_stays_in_it() {
        let space = Schedule::space();
        let default = Schedule::default_for(Arch::new(9, 0));
        assert!(space.contains(&default));
        assert!(space.len() > 50, "{}", space.len());
        for s in &space {
            // The template's own check: the threads divide a tile's chunks for both element sizes.
            for elem in [2, 4] {
                let chunks = s.tile_rows * s.tile_cols * elem / s.chunk_bytes;
                assert_eq!(chunks % s.threads, 0, "{s:?}");
            }
            for t in Schedule::catalog() {
                if let Some(n) = t.apply_to(s) {
                    assert!(space.contains(&n), "{} from {s:?}", t.name);
                }
            }
        }
        // Every transformation applies somewhere.
        for t in Schedule::catalog() {
            assert!(
                space.iter().any(|s| t.apply_to(s).is_some()),
                "{} never applies",
                t.name
            );
        }
    }

    #[test]
    fn a_recorded_schedule_is_read_back_and_no_other_kernels_is_taken_for_it() {
        let s = spec("transpose");
        let default = Schedule::default_for(Arch::new(9, 0));
        let json = serde_json::to_value(default).unwrap();
        let c = Transpose.scheduled_candidate(&s, &json).unwrap();
        assert_eq!(c.schedule, default.describe());
        assert!(Transpose.catalog_of(&json).is_some());
        let pointwise = serde_json::json!({"threads": 128, "blocks_per_sm": 0, "unroll": 1});
        assert!(Transpose.catalog_of(&pointwise).is_none());
        let outside = serde_json::json!({"tile_rows": 48, "tile_cols": 64, "chunk_bytes": 16, "threads": 256, "blocks_per_sm": 8, "pad": 1});
        assert!(Transpose.scheduled_candidate(&s, &outside).is_err());
    }

    #[test]
    fn targets_default_to_square_matrices_and_read_the_run_time_dimensions() {
        let none = KernelSettings::default();
        let t = Transpose.targets(&spec("transpose"), &none, None).unwrap();
        assert_eq!(t[0].dims, vec![8192, 8192]);
        assert_eq!(t[0].bucket, Some([1 << 26, 1, 1, 1]));
        assert_eq!(t[0].rate, Rate::Bytes);
        let t = Transpose
            .targets(&spec("batched transpose"), &none, None)
            .unwrap();
        assert_eq!(t[0].dims, vec![16, 2048, 2048]);
        let shapes = [Dims(vec![4, 100, 300])];
        let t = Transpose
            .targets(&spec("batched transpose"), &none, Some(&shapes))
            .unwrap();
        assert_eq!(t[0].label, "b=4 c=100 r=300");
        assert!(
            Transpose
                .targets(&spec("transpose"), &none, Some(&[Dims(vec![3])]))
                .is_err()
        );
    }

    #[test]
    fn the_gate_checks_ragged_tiles_beside_the_tensor_plan() {
        let s = TransposeShape::of(&spec("batched transpose")).unwrap();
        // Dimensions b, c, r: three items of 67 rows by 130 columns, a single row, a single column.
        assert_eq!(
            edge_shapes(&s),
            vec![
                Dims(vec![3, 130, 67]),
                Dims(vec![2, 4097, 1]),
                Dims(vec![1, 1, 129])
            ]
        );
    }

    /// Every schedule, for both element sizes and with a batch, compiles for sm_90 without spills.
    #[test]
    fn every_schedule_compiles_without_spills() {
        let mut jobs = Vec::new();
        for text in ["transpose", "batched transpose, bf16"] {
            let shape = TransposeShape::of(&spec(text)).unwrap();
            for s in Schedule::space() {
                let c = s.candidate(&shape);
                jobs.push((format!("{text}: {}", c.schedule), c.source));
            }
        }
        crate::nvrtc::testing::assert_compiles(jobs);
    }

    #[test]
    fn the_version_hashes_the_template_every_candidate_holds_and_the_code_writing_its_header() {
        let s = spec("transpose, f16");
        let sources = Transpose.sources(&s);
        assert!(sources[1].contains("fn candidate(&self, shape: &TransposeShape)"));
        for sched in Schedule::space() {
            let c = sched.candidate(&TransposeShape::of(&s).unwrap());
            let rest = c.source.replace(sources[0].as_ref(), "");
            assert!(
                rest.lines()
                    .all(|l| l.is_empty() || l.starts_with("//") || l.starts_with("#define")),
                "{rest}"
            );
        }
    }
}
