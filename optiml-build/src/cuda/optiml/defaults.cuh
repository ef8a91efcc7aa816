// optiml: the defaults of the options every matmul template reads, and the names of the element-type codes.
//
// The generator defines every option a candidate needs before the template text; a template compiled on its
// own (the nvcc harnesses under bench/harness) gets these. One place, so the templates cannot drift apart.
//
//   OPTIML_DTYPE       the 16-bit element type: OPTIML_DTYPE_BF16 (default) or OPTIML_DTYPE_F16
//   OPTIML_TRANS_A/B   1: the operand is stored transposed (A as k x m, B as n x k)
//   OPTIML_HAS_ALPHA   1: the product is scaled by alpha
//   OPTIML_HAS_BETA    1: beta * C (the old C) is added
//   OPTIML_HAS_BIAS    1: a bias vector of length n is added to every row
#ifndef OPTIML_DEFAULTS_CUH
#define OPTIML_DEFAULTS_CUH

#define OPTIML_DTYPE_BF16 0
#define OPTIML_DTYPE_F16 1

#ifndef OPTIML_DTYPE
#define OPTIML_DTYPE OPTIML_DTYPE_BF16
#endif
#ifndef OPTIML_TRANS_A
#define OPTIML_TRANS_A 0
#endif
#ifndef OPTIML_TRANS_B
#define OPTIML_TRANS_B 0
#endif
#ifndef OPTIML_HAS_ALPHA
#define OPTIML_HAS_ALPHA 0
#endif
#ifndef OPTIML_HAS_BETA
#define OPTIML_HAS_BETA 0
#endif
#ifndef OPTIML_HAS_BIAS
#define OPTIML_HAS_BIAS 0
#endif

#endif  // OPTIML_DEFAULTS_CUH
