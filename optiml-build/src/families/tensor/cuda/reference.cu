// The float64 interpreter's arithmetic on the GPU: the prelude of the reference module generated for a tensor
// program (`families/tensor/reference.rs` appends one kernel per statement). Every function here transliterates
// its counterpart in `optiml_spec::program::interp` (values and error scales alike), so that the dispatch size
// is checked on every element by the same rules the host applies to the plan's sizes.
// The generated kernels compute a scale for every value, and some go unread (a condition's, a gather index's):
// NVRTC's note of a variable set and never used is expected there.
#pragma nv_diag_suppress 550
#include "optiml/compare.cuh"
typedef long long i64;
typedef unsigned long long u64;

#define OPTIML_NEAR_TIE (1.0 / 64.0)
#define OPTIML_POW_INT_MAX 64.0
#define OPT_INF __longlong_as_double(0x7ff0000000000000LL)
#define OPT_NAN __longlong_as_double(0x7ff8000000000000LL)

// interp::rounding: the magnitude f32 storage of v rounds away.
__device__ __forceinline__ double opt_rounding(double v) {
    return ((double)(float)v == v) ? 0.0 : fabs(v);
}

// interp::amp: d·e where a zero factor wins over an infinite one.
__device__ __forceinline__ double opt_amp(double d, double e) {
    return (d == 0.0 || e == 0.0) ? 0.0 : d * e;
}

// Unary ops, numbered as `reference.rs` emits them: 0 neg, 1 exp, 2 log, 3 log1p, 4 expm1, 5 tanh, 6 erf,
// 7 sqrt, 8 rsqrt, 9 abs, 10 sigmoid.
__device__ void opt_unary(int op, double a, double ea, double* rv, double* rs) {
    double r, slope;
    switch (op) {
        case 0: *rv = -a; *rs = ea; return;
        case 9: *rv = fabs(a); *rs = ea; return;
        case 1: r = exp(a); slope = r; break;
        case 2: r = log(a); slope = 1.0 / a; break;
        case 3: r = log1p(a); slope = 1.0 / (1.0 + a); break;
        case 4: r = expm1(a); slope = exp(a); break;
        case 5: r = tanh(a); slope = 1.0 - r * r; break;
        case 6: r = erf(a); slope = 1.1283791670955126 * exp(-a * a); break;
        case 7: r = sqrt(a); slope = 0.5 / r; break;
        case 8: r = 1.0 / sqrt(a); slope = 0.5 * r / a; break;
        default: r = 1.0 / (1.0 + exp(-a)); slope = r * (1.0 - r); break;
    }
    *rv = r;
    *rs = opt_amp(fabs(slope), ea + fabs(a)) + fabs(r);
}

// interp::powi: a^n by squaring.
__device__ double opt_powi(double a, int n) {
    double base = a, r = 1.0;
    unsigned k = n < 0 ? (unsigned)(-(long long)n) : (unsigned)n;
    while (k > 0) {
        if (k & 1u) r *= base;
        base *= base;
        k >>= 1;
    }
    return n < 0 ? 1.0 / r : r;
}

__device__ void opt_pow(double a, double ea, double b, double eb, double* rv, double* rs) {
    const bool integral = (b - trunc(b)) == 0.0 && fabs(b) <= OPTIML_POW_INT_MAX;
    const double r = integral ? opt_powi(a, (int)b) : pow(a, b);
    double da = 0.0;
    if (b != 0.0) da = fabs(b * (integral ? opt_powi(a, (int)(b - 1.0)) : pow(a, b - 1.0)));
    const double ln = fabs(log(fabs(a)));
    double e = opt_amp(da, ea) + opt_amp(opt_amp(fabs(r), ln), eb) + fabs(r);
    if (!integral) e += opt_amp(fabs(r), opt_amp(fabs(b), ln));
    *rv = r;
    *rs = e;
}

// Binary ops: 0 add, 1 sub, 2 mul, 3 div, 4 pow, 5 max, 6 min, 7 lt, 8 le, 9 gt, 10 ge, 11 eq, 12 ne.
__device__ void opt_binary(int op, double a, double ea, double b, double eb, double* rv, double* rs) {
    double r;
    switch (op) {
        case 0: r = a + b; *rv = r; *rs = ea + eb + fabs(r); return;
        case 1: r = a - b; *rv = r; *rs = ea + eb + fabs(r); return;
        case 2: r = a * b; *rv = r; *rs = opt_amp(ea, fabs(b)) + opt_amp(fabs(a), eb) + fabs(r); return;
        case 3:
            r = a / b;
            *rv = r;
            *rs = opt_amp(1.0 / fabs(b), ea + opt_amp(fabs(r), eb)) + fabs(r);
            return;
        case 4: opt_pow(a, ea, b, eb, rv, rs); return;
        case 5:
        case 6: {
            if (isnan(a) || isnan(b)) {
                *rv = OPT_NAN;
                *rs = fmax(ea, eb);
                return;
            }
            const bool first = op == 5 ? a >= b : a <= b;
            *rv = first ? a : b;
            const double er = first ? ea : eb;
            *rs = fabs(a - b) <= OPTIML_NEAR_TIE * (ea + eb) ? fmax(ea, eb) : er;
            return;
        }
        case 7: *rv = a < b; break;
        case 8: *rv = a <= b; break;
        case 9: *rv = a > b; break;
        case 10: *rv = a >= b; break;
        case 11: *rv = a == b; break;
        default: *rv = a != b; break;
    }
    *rs = 0.0;
}

// interp::Acc. Reductions: 0 sum, 1 mean, 2 max, 3 min, 4 prod, 5 argmax, 6 argmin.
struct OptAcc {
    int op;
    double value, scale;
    i64 at;
};

