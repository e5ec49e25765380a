// Scalar helpers for elementwise expressions (kernels include it by name: common/math).

// x^e with PyTorch's results where WGSL's pow (exp2(e * log2(x))) has none: negative bases with integer
// exponents, x^0 = 1 for every x, and 0^e.
fn pow_scalar(x: f32, e: f32) -> f32 {
  if (e == 0.0) {
    return 1.0;
  }
  if (e == 1.0) {
    return x;
  }
  if (e == 2.0) {
    return x * x;
  }
  if (e == 0.5) {
    return sqrt(x);
  }
  if (e == -1.0) {
    return 1.0 / x;
  }
  let r = pow(abs(x), e);
  if (x < 0.0) {
    if (floor(e) != e) {
      return sqrt(x);  // NaN (x < 0), as for a negative base with a fractional exponent
    }
    let half = e * 0.5;
    if (floor(half) != half) {
      return -r;
    }
  }
  return r;
}

fn sigmoid(x: f32) -> f32 {
  // exp(-|x|) never overflows; the two branches are the same function.
  let z = exp(-abs(x));
  if (x >= 0.0) {
    return 1.0 / (1.0 + z);
  }
  return z / (1.0 + z);
}

fn bool_word(b: bool) -> u32 {
  return select(0u, 1u, b);
}
