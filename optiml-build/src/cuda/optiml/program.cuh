// optiml/program.cuh: what every kernel generated from a tensor program (optiml-build's families/tensor/gen)
// shares: storage types and their conversions, 16-byte chunk loads and stores, the scalar functions whose
// semantics the IR fixes, and deterministic warp reductions. Handed to NVRTC in memory by optiml-build; nvcc
// harnesses add -I optiml-build/src/cuda. Hashed into the generator version of the family that includes it.
//
// Storage: dtype 0 = f32, 1 = bf16, 2 = f16 (16-bit tensors are raw bit patterns, unsigned short). Arithmetic is
// f32; 16-bit values widen exactly and round to nearest even once, on store (NaN stays NaN, overflow gives inf).
//
// Chunks: a 16-byte unit of storage (4 f32 or 8 16-bit elements) held as a uint4, so a register or shared-memory
// copy of a row costs the same bytes as the row whatever its dtype. A chunk is loaded with one 16-byte access when
// the caller has proven its address aligned and the chunk whole, else element by element (the elements past the
// end read as zero and are never touched in memory).
//
// Determinism: every reduction here combines in an order fixed by the lane layout (xor butterfly), and each
// combine is symmetric, so every lane ends with the same bits and a run repeats bit for bit.
#ifndef OPTIML_PROGRAM_CUH
#define OPTIML_PROGRAM_CUH

namespace optiml_p {

// ---------------------------------------------------------------- 16-bit <-> f32
__device__ __forceinline__ float bf16_to_f32(unsigned short u) {
    return __uint_as_float((unsigned)u << 16);  // exact: the bits move to the upper half
}
__device__ __forceinline__ unsigned short f32_to_bf16(float x) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    unsigned short r;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(x));
    return r;
#else
    // Round to nearest even on the bits; a NaN keeps its sign and becomes quiet.
    const unsigned u = __float_as_uint(x);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (unsigned short)((u >> 16) | 0x0040u);
    return (unsigned short)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
#endif
}
__device__ __forceinline__ float f16_to_f32(unsigned short u) {
    float r;
    asm("{\n\t.reg .b16 h;\n\tmov.b16 h, %1;\n\tcvt.f32.f16 %0, h;\n\t}" : "=f"(r) : "h"(u));
    return r;
}
__device__ __forceinline__ unsigned short f32_to_f16(float x) {
    unsigned short r;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r) : "f"(x));
    return r;
}

// ---------------------------------------------------------------- storage types
// io<DT>: T (the element type in memory), V (elements per 16-byte chunk), get/put (one element), unpack/pack
// (a chunk), gather/scatter (the first `count` elements of a chunk, one by one).
template <int DT> struct io;

template <> struct io<0> {
    typedef float T;
    enum { V = 4 };
    static __device__ __forceinline__ float get(T v) { return v; }
    static __device__ __forceinline__ T put(float v) { return v; }
    static __device__ __forceinline__ void unpack(uint4 c, float (&f)[4]) {
        f[0] = __uint_as_float(c.x);
        f[1] = __uint_as_float(c.y);
        f[2] = __uint_as_float(c.z);
        f[3] = __uint_as_float(c.w);
    }
    static __device__ __forceinline__ uint4 pack(const float (&f)[4]) {
        return make_uint4(__float_as_uint(f[0]), __float_as_uint(f[1]), __float_as_uint(f[2]),
                          __float_as_uint(f[3]));
    }
    static __device__ __forceinline__ uint4 gather(const T* p, long long count) {
        unsigned w[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) w[e] = e < count ? __float_as_uint(p[e]) : 0u;
        return make_uint4(w[0], w[1], w[2], w[3]);
    }
    static __device__ __forceinline__ void scatter(T* p, long long count, uint4 c) {
        const unsigned w[4] = {c.x, c.y, c.z, c.w};
#pragma unroll
        for (int e = 0; e < 4; ++e)
            if (e < count) p[e] = __uint_as_float(w[e]);
    }
};

