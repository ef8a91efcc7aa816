//! The launcher of [`Launch::Attention`](crate::Launch::Attention): 16-bit attention as three launches per round
//! of batch items through a workspace (scores, weights, values), or the module's fused kernel for a call the
//! stages cannot take.

use crate::kernel::Target;
use crate::launch::{
    ATTN_MAX_KEYS, ATTN_SCORES_SLOT, ATTN_SOFTMAX_SLOT, ATTN_SOFTMAX_THREADS, ATTN_VALUES_SLOT,
    Half, StagedAttention, Wgmma16,
};
use crate::matmul::{MAX_WORKSPACE_BYTES, TmaMap, encode_map_pitched, map16};
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
}

impl Sizes {
    /// The sizes of a call at `extents`, or `None` where the stages cannot take it (more keys than the softmax
    /// holds, a size past `i32`).
    pub(crate) fn of(s: &StagedAttention, extents: &[usize]) -> Option<Sizes> {
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
        })
    }

    /// Elements a weight row takes in the workspace: the keys, padded to 16 bytes (TMA reads rows of whole
    /// 16-byte units; the padding is never read, the map's extent is the keys).
    pub(crate) fn pitch(&self) -> usize {
        self.lk.next_multiple_of(8)
    }

    /// Workspace bytes per batch item: its fp32 scores and 16-bit weights.
    pub(crate) fn item_bytes(&self) -> Option<usize> {
        let scores = self.lq.checked_mul(self.lk)?.checked_mul(4)?;
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
        let weights = (round * self.lq * self.lk * 4).next_multiple_of(ALIGN);
        (weights, weights + round * self.lq * self.pitch() * 2)
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
    let Some(z) = Sizes::of(s, extents) else {
        return Ok(false);
    };
    if z.items == 0 || z.lq == 0 || z.dv == 0 {
        return Ok(true);
    }
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
    let (Some(((q, _q), half)), Some(((k, _k), _)), Some(((v, _v), _))) =
        (ptr16(q, stream), ptr16(k, stream), ptr16(v, stream))
    else {
        return Ok(false);
    };
    let ((y, _y), out_half) = match y {
        Out::Bf16(b) => (b.device_ptr_mut(stream), Half::Bf16),
        Out::F16(b) => (b.device_ptr_mut(stream), Half::F16),
        _ => return Ok(false),
    };
    if out_half != half {
        return Ok(false);
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
    let mut first = 0;
    while first < z.items {
        let n = round.min(z.items - first);
        let at = |base: u64, rows: usize, cols: usize| base + (first * rows * cols * 2) as u64;
        let (qc, kc, vc, yc) = (at(q, lq, d), at(k, lk, d), at(v, lk, dv), at(y, lq, dv));
        // The maps first: a call whose operands they cannot describe (even copied) launches nothing here.
        let maps = |half: Half| -> Option<[(TmaMap, Option<Workspace<'_>>); 4]> {
            let map = |base, (cols, rows), stride, rows_box| match half {
                Half::Bf16 => map16::<bf16>(stream, base, (cols, rows, n), stride, rows_box),
                Half::F16 => map16::<f16>(stream, base, (cols, rows, n), stride, rows_box),
            };
            let qm = map(qc, (d, lq), (lq * d) as i64, s.scores.tile_m)?;
            let km = map(kc, (d, lk), (lk * d) as i64, s.scores.tile_n)?;
            let pm = encode_map_pitched(
                p_ptr,
                (lk, pitch),
                lq,
                n,
                (lq * pitch) as i64,
                [64, s.values.tile_m],
                Some(half),
            )?;
            let vm = map(vc, (dv, lk), (lk * dv) as i64, 64)?;
            Some([qm, km, (pm, None), vm])
        };
        let Some([(qm, _qcopy), (km, _kcopy), (pm, _), (vm, _vcopy)]) = maps(half) else {
            if first == 0 {
                return Ok(false);
            }
            return Err(Error::NoVariant {
                kernel: name,
                device: "this launcher".into(),
                available: "tensor maps for some rounds of this call only".into(),
            });
        };
        let (n32, lq32, lk32, d32, dv32) = (n as i32, lq as i32, lk as i32, d as i32, dv as i32);
        // S = scale · q kᵀ, fp32 [n][lq][lk].
        let mut b = Args::new(stream, scores, name);
        b.arg(&qc).arg(&kc).arg(&s_ptr).arg(&0u64);
        b.arg(&n32).arg(&lq32).arg(&lk32).arg(&d32);
        let (sq, sk, ss) = ((lq * d) as i64, (lk * d) as i64, (lq * lk) as i64);
        b.arg(&sq).arg(&sk).arg(&ss).arg(&scale).arg(&0f32);
        b.arg(&qm).arg(&km);
        // SAFETY: the 16-bit wgmma template's `optiml_matmul` ABI (A, B, C, bias, batch, M, N, K, the three
        // strides, alpha, beta, the maps of A and B), compiled NT with an fp32 C: it reads q and k only through
        // the maps, which describe this round's `n` items of the checked buffers (or their padded copies,
        // alive until the round's launches are queued and freed in stream order), and writes `n · lq · lk`
        // floats at the workspace's start, which holds `round ≥ n` items' scores.
        unsafe { b.launch(persistent(s.scores, [lq, lk, n], target.sm_count), "launch") }?;
        // P = softmax(S), 16-bit [n][lq][pitch].
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
        // and writes `keys` weights of each row `pitch` apart, inside the workspace's weights part
        // (`round · lq · pitch` elements). The workspace bound keeps `n · lq · lk · 4 ≤ 2³⁰`, so the grid is at
        // most 2²⁵ blocks of 8 rows.
        unsafe { b.launch(cfg, "launch") }?;
        // y = P v, 16-bit [n][lq][dv].
        let mut b = Args::new(stream, values, name);
        b.arg(&p_ptr).arg(&vc).arg(&yc).arg(&0u64);
        b.arg(&n32).arg(&lq32).arg(&dv32).arg(&lk32);
        let (sp, sv, sy) = ((lq * pitch) as i64, (lk * dv) as i64, (lq * dv) as i64);
        b.arg(&sp).arg(&sv).arg(&sy).arg(&1f32).arg(&0f32);
        b.arg(&pm).arg(&vm);
        // SAFETY: the template's ABI again, compiled NN with a 16-bit C: it reads the weights and v only
        // through the maps (this round's items), and writes `n · lq · dv` elements of y from this round's first
        // item, inside the checked output.
        unsafe { b.launch(persistent(s.values, [lq, dv, n], target.sm_count), "launch") }?;
        first += n;
    }
    drop(work);
    Ok(true)
}

/// A 16-bit input's device pointer (with its stream synchronisation) and type; `None` for other types.
fn ptr16<'a>(b: &'a In<'_>, stream: &'a CudaStream) -> Option<((u64, SyncOnDrop<'a>), Half)> {
    match b {
        In::Bf16(b) => Some((b.device_ptr(stream), Half::Bf16)),
        In::F16(b) => Some((b.device_ptr(stream), Half::F16)),
        _ => None,
    }
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
        let z = Sizes::of(&s, &[32, 32, 512, 512, 1024, 1024]).unwrap();
        assert_eq!(
            z,
            Sizes {
                items: 1024,
                lq: 512,
                lk: 512,
                d: 1024,
                dv: 1024
            }
        );
        // A round's scores (fp32) and weights (16-bit) per item: 1 MiB + 0.5 MiB.
        assert_eq!(z.item_bytes(), Some(512 * 512 * 6));
        assert_eq!(z.round(64), Some(64));
        assert_eq!(z.layout(64), (64 << 20, 96 << 20));
        // Odd key counts pad the weights' rows to 16 bytes.
        let odd = Sizes::of(&s, &[1, 2, 40, 257, 1030, 1030]).unwrap();
        assert_eq!((odd.items, odd.pitch()), (2, 264));
        assert_eq!(odd.round(64), Some(2));
    }

    #[test]
    fn the_fused_kernel_takes_what_the_stages_cannot() {
        let s = staged(64);
        // More keys than a warp holds.
        assert_eq!(Sizes::of(&s, &[1, 1, 8, ATTN_MAX_KEYS + 1, 64, 64]), None);
        // A size past i32.
        assert_eq!(Sizes::of(&s, &[1, 1, 1 << 31, 8, 64, 64]), None);
        // A round that would pass the workspace bound shrinks (3 MiB an item: 341 of them); one item past it
        // cannot run staged.
        let big = Sizes::of(&s, &[1, 1024, 512, 1024, 8, 8]).unwrap();
        assert_eq!(big.round(512), Some(341));
        let (weights, bytes) = big.layout(341);
        assert!(
            weights % 256 == 0 && weights >= 341 * 512 * 1024 * 4 && bytes <= MAX_WORKSPACE_BYTES
        );
        let huge = Sizes::of(&s, &[1, 1, 1 << 20, 1024, 8, 8]).unwrap();
        assert_eq!(huge.round(64), None);
    }
}
