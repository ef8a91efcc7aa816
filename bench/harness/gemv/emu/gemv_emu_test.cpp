// Runs the real gemv_f32.cu kernel source on the CPU (cuda_emu.h) for small
// cases of every kind the GPU harness covers, under ASan + UBSan:
//  * result vs fp64 reference (same tolerance rules as gemv_harness.cu)
//  * no write outside the outputs (guarded C allocation), no read outside
//    A / B / bias (ASan: every buffer is allocated with its exact size),
//    no misaligned float4 access (UBSan alignment; float4 is alignas(16))
//  * determinism: the outputs are bit-identical for grid.x = full / 1 / 2 / 3
//    and grid.z = min(batch, 65535) / 1 / 3
//  * the early exit for non-GEMV shapes writes nothing
// Build: see run_emu.sh (one binary per config of ../gemv_configs.txt).
#include "cuda_emu.h"
#include "../../../../optiml-build/src/families/matmul/cuda/gemv_f32.cu"  // the product template
#include "../gemv_launch.h"

#include <cstdint>
#include <cstring>
#include <new>
#include <string>

static uint64_t g_rng = 42;
static float urand() {
    uint64_t z = (g_rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (float)(z >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

// exact-size, 16-byte-aligned buffer (ASan catches any access past either end)
struct Buf {
    float* p;
    size_t n;
    explicit Buf(size_t n_) : n(n_) { p = static_cast<float*>(::operator new(n * 4 + (n == 0), std::align_val_t(16))); }
    ~Buf() { ::operator delete(p, std::align_val_t(16)); }
    Buf(const Buf&) = delete;
};

static const float kAlpha = 0.75f, kBeta = 0.5f;

struct Case {
    const char* name;
    int batch, M, N, K;
    int offA, offB, offC;
    long long padA, padB, padC;
    bool bcastA, bcastB;
};

static void launch(dim3 g, const float* A, const float* B, float* C, const float* bias, const Case& c, long long sA,
                   long long sB, long long sC) {
    emu_launch(g, dim3(OPTIML_GEMV_THREADS), [&]() {
        optiml_gemv(A, B, C, bias, c.batch, c.M, c.N, c.K, sA, sB, sC, kAlpha, kBeta);
    });
}

static bool run_case(const Case& c) {
    const long long MK = (long long)c.M * c.K, KN = (long long)c.K * c.N, MN = (long long)c.M * c.N;
    const long long sA = c.bcastA ? 0 : MK + c.padA;
    const long long sB = c.bcastB ? 0 : KN + c.padB;
    const long long sC = MN + c.padC;
    const size_t nA = (size_t)(c.offA + (c.bcastA ? MK : (c.batch - 1) * sA + MK));
    const size_t nB = (size_t)(c.offB + (c.bcastB ? KN : (c.batch - 1) * sB + KN));
    const long long head = 8;
    const size_t nC = (size_t)(head + c.offC + (c.batch - 1) * sC + MN + 9);
    Buf A(nA), B(nB), bias((size_t)c.N), C0(nC), C(nC), Cfirst(nC);
    for (size_t i = 0; i < nA; ++i) A.p[i] = urand();
    for (size_t i = 0; i < nB; ++i) B.p[i] = urand();
    for (size_t i = 0; i < (size_t)c.N; ++i) bias.p[i] = urand();
    for (size_t i = 0; i < nC; ++i) {
        if (OPTIML_HAS_BETA) C0.p[i] = urand();
        else { uint32_t u = 0xFFFFFFFFu; memcpy(&C0.p[i], &u, 4); }
    }
    const long long c0 = head + c.offC;
    const dim3 full = gemv_grid(c.batch, c.M, c.N);
    std::vector<dim3> grids = {full, dim3(1, 1, full.z), dim3(2, 1, 1), dim3(3, 1, 3 < full.z ? 3 : full.z)};
    bool ok = true;
    double worst_rel = 0, worst_ratio = 0;
    for (size_t gi = 0; gi < grids.size(); ++gi) {
        memcpy(C.p, C0.p, nC * 4);
        launch(grids[gi], A.p + c.offA, B.p + c.offB, C.p + c0, bias.p, c, sA, sB, sC);
        if (gi == 0) {
            memcpy(Cfirst.p, C.p, nC * 4);
            std::vector<char> is_out(nC, 0);
            double e2 = 0, r2 = 0, s2 = 0;
            for (int z = 0; z < c.batch; ++z) {
                const float* Az = A.p + c.offA + (long long)z * sA;
                const float* Bz = B.p + c.offB + (long long)z * sB;
                for (int m = 0; m < c.M; ++m)
                    for (int n = 0; n < c.N; ++n) {
                        double acc = 0, absacc = 0;
                        for (int k = 0; k < c.K; ++k) {
                            const double a = OPTIML_TRANS_A ? Az[(long long)k * c.M + m] : Az[(long long)m * c.K + k];
                            const double b = OPTIML_TRANS_B ? Bz[(long long)n * c.K + k] : Bz[(long long)k * c.N + n];
                            acc += a * b;
                            absacc += fabs(a * b);
                        }
                        const long long ci = c0 + (long long)z * sC + (long long)m * c.N + n;
                        double v = acc, scale = absacc;
                        if (OPTIML_HAS_ALPHA) { v *= kAlpha; scale *= kAlpha; }
                        if (OPTIML_HAS_BETA) { v += (double)kBeta * C0.p[ci]; scale += fabs((double)kBeta * C0.p[ci]); }
                        if (OPTIML_HAS_BIAS) { v += bias.p[n]; scale += fabs((double)bias.p[n]); }
                        if (OPTIML_ACT == 1) v = v > 0 ? v : 0;
                        if (OPTIML_ACT == 2) { v = 0.5 * v * (1.0 + erf(v * 0.70710678118654752440)); scale *= 1.2; }
                        is_out[ci] = 1;
                        const float o = C.p[ci];
                        if (!std::isfinite(o)) { printf("    nonfinite at z=%d m=%d n=%d\n", z, m, n); ok = false; continue; }
                        const double d = fabs(o - v), bound = 1e-5 * scale + 1e-6 * fabs(v);
                        if (d > bound) {
                            if (ok) printf("    over bound at z=%d m=%d n=%d: %g vs %g\n", z, m, n, o, v);
                            ok = false;
                        }
                        if (bound > 0) worst_ratio = std::max(worst_ratio, d / bound);
                        e2 += d * d;
                        r2 += v * v;
                        s2 += scale * scale;
                    }
            }
            // same rule as gemv_harness.cu: reference norm floored at 1e-3 x magnitude norm
            const double den = std::max(sqrt(r2), 1e-3 * sqrt(s2));
            worst_rel = den > 0 ? sqrt(e2) / den : sqrt(e2);
            if (worst_rel > 1e-5) ok = false;
            size_t guard = 0;
            for (size_t i = 0; i < nC; ++i)
                if (!is_out[i] && memcmp(&C.p[i], &C0.p[i], 4)) ++guard;
            if (guard) { printf("    %zu guard elements written\n", guard); ok = false; }
        } else if (memcmp(C.p, Cfirst.p, nC * 4)) {
            printf("    grid (%u,%u,%u) gives different bits than the full grid\n", grids[gi].x, grids[gi].y, grids[gi].z);
            ok = false;
        }
    }
    printf("  %-4s %-30s %s batch=%-3d M=%-4d N=%-4d K=%-5d rel=%.2e worst/bound=%.3f\n", ok ? "ok" : "FAIL", c.name,
           gemv_is_dot(c.M, c.N) ? "dot" : "col", c.batch, c.M, c.N, c.K, worst_rel, worst_ratio);
    return ok;
}

int main() {
    printf("== emu config %s: THREADS=%d UNROLL=%d RPW=%d KSPLIT=%d COL_TX=%d LOAD=%d tA=%d tB=%d a=%d b=%d bias=%d act=%d\n",
           EMU_NAME, OPTIML_GEMV_THREADS, OPTIML_GEMV_UNROLL, OPTIML_GEMV_RPW, OPTIML_GEMV_KSPLIT, OPTIML_GEMV_COL_TX,
           OPTIML_GEMV_LOAD, OPTIML_TRANS_A, OPTIML_TRANS_B, OPTIML_HAS_ALPHA, OPTIML_HAS_BETA, OPTIML_HAS_BIAS, OPTIML_ACT);
    const Case cases[] = {
        {"mv odd small", 3, 77, 1, 33, 0, 0, 0, 0, 0, 0, false, false},
        {"mv 1x1x1", 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, false, false},
        {"mv M=1 N=1 K=1000", 2, 1, 1, 1000, 0, 0, 0, 0, 0, 0, false, false},
        {"mv K=0", 2, 5, 1, 0, 0, 0, 0, 0, 0, 0, false, false},
        {"mv K=1", 2, 70, 1, 1, 0, 0, 0, 0, 0, 0, false, false},
        {"mv K=2", 1, 70, 1, 2, 0, 0, 0, 0, 0, 0, false, false},
        {"mv K=3", 1, 70, 1, 3, 0, 0, 0, 0, 0, 0, false, false},
        {"mv K=5", 1, 70, 1, 5, 0, 0, 0, 0, 0, 0, false, false},
        {"mv K=7 A+1", 1, 70, 1, 7, 1, 0, 0, 0, 0, 0, false, false},
        {"mv aligned 64x1024", 2, 64, 1, 1024, 0, 0, 0, 0, 0, 0, false, false},
        {"mv M=37 K=4100", 1, 37, 1, 4100, 0, 0, 0, 0, 0, 0, false, false},
        {"mv A+1", 2, 40, 1, 1024, 1, 0, 0, 0, 0, 0, false, false},
        {"mv B+1", 2, 40, 1, 1024, 0, 1, 0, 0, 0, 0, false, false},
        {"mv C+1", 2, 40, 1, 1024, 0, 0, 1, 0, 0, 0, false, false},
        {"mv all +1 K=1027", 2, 45, 1, 1027, 1, 1, 1, 0, 0, 0, false, false},
        {"mv A+2 B+3 K=1030", 2, 33, 1, 1030, 2, 3, 0, 0, 0, 0, false, false},
        {"mv padded strides", 3, 50, 1, 100, 0, 0, 0, 3, 5, 7, false, false},
        {"mv padded strides %4", 3, 64, 1, 256, 4, 8, 4, 4, 8, 12, false, false},
        {"mv broadcast B", 4, 50, 1, 300, 0, 0, 0, 0, 0, 0, false, true},
        {"mv broadcast A", 3, 50, 1, 300, 0, 0, 0, 0, 0, 0, true, false},
        {"mv batch 70", 70, 3, 1, 5, 0, 0, 0, 0, 0, 0, false, false},
        {"mv 300x129", 1, 300, 1, 129, 0, 0, 0, 0, 0, 0, false, false},
        {"vm odd small", 3, 1, 77, 33, 0, 0, 0, 0, 0, 0, false, false},
        {"vm K=0", 2, 1, 5, 0, 0, 0, 0, 0, 0, 0, false, false},
        {"vm K=1", 2, 1, 70, 1, 0, 0, 0, 0, 0, 0, false, false},
        {"vm K=3", 1, 1, 70, 3, 0, 0, 0, 0, 0, 0, false, false},
        {"vm N=300 K=129", 1, 1, 300, 129, 0, 0, 0, 0, 0, 0, false, false},
        {"vm aligned 256x1024", 2, 1, 256, 1024, 0, 0, 0, 0, 0, 0, false, false},
        {"vm N=64 K=4100", 1, 1, 64, 4100, 0, 0, 0, 0, 0, 0, false, false},
        {"vm all +1 K=1027", 2, 1, 129, 1027, 1, 1, 1, 0, 0, 0, false, false},
        {"vm B+1 N%4=0", 2, 1, 256, 300, 0, 1, 0, 0, 0, 0, false, false},
        {"vm padded strides", 3, 1, 100, 100, 0, 0, 0, 3, 5, 7, false, false},
        {"vm broadcast B", 4, 1, 100, 300, 0, 0, 0, 0, 0, 0, false, true},
        {"vm batch 70", 70, 1, 3, 5, 0, 0, 0, 0, 0, 0, false, false},
    };
    bool all = true;
    for (const Case& c : cases) all = run_case(c) && all;
    // not a GEMV (M, N > 1): nothing may be written
    {
        Buf A(12), B(12), C(9);
        for (int i = 0; i < 12; ++i) A.p[i] = B.p[i] = 1.f;
        for (int i = 0; i < 9; ++i) C.p[i] = -7.f;
        Case c{"non-gemv", 1, 3, 3, 4, 0, 0, 0, 0, 0, 0, false, false};
        launch(dim3(2, 1, 1), A.p, B.p, C.p, B.p, c, 12, 12, 9);
        bool untouched = true;
        for (int i = 0; i < 9; ++i) untouched = untouched && C.p[i] == -7.f;
        printf("  %-4s %-30s\n", untouched ? "ok" : "FAIL", "M=N=3: early exit, no writes");
        all = all && untouched;
    }
    printf("-- emu %s %s\n", EMU_NAME, all ? "PASSED" : "FAILED");
    return all ? 0 : 1;
}