// The two 16-bit types differ only in the conversion; elements pair up in 32-bit words, lower address low.
template <int DT> struct io16 {
    typedef unsigned short T;
    enum { V = 8 };
    static __device__ __forceinline__ float get(T v) { return DT == 1 ? bf16_to_f32(v) : f16_to_f32(v); }
    static __device__ __forceinline__ T put(float v) { return DT == 1 ? f32_to_bf16(v) : f32_to_f16(v); }
    static __device__ __forceinline__ void unpack(uint4 c, float (&f)[8]) {
        const unsigned w[4] = {c.x, c.y, c.z, c.w};
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            f[2 * e] = get((T)(w[e] & 0xFFFFu));
            f[2 * e + 1] = get((T)(w[e] >> 16));
        }
    }
    // Two elements per conversion where the target has it (sm_80+: cvt.rn.{bf16,f16}x2.f32, the same rounding).
    static __device__ __forceinline__ unsigned put2(float lo, float hi) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
        unsigned r;
        if (DT == 1)
            asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
        else
            asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
        return r;
#else
        return (unsigned)put(lo) | ((unsigned)put(hi) << 16);
#endif
    }
    static __device__ __forceinline__ uint4 pack(const float (&f)[8]) {
        unsigned w[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) w[e] = put2(f[2 * e], f[2 * e + 1]);
        return make_uint4(w[0], w[1], w[2], w[3]);
    }
    static __device__ __forceinline__ uint4 gather(const T* p, long long count) {
        unsigned w[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const unsigned lo = 2 * e < count ? (unsigned)p[2 * e] : 0u;
            const unsigned hi = 2 * e + 1 < count ? (unsigned)p[2 * e + 1] : 0u;
            w[e] = lo | (hi << 16);
        }
        return make_uint4(w[0], w[1], w[2], w[3]);
    }
    static __device__ __forceinline__ void scatter(T* p, long long count, uint4 c) {
        const unsigned w[4] = {c.x, c.y, c.z, c.w};
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            if (2 * e < count) p[2 * e] = (T)(w[e] & 0xFFFFu);
            if (2 * e + 1 < count) p[2 * e + 1] = (T)(w[e] >> 16);
        }
    }
};
template <> struct io<1> : io16<1> {};
template <> struct io<2> : io16<2> {};

// L2 eviction classes of a 16-byte access (sm_80+; plain accesses before): HINT_KEEP marks a line to stay
// (a row read again by a later pass), HINT_LAST to leave first (a row's last read, an output nobody reads
// back here). They keep the rows in flight in L2 between passes while the outputs and last reads stream past.
enum { HINT_NONE = 0, HINT_KEEP = 1, HINT_LAST = 2 };
template <int H>
__device__ __forceinline__ unsigned long long l2_policy() {
    unsigned long long pol = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    if (H == HINT_KEEP)
        asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(pol));
    else
        asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
#endif
    return pol;
}
template <int H>
__device__ __forceinline__ uint4 ld16(const void* p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    if (H != HINT_NONE) {
        uint4 v;
        asm("ld.global.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
            : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
            : "l"(p), "l"(l2_policy<H>()));
        return v;
    }
#endif
    return *reinterpret_cast<const uint4*>(p);
}
template <int H>
__device__ __forceinline__ void st16(void* p, uint4 c) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    if (H != HINT_NONE) {
        asm volatile("st.global.L2::cache_hint.v4.u32 [%0], {%1, %2, %3, %4}, %5;" ::"l"(p), "r"(c.x), "r"(c.y),
                     "r"(c.z), "r"(c.w), "l"(l2_policy<H>())
                     : "memory");
        return;
    }
#endif
    *reinterpret_cast<uint4*>(p) = c;
}

// The chunk at element offset o of a run that has rem elements from p on (rem may be below o, or negative: the
// chunk is then partly or wholly past the end). ALIGNED: the caller proved p + o 16-byte aligned, so a whole
// chunk is one 16-byte load (with L2 hint H). Elements past the end read as zero and touch no memory. I is int
// where the caller knows the offsets fit (compile-time offsets then fold into the comparisons), else long long.
template <class IO, bool ALIGNED, int H = HINT_NONE, typename I>
__device__ __forceinline__ uint4 ld_rel(const typename IO::T* p, I o, I rem) {
    if (ALIGNED && o + (I)IO::V <= rem) return ld16<H>(p + o);
    return IO::gather(p + o, (long long)rem - (long long)o);
}
template <class IO, bool ALIGNED, int H = HINT_NONE, typename I>
__device__ __forceinline__ void st_rel(typename IO::T* p, I o, I rem, uint4 c) {
    if (ALIGNED && o + (I)IO::V <= rem) {
        st16<H>(p + o, c);
        return;
    }
    IO::scatter(p + o, (long long)rem - (long long)o, c);
}

