//! The launcher of [`Launch::Attention`](crate::Launch::Attention): attention as three launches per round of batch
//! items through a workspace (scores, weights, values) on the 16-bit `wgmma` kernels (bf16, f16 storage) or the
//! TF32 ones (f32 storage), or the module's fused kernel for a call the stages cannot take.

use crate::kernel::Target;
use crate::launch::{
    ATTN_MAX_KEYS, ATTN_SCORES_SLOT, ATTN_SOFTMAX_SLOT, ATTN_SOFTMAX_THREADS, ATTN_VALUES_SLOT,
    Half, StagedAttention, Wgmma16,
};
use crate::matmul::{MAX_WORKSPACE_BYTES, encode_map_pitched, map16};
use crate::program::{In, Out, ProgramArgs};
use crate::workspace::Workspace;
use crate::{Args, Error};
use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut, LaunchConfig, SyncOnDrop};
use half::{bf16, f16};

/// The alignment of the weights in the workspace (TMA reads from 16-byte aligned addresses).
const ALIGN: usize = 256;

/// The sizes of one call, each at most `i32::MAX` (the kernels take them as `int`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Sizes {
    /// Batch items (the product of the batch dimensions).
    pub items: usize,
    /// Queries, keys, features, value features.
    pub lq: usize,
    pub lk: usize,
    pub d: usize,
    pub dv: usize,
    /// f32 storage (TF32 products): the weights are fp32 and overwrite the scores.
    pub tf32: bool,
}

impl Sizes {
    /// The sizes of a call at `extents`, or `None` where the stages cannot take it (more keys than the softmax
    /// holds, a size past `i32`).
    pub(crate) fn of(s: &StagedAttention, extents: &[usize], tf32: bool) -> Option<Sizes> {
        let at = |i: u32| extents.get(i as usize).copied();
        let [lq, lk, d, dv] = [
            at(s.dims[0])?,
            at(s.dims[1])?,
            at(s.dims[2])?,
            at(s.dims[3])?,
        ];
        let items = extents
            .iter()
            .enumerate()
            .filter(|(i, _)| !s.dims.contains(&(*i as u32)))
            .try_fold(1usize, |n, (_, &e)| n.checked_mul(e))?;
        let fits = |x: usize| i32::try_from(x).is_ok();
        (lk <= ATTN_MAX_KEYS && [items, lq, lk, d, dv].into_iter().all(fits)).then_some(Sizes {
            items,
            lq,
            lk,
            d,
            dv,
            tf32,
        })
    }

    /// Elements a weight row takes in the workspace: 16-bit weights pad the keys to 16 bytes (TMA reads rows of
    /// whole 16-byte units; the padding is never read, the map's extent is the keys); fp32 ones are the scores'
    /// rows.
    pub(crate) fn pitch(&self) -> usize {
        if self.tf32 {
            self.lk
        } else {
            self.lk.next_multiple_of(8)
        }
    }

    /// Workspace bytes per batch item: its fp32 scores, and 16-bit weights beside them.
    pub(crate) fn item_bytes(&self) -> Option<usize> {
        let scores = self.lq.checked_mul(self.lk)?.checked_mul(4)?;
        if self.tf32 {
            return Some(scores);
        }
        let weights = self.lq.checked_mul(self.pitch())?.checked_mul(2)?;
        scores.checked_add(weights)
    }

    /// Items per round: the variant's, fewer where the workspace would pass [`MAX_WORKSPACE_BYTES`]; `None`
    /// where one item alone would.
    pub(crate) fn round(&self, chunk: u32) -> Option<usize> {
        let per = self.item_bytes()?.checked_add(ALIGN)?;
        let most = MAX_WORKSPACE_BYTES / per;
        (most > 0).then(|| (chunk.max(1) as usize).min(most).min(self.items.max(1)))
    }

    /// Where a round of `round` items' weights start in the workspace, after their scores (aligned for TMA),
    /// and the workspace's size.
    pub(crate) fn layout(&self, round: usize) -> (usize, usize) {
        let scores = round * self.lq * self.lk * 4;
        if self.tf32 {
            return (0, scores);
        }
        let weights = scores.next_multiple_of(ALIGN);
        (weights, weights + round * self.lq * self.pitch() * 2)
    }
}

/// What q, k, v and y hold: 16-bit elements (the 16-bit kernels) or f32 (the TF32 ones).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Storage {
    Half(Half),
    F32,
}