__device__ __forceinline__ void opt_acc_init(OptAcc* acc, int op) {
    acc->op = op;
    acc->value = 0.0;
    acc->scale = 0.0;
    acc->at = 0;
}

__device__ void opt_acc_extreme(OptAcc* acc, double v, double e, i64 k, bool max) {
    if (k == 0 || (isnan(v) && !isnan(acc->value))) {
        acc->value = v;
        acc->scale = e;
        acc->at = k;
    } else if (!isnan(acc->value)) {
        const double gap = max ? v - acc->value : acc->value - v;
        const double near = OPTIML_NEAR_TIE * (e + acc->scale);
        if (gap > 0.0) {
            acc->scale = gap <= near ? fmax(e, acc->scale) : e;
            acc->value = v;
            acc->at = k;
        } else if (-gap <= near) {
            acc->scale = fmax(acc->scale, e);
        }
    }
}

__device__ __forceinline__ void opt_acc_add(OptAcc* acc, double v, double e, i64 k) {
    switch (acc->op) {
        case 0:
        case 1:
            acc->value += v;
            acc->scale += e + fabs(v);
            break;
        case 4:
            if (k == 0) {
                acc->value = v;
                acc->scale = e;
            } else {
                const double p = acc->value;
                acc->value = p * v;
                acc->scale = opt_amp(acc->scale, fabs(v)) + opt_amp(fabs(p), e) + fabs(acc->value);
            }
            break;
        case 2:
        case 5: opt_acc_extreme(acc, v, e, k, true); break;
        default: opt_acc_extreme(acc, v, e, k, false); break;
    }
}

__device__ void opt_acc_finish(const OptAcc* acc, i64 n, double* rv, double* rs) {
    switch (acc->op) {
        case 1: {
            const double r = acc->value / (double)n;
            *rv = r;
            *rs = acc->scale / (double)n + fabs(r);
            return;
        }
        case 4:
            if (n == 0) {
                *rv = 1.0;
                *rs = 0.0;
                return;
            }
            break;
        case 5:
        case 6:
            *rv = (double)acc->at;
            *rs = acc->scale;
            return;
        default: break;
    }
    *rv = acc->value;
    *rs = acc->scale;
}

// interp::scan_along, one line per thread: folds the terms a statement's kernel left in (v, s) along the
// scanned axis (n positions, `inner` elements apart), in place. `op` as OptAcc's (sum, prod, max or min).
extern "C" __global__ void __launch_bounds__(256) optiml_ref_scan(double* v, double* s, i64 lines, i64 n,
                                                                  i64 inner, int op, int reverse, int exclusive) {
    for (i64 line = blockIdx.x * (i64)blockDim.x + threadIdx.x; line < lines;
         line += (i64)gridDim.x * blockDim.x) {
        const i64 o = line / inner, i = line % inner;
        OptAcc acc;
        opt_acc_init(&acc, op);
        const double identity = op == 4 ? 1.0 : op == 2 ? -OPT_INF : op == 3 ? OPT_INF : 0.0;
        for (i64 step = 0; step < n; ++step) {
            const i64 j = reverse ? n - 1 - step : step;
            const i64 at = (o * n + j) * inner + i;
            const double tv = v[at], ts = s[at];
            double rv, rs;
            if (exclusive && step == 0) {
                rv = identity;
                rs = 0.0;
            } else if (exclusive) {
                opt_acc_finish(&acc, step, &rv, &rs);
            } else {
                opt_acc_add(&acc, tv, ts, step);
                opt_acc_finish(&acc, step + 1, &rv, &rs);
            }
            if (exclusive) opt_acc_add(&acc, tv, ts, step);
            v[at] = rv;
            s[at] = isnan(rs) ? OPT_INF : rs;
        }
    }
}

// Compares an output of `n` elements with its reference, as `Comparison::check` does on the host (floats) or
// exactly (indices and booleans). `kind`: 0 f32, 1 bf16, 2 f16, 3 i64, 4 i32, 5 bool. A failing element sets
// *first to the smallest failing index; the conditioned elements' squared error and squared reference go to
// partial[2·block] and partial[2·block + 1], summed by the host in block order. Launched with 256 threads.
extern "C" __global__ void __launch_bounds__(256) optiml_ref_compare(
    const void* out, int kind, const double* val, const double* scl, i64 n, double scaled_abs, double abs_tol,
    double forgive, double* partial, u64* first) {
    double diff2 = 0.0, ref2 = 0.0;
    for (i64 e = blockIdx.x * (i64)blockDim.x + threadIdx.x; e < n; e += (i64)gridDim.x * blockDim.x) {
        const double r = val[e];
        bool bad;
        if (kind >= 3) {
            double o;
            if (kind == 3) o = (double)((const long long*)out)[e];
            else if (kind == 4) o = (double)((const int*)out)[e];
            else o = ((const unsigned char*)out)[e] != 0 ? 1.0 : 0.0;
            bad = o != r;
        } else {
            float o;
            if (kind == 0) o = ((const float*)out)[e];
            else {
                const unsigned short h = ((const unsigned short*)out)[e];
                if (kind == 1) o = __uint_as_float((unsigned)h << 16);
                else asm("cvt.f32.f16 %0, %1;" : "=f"(o) : "h"(h));
            }
            bad = optiml_cmp_fails(o, r, scl[e], scaled_abs, abs_tol, forgive, &diff2, &ref2);
        }
        if (bad) atomicMin(first, (u64)e);
    }
    optiml_cmp_partials(diff2, ref2, partial);
}