// Starts loading the chunk ld_rel<IO, true> would read at o into the shared-memory slot dst: a whole chunk (p + o
// 16-byte aligned, as the caller proved) asynchronously with cp.async (sm_80+), which cp_async_wait_all then
// waits for; a chunk partly or wholly past the end, or any chunk before sm_80, as ld_rel reads it.
template <class IO, typename I>
__device__ __forceinline__ void ld_async_rel(uint4* dst, const typename IO::T* p, I o, I rem) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    if (o + (I)IO::V <= rem) {
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n"
                     :: "r"((unsigned)__cvta_generic_to_shared(dst)), "l"(p + o)
                     : "memory");
        return;
    }
#endif
    *dst = ld_rel<IO, true>(p, o, rem);
}

// Waits for every cp.async this thread started (commits them first).
__device__ __forceinline__ void cp_async_wait_all() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_all;\n" ::: "memory");
#endif
}

// Hides a register-cached chunk's value from the optimiser, so values computed from it in one pass (unpacked
// 16-bit elements, exponentials) are recomputed in the next instead of kept alive across the reduction between
// them: the chunk is 4 registers, its 8 unpacked elements 8.
__device__ __forceinline__ void opaque(uint4& c) {
    asm volatile("" : "+r"(c.x), "+r"(c.y), "+r"(c.z), "+r"(c.w));
}

__device__ __forceinline__ bool aligned16(const void* p) {
    return (reinterpret_cast<unsigned long long>(p) & 15ull) == 0ull;
}

// ---------------------------------------------------------------- scalar functions
__device__ __forceinline__ float nan_f() { return __uint_as_float(0x7FFFFFFFu); }
__device__ __forceinline__ float inf_f() { return __uint_as_float(0x7F800000u); }

// The larger / smaller, NaN if either is NaN (the IR's max and min). Symmetric to the bit, so that lanes that
// combine the same two values in either order agree: equal values (+0 and -0) give +0 for max, -0 for min.
// sm_80+ has both in one instruction (max.NaN / min.NaN order -0 below +0).
__device__ __forceinline__ float maxf(float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    float r;
    asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
#else
    if (a != a || b != b) return nan_f();
    if (a == b) return __uint_as_float(__float_as_uint(a) & __float_as_uint(b));
    return a > b ? a : b;
#endif
}
__device__ __forceinline__ float minf(float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    float r;
    asm("min.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
#else
    if (a != a || b != b) return nan_f();
    if (a == b) return __uint_as_float(__float_as_uint(a) | __float_as_uint(b));
    return a < b ? a : b;
#endif
}

// Logistic without overflow: never evaluates exp of a positive argument.
__device__ __forceinline__ float sigmoid(float v) {
    const float e = expf(-fabsf(v));  // in (0, 1]
    const float r = 1.f / (1.f + e);  // sigmoid(|v|)
    return v >= 0.f ? r : e * r;      // NaN propagates through e
}

// The same through the hardware exponential (16-bit outputs).
__device__ __forceinline__ float sigmoid_fast(float v) {
    const float e = __expf(-fabsf(v));
    const float r = __fdividef(1.f, 1.f + e);  // 1 + e is in [1, 2]: the fast division is exact to 2 ulp
    return v >= 0.f ? r : e * r;
}

__device__ __forceinline__ float truth(bool b) { return b ? 1.f : 0.f; }

// ---------------------------------------------------------------- reductions
struct Sum {
    static __device__ __forceinline__ float id() { return 0.f; }
    static __device__ __forceinline__ float op(float a, float b) { return a + b; }
};
struct Prod {
    static __device__ __forceinline__ float id() { return 1.f; }
    static __device__ __forceinline__ float op(float a, float b) { return a * b; }
};
struct Max {
    static __device__ __forceinline__ float id() { return -inf_f(); }
    static __device__ __forceinline__ float op(float a, float b) { return maxf(a, b); }
};
struct Min {
    static __device__ __forceinline__ float id() { return inf_f(); }
    static __device__ __forceinline__ float op(float a, float b) { return minf(a, b); }
};

// Every lane of the warp ends with the combination of all 32 lanes' values (xor butterfly: the same tree on
// every lane, and + * max min are commutative to the bit).
template <class OP> __device__ __forceinline__ float warp_all(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = OP::op(v, __shfl_xor_sync(0xFFFFFFFFu, v, o));
    return v;
}

// ---------------------------------------------------------------- scans
// Lane l ends with the combination of lanes 0..l (Hillis-Steele over shfl_up: a tree fixed by the lane, so a run
// repeats bit for bit).
template <class OP> __device__ __forceinline__ float warp_scan(float v) {
    const int lane = (int)(threadIdx.x & 31u);
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const float u = __shfl_up_sync(0xFFFFFFFFu, v, o);
        if (lane >= o) v = OP::op(u, v);
    }
    return v;
}

