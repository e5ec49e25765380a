// Shared by the tiled backward kernels (included as attention/score_acc): how a score is accumulated. DOT (the
// includer's variant) sums each score as a scalar, else as a vec4 of partial sums added at the end (hsum: from
// attention/params).

{{#DOT}}
alias SA = f32;
fn mac(a: vec4<f32>, b: vec4<f32>, acc: f32) -> f32 {
  return fma(a.w, b.w, fma(a.z, b.z, fma(a.y, b.y, fma(a.x, b.x, acc))));
}
fn total(acc: f32) -> f32 { return acc; }
{{/DOT}}
{{^DOT}}
alias SA = vec4<f32>;
fn mac(a: vec4<f32>, b: vec4<f32>, acc: vec4<f32>) -> vec4<f32> { return fma(a, b, acc); }
fn total(acc: vec4<f32>) -> f32 { return hsum(acc); }
{{/DOT}}
