// Shared (included as matmul/pow2) by the mixed-precision kernels that scale f32 values into f16's range by a power
// of two: gemm_sm.wgsl and sm_finish.wgsl (rows and columns of a product), the subgroup-matrix attention backward
// (the output gradient). Exact in f32 both ways.

// The power of two 2^e with a largest magnitude (its f32 bits) in [2^(e-1), 2^e), between 2^-126 and 2^126 so that
// its reciprocal is a normal f32 too; 1 for an all-zero row (nothing to scale) and for inf / NaN (left to show).
fn pow2_of(bits: u32) -> f32 {
  let e = bits >> 23u;
  if (bits == 0u || e >= 255u) {
    return 1.0;
  }
  return bitcast<f32>(clamp(e + 1u, 1u, 252u) << 23u);
}