// The combination of the totals of the threads before this one in its group of G consecutive threads (G = 1,
// 32, or the whole block of B threads), and in `all` the group's: what a scan step adds to each thread's own
// running values. A block-wide group uses `warps` (B / 32 floats of shared memory) and two barriers; every thread
// of the block must call it.
template <class OP, int G, int B>
__device__ __forceinline__ float group_scan(float total, float& all, float* warps) {
    if (G == 1) {
        all = total;
        return OP::id();
    }
    const int lane = (int)(threadIdx.x & 31u);
    const float inc = warp_scan<OP>(total);
    float before = __shfl_up_sync(0xFFFFFFFFu, inc, 1);
    before = lane == 0 ? OP::id() : before;
    if (G == 32) {
        all = __shfl_sync(0xFFFFFFFFu, inc, 31);
        return before;
    }
    const int warp = (int)(threadIdx.x >> 5);
    __syncthreads();  // the previous step's readers of `warps` are done
    if (lane == 31) warps[warp] = inc;
    __syncthreads();
    // Every warp scans the warp totals itself: no third barrier.
    const float w = warp_scan<OP>(lane < B / 32 ? warps[lane] : OP::id());
    all = __shfl_sync(0xFFFFFFFFu, w, B / 32 - 1);
    const float earlier = __shfl_sync(0xFFFFFFFFu, w, (warp + 31) & 31);
    return warp == 0 ? before : OP::op(earlier, before);
}

// Arg reductions: whether (v, i) beats (bv, bi). NaN counts as the extreme (as PyTorch's argmax / argmin); among
// equals (and among NaNs) the lower index wins, so the result is the first extreme whatever the combine order.
template <bool MAX>
__device__ __forceinline__ bool arg_better(float v, long long i, float bv, long long bi) {
    const bool vn = v != v, bn = bv != bv;
    if (vn || bn) return vn && (!bn || i < bi);
    if (MAX ? v > bv : v < bv) return true;
    return v == bv && i < bi;
}
// One step of a thread's own scan, elements in increasing index order: a later element replaces the best only
// when strictly better (a first NaN replaces any number), so the first extreme stays. Cheaper than arg_better.
// The identity of an arg reduction: loses to every element.
__device__ __forceinline__ long long arg_none() { return 0x7FFFFFFFFFFFFFFFll; }
template <bool MAX>
__device__ __forceinline__ bool arg_step(float v, float bv, long long bi) {
    return (MAX ? v > bv : v < bv) || (v != v && bv == bv) || bi == arg_none();
}

template <bool MAX> __device__ __forceinline__ void warp_arg(float& v, long long& i) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float ov = __shfl_xor_sync(0xFFFFFFFFu, v, o);
        const long long oi = __shfl_xor_sync(0xFFFFFFFFu, i, o);
        if (arg_better<MAX>(ov, oi, v, i)) {
            v = ov;
            i = oi;
        }
    }
}