/// An input's device pointer (with its stream synchronisation) and storage; `None` for other types.
fn input_ptr<'a>(
    b: &'a In<'_>,
    stream: &'a CudaStream,
) -> Option<((u64, SyncOnDrop<'a>), Storage)> {
    match b {
        In::Bf16(b) => Some((b.device_ptr(stream), Storage::Half(Half::Bf16))),
        In::F16(b) => Some((b.device_ptr(stream), Storage::Half(Half::F16))),
        In::F32(b) => Some((b.device_ptr(stream), Storage::F32)),
        _ => None,
    }
}

/// Launches the three stages for every batch item of the call, a round of items at a time; `Ok(false)` where
/// they cannot take it (the caller then launches the fused kernel), with nothing launched.
pub(crate) fn launch_staged(
    name: &'static str,
    stream: &CudaStream,
    target: &Target<'_>,
    s: &StagedAttention,
    extents: &[usize],
    args: &mut ProgramArgs<'_, '_>,
) -> Result<bool, Error> {
    let (inputs, params) = (args.inputs, args.params);
    let (Some(scores), Some(softmax), Some(values)) = (
        target.companions[ATTN_SCORES_SLOT],
        target.companions[ATTN_SOFTMAX_SLOT],
        target.companions[ATTN_VALUES_SLOT],
    ) else {
        return Ok(false);
    };
    let Some(scale) = s.scale_bits.map(f32::from_bits).or(params.first().copied()) else {
        return Ok(false);
    };
    let input = |i: u32| inputs.get(i as usize);
    let (Some(q), Some(k), Some(v), Some(y)) = (
        input(s.qkv[0]),
        input(s.qkv[1]),
        input(s.qkv[2]),
        args.outputs.first_mut(),
    ) else {
        return Ok(false);
    };
    // Every buffer's pointer, held (with its stream synchronisation) until the last launch is queued.
    let (Some(((q, _q), storage)), Some(((k, _k), _)), Some(((v, _v), _))) = (
        input_ptr(q, stream),
        input_ptr(k, stream),
        input_ptr(v, stream),
    ) else {
        return Ok(false);
    };
    let ((y, _y), out) = match y {
        Out::Bf16(b) => (b.device_ptr_mut(stream), Storage::Half(Half::Bf16)),
        Out::F16(b) => (b.device_ptr_mut(stream), Storage::Half(Half::F16)),
        Out::F32(b) => (b.device_ptr_mut(stream), Storage::F32),
        _ => return Ok(false),
    };
    if out != storage {
        return Ok(false);
    }
    let Some(z) = Sizes::of(s, extents, storage == Storage::F32) else {
        return Ok(false);
    };
    if z.items == 0 || z.lq == 0 || z.dv == 0 {
        return Ok(true);
    }
    let Some(round) = z.round(s.chunk) else {
        return Ok(false);
    };
    let (weights, bytes) = z.layout(round);
    let Ok(work) = Workspace::new(stream, bytes) else {
        return Ok(false);
    };
    let s_ptr = work.ptr;
    let p_ptr = work.ptr + weights as u64;
    let (lq, lk, d, dv, pitch) = (z.lq, z.lk, z.d, z.dv, z.pitch());
    let elem = if storage == Storage::F32 { 4 } else { 2 };
    let mut first = 0;
    while first < z.items {
        let n = round.min(z.items - first);
        let at = |base: u64, rows: usize, cols: usize| base + (first * rows * cols * elem) as u64;
        let (qc, kc, vc, yc) = (at(q, lq, d), at(k, lk, d), at(v, lk, dv), at(y, lq, dv));
        let (n32, lq32, lk32, d32, dv32) = (n as i32, lq as i32, lk as i32, d as i32, dv as i32);
        let (sq, sk, ss) = ((lq * d) as i64, (lk * d) as i64, (lq * lk) as i64);
        let (sp, sv, sy) = ((lq * pitch) as i64, (lk * dv) as i64, (lq * dv) as i64);
        // The 16-bit kernels read their operands through tensor maps, made first: a call whose operands they
        // cannot describe (even copied) launches nothing. The TF32 ones (their `cp.async` producer) read them in
        // place.
        let mut maps = None;
        if let Storage::Half(half) = storage {
            let map = |base, (cols, rows), stride, rows_box| match half {
                Half::Bf16 => map16::<bf16>(stream, base, (cols, rows, n), stride, rows_box),
                Half::F16 => map16::<f16>(stream, base, (cols, rows, n), stride, rows_box),
            };
            let pm = encode_map_pitched(
                p_ptr,
                (lk, pitch),
                lq,
                n,
                sp,
                [64, s.values.tile_m],
                Some(half),
            );
            let made = (
                map(qc, (d, lq), sq, s.scores.tile_m),
                map(kc, (d, lk), sk, s.scores.tile_n),
                pm,
                map(vc, (dv, lk), sv, 64),
            );
            match made {
                (Some(q), Some(k), Some(p), Some(v)) => maps = Some((q, k, p, v)),
                _ if first == 0 => return Ok(false),
                _ => {
                    return Err(Error::NoVariant {
                        kernel: name,
                        device: "this launcher".into(),
                        available: "tensor maps for some rounds of this call only".into(),
                    });
                }
            }
        }
        // S = scale · q kᵀ, fp32 [n][lq][lk].
        let mut b = Args::new(stream, scores, name);
        b.arg(&qc).arg(&kc).arg(&s_ptr).arg(&0u64);
        b.arg(&n32).arg(&lq32).arg(&lk32).arg(&d32);
        b.arg(&sq).arg(&sk).arg(&ss).arg(&scale).arg(&0f32);
        if let Some(((qm, _), (km, _), _, _)) = &maps {
            b.arg(qm).arg(km);
        }
        // SAFETY: the wgmma templates' `optiml_matmul` ABI (A, B, C, bias, batch, M, N, K, the three strides,
        // alpha, beta; the 16-bit one then the maps of A and B), compiled NT with an fp32 C. The 16-bit kernel
        // reads q and k only through the maps, which describe this round's `n` items of the checked buffers (or
        // their padded copies, alive until the round's launches are queued and freed in stream order); the TF32
        // one reads those items in place (any alignment). Both write `n · lq · lk` floats at the workspace's
        // start, which holds `round ≥ n` items' scores.
        unsafe { b.launch(persistent(s.scores, [lq, lk, n], target.sm_count), "launch") }?;
        // P = softmax(S), [n][lq][pitch]: 16-bit after the scores, or fp32 over them.
        let rows = (n * lq) as i64;
        let (keys, pitch32) = (lk32, pitch as i32);
        let mut b = Args::new(stream, softmax, name);
        b.arg(&s_ptr)
            .arg(&p_ptr)
            .arg(&rows)
            .arg(&keys)
            .arg(&pitch32);
        let warps = ATTN_SOFTMAX_THREADS as usize / 32;
        let cfg = LaunchConfig {
            grid_dim: ((n * lq).div_ceil(warps) as u32, 1, 1),
            block_dim: (ATTN_SOFTMAX_THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: the softmax entry's ABI; it reads `rows` rows of `keys` floats from the scores just written
        // and writes `keys` weights of each row `pitch` apart inside the workspace (after the scores, or over
        // them: each lane reads the elements it writes before writing them). The workspace bound keeps
        // `n · lq · lk · 4 ≤ 2³⁰`, so the grid is at most 2²⁵ blocks of 8 rows.
        unsafe { b.launch(cfg, "launch") }?;
        // y = P v, [n][lq][dv].
        let mut b = Args::new(stream, values, name);
        b.arg(&p_ptr).arg(&vc).arg(&yc).arg(&0u64);
        b.arg(&n32).arg(&lq32).arg(&dv32).arg(&lk32);
        b.arg(&sp).arg(&sv).arg(&sy).arg(&1f32).arg(&0f32);
        if let Some((_, _, pm, (vm, _))) = &maps {
            b.arg(pm).arg(vm);
        }
        // SAFETY: the template's ABI again, compiled NN with a C of the storage type: the weights and v of this
        // round's items (through the maps, or in place), and `n · lq · dv` elements of y from this round's first
        // item, inside the checked output.
        unsafe { b.launch(persistent(s.values, [lq, dv, n], target.sm_count), "launch") }?;
        first += n;
    }
    drop(work);
    Ok(true)
}

/// A persistent grid for a `wgmma` product of `[m, n, batch]`: a block per tile, at most one per multiprocessor.
fn persistent(g: Wgmma16, [m, n, batch]: [usize; 3], sm_count: u32) -> LaunchConfig {
    let tiles = (m.div_ceil(g.tile_m as usize) as u64)
        .saturating_mul(n.div_ceil(g.tile_n as usize) as u64)
        .saturating_mul(batch as u64);
    LaunchConfig {
        grid_dim: (tiles.clamp(1, u64::from(sm_count.max(1))) as u32, 1, 1),
        block_dim: (g.threads, 1, 1),
        shared_mem_bytes: g.smem_bytes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ProgramLaunch;

    fn staged(chunk: u32) -> StagedAttention {
        let g = Wgmma16 {
            tile_m: 128,
            tile_n: 256,
            threads: 384,
            smem_bytes: 197_632,
            trans_a: false,
            trans_b: true,
        };
        StagedAttention {
            fused: ProgramLaunch {
                threads: 256,
                smem_bytes: 0,
                items_mask: 0,
                items_per_block: 1,
                max_blocks_per_sm: 1,
                cluster: 1,
                nonempty_mask: 0,
                tree: None,
            },
            scores: g,
            values: Wgmma16 {
                trans_b: false,
                ..g
            },
            chunk,
            // [b, h, i, j, d, e]: queries 2, keys 3, features 4, value features 5.
            dims: [2, 3, 4, 5],
            qkv: [0, 1, 2],
            scale_bits: None,
        }
    }

    #[test]
    fn a_call_is_batch_items_of_queries_keys_and_features() {
        let s = staged(64);
        let z = Sizes::of(&s, &[32, 32, 512, 512, 1024, 1024], false).unwrap();
        assert_eq!(
            z,
            Sizes {
                items: 1024,
                lq: 512,
                lk: 512,
                d: 1024,
                dv: 1024,
                tf32: false,
            }
        );
        // A round's scores (fp32) and weights (16-bit) per item: 1 MiB + 0.5 MiB.
        assert_eq!(z.item_bytes(), Some(512 * 512 * 6));
        assert_eq!(z.round(64), Some(64));
        assert_eq!(z.layout(64), (64 << 20, 96 << 20));
        // Odd key counts pad the weights' rows to 16 bytes.
        let odd = Sizes::of(&s, &[1, 2, 40, 257, 1030, 1030], false).unwrap();
        assert_eq!((odd.items, odd.pitch()), (2, 264));
        assert_eq!(odd.round(64), Some(2));
        // fp32 weights overwrite the scores: no padding, no second part.
        let tf32 = Sizes::of(&s, &[32, 32, 512, 512, 1024, 1024], true).unwrap();
        assert_eq!(
            (tf32.pitch(), tf32.item_bytes()),
            (512, Some(512 * 512 * 4))
        );
        assert_eq!(tf32.layout(64), (0, 64 << 20));
    }

    #[test]
    fn the_loader_raises_the_products_shared_memory_limit() {
        let c = crate::Launch::Attention(staged(64)).companions();
        let smem = |slot| c.get(slot).map(|c| (c.entry, c.required, c.smem_bytes));
        assert_eq!(
            smem(ATTN_SCORES_SLOT),
            Some((crate::ATTN_SCORES_ENTRY, true, 197_632))
        );
        assert_eq!(
            smem(ATTN_VALUES_SLOT),
            Some((crate::ATTN_VALUES_ENTRY, true, 197_632))
        );
        assert_eq!(
            smem(ATTN_SOFTMAX_SLOT),
            Some((crate::ATTN_SOFTMAX_ENTRY, true, 0))
        );
    }

    #[test]
    fn the_fused_kernel_takes_what_the_stages_cannot() {
        let s = staged(64);
        // More keys than a warp holds.
        assert_eq!(
            Sizes::of(&s, &[1, 1, 8, ATTN_MAX_KEYS + 1, 64, 64], false),
            None
        );
        // A size past i32.
        assert_eq!(Sizes::of(&s, &[1, 1, 1 << 31, 8, 64, 64], false), None);
        // A round that would pass the workspace bound shrinks (3 MiB an item: 341 of them); one item past it
        // cannot run staged.
        let big = Sizes::of(&s, &[1, 1024, 512, 1024, 8, 8], false).unwrap();
        assert_eq!(big.round(512), Some(341));
        let (weights, bytes) = big.layout(341);
        assert!(
            weights % 256 == 0 && weights >= 341 * 512 * 1024 * 4 && bytes <= MAX_WORKSPACE_BYTES
        );
        let huge = Sizes::of(&s, &[1, 1, 1 << 20, 1024, 8, 8], false).unwrap();
        assert_eq!(huge.round(64), None);
    }
}