// Online softmax statistics (Milakov and Gimelshein): `(m, s)` with `m` the largest of a set of values and `s`
// the sum of e^(v - m) over it; the empty set is (-inf, 0). A merge rescales the smaller max's sum and adds it to
// the other's in one fma, so it is symmetric bit for bit: a warp's xor butterfly leaves every lane the same
// pair, and a fold in a fixed order repeats. Equal maxima (the infinities included) add the sums unscaled.
__device__ __forceinline__ void online_merge(float& m, float& s, float mb, float sb) {
    if (mb == m) {
        s = s + sb;
        return;
    }
    const bool b = mb > m;
    const float hi = b ? mb : m, lo = b ? m : mb, shi = b ? sb : s, slo = b ? s : sb;
    s = __fmaf_rn(slo, expf(lo - hi), shi);
    m = hi;
}
// One chunk of values into a thread's pair: its max first, then the sum rescaled once if the max grew, then the
// chunk's exponentials, which are independent of each other (a value at a time would chain every exponential
// behind the previous comparison). Slots past the row's end hold -inf and add 0. FAST for 16-bit programs,
// whose other exponentials are __expf too.
template <bool FAST, int V> __device__ __forceinline__ void online_chunk(float& m, float& s, const float (&v)[V]) {
    float cm = v[0];
#pragma unroll
    for (int l = 1; l < V; ++l) cm = fmaxf(cm, v[l]);
    if (cm > m) {
        s = s * (FAST ? __expf(m - cm) : expf(m - cm));
        m = cm;
    }
    // A pair still at -inf (every value so far -inf) has nothing to add: -inf - -inf would make it NaN.
    if (m == -inf_f()) return;
    float e[V];
#pragma unroll
    for (int l = 0; l < V; ++l) e[l] = FAST ? __expf(v[l] - m) : expf(v[l] - m);
#pragma unroll
    for (int l = 0; l < V; ++l) s = s + e[l];
}
__device__ __forceinline__ void warp_online(float& m, float& s) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float om = __shfl_xor_sync(0xFFFFFFFFu, m, o);
        const float os = __shfl_xor_sync(0xFFFFFFFFu, s, o);
        online_merge(m, s, om, os);
    }
}

// Moments: (count, mean, summed squared distance to the mean) of a set of values, merged pairwise (Chan, Golub
// and LeVeque): as stable as two passes over the data, in one. The first operand's set comes first; a merge
// with an empty set changes nothing.
__device__ __forceinline__ void moments_merge(float& n, float& m, float& q, float nb, float mb, float qb) {
    if (nb == 0.f) return;
    if (n == 0.f) {
        n = nb;
        m = mb;
        q = qb;
        return;
    }
    const float nn = n + nb;
    const float d = mb - m;
    const float w = nb / nn;
    m = m + d * w;
    q = q + qb + d * d * n * w;
    n = nn;
}
// Every lane of the warp ends with the moments of all 32 lanes' sets, the same bits on every lane: at each xor
// step both partners merge the lower lane's set first.
__device__ __forceinline__ void warp_moments(float& n, float& m, float& q) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float on = __shfl_xor_sync(0xFFFFFFFFu, n, o);
        const float om = __shfl_xor_sync(0xFFFFFFFFu, m, o);
        const float oq = __shfl_xor_sync(0xFFFFFFFFu, q, o);
        if (threadIdx.x & o) {
            float ln = on, lm = om, lq = oq;
            moments_merge(ln, lm, lq, n, m, q);
            n = ln;
            m = lm;
            q = lq;
        } else {
            moments_merge(n, m, q, on, om, oq);
        }
    }
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
// Thread-block clusters (a row spread over several blocks): the block's rank in its cluster, the cluster's index
// in the grid and the number of clusters, along x (clusters are 1-D here).
__device__ __forceinline__ unsigned cluster_rank() {
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}
__device__ __forceinline__ unsigned cluster_id() {
    unsigned r;
    asm volatile("mov.u32 %0, %%clusterid.x;" : "=r"(r));
    return r;
}
__device__ __forceinline__ unsigned cluster_count() {
    unsigned r;
    asm volatile("mov.u32 %0, %%nclusterid.x;" : "=r"(r));
    return r;
}
// Every thread of every block of the cluster arrives; shared-memory writes before it are visible to the
// cluster's reads after it.
__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
// The value at `p` (this block's shared memory) in the shared memory of the cluster's block `rank`.
__device__ __forceinline__ unsigned cluster_addr(const void* p, unsigned rank) {
    unsigned r;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;"
                 : "=r"(r)
                 : "r"((unsigned)__cvta_generic_to_shared(p)), "r"(rank));
    return r;
}
__device__ __forceinline__ float cluster_ld(const float* p, unsigned rank) {
    float v;
    asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(cluster_addr(p, rank)) : "memory");
    return v;
}
__device__ __forceinline__ long long cluster_ld(const long long* p, unsigned rank) {
    long long v;
    asm volatile("ld.shared::cluster.s64 %0, [%1];" : "=l"(v) : "r"(cluster_addr(p, rank)) : "memory");
    return v;
}
#endif

}  // namespace optiml_p

#endif  // OPTIML_PROGRAM_CUH
