// Sum over the reduced dims of a strided f32 view, times a scale (1 for sum, 1/count for mean).
// The view is split into kept dims (which index the output) and reduced dims, each with its own shape and strides.
// PER_THREAD = true: one thread per output, for short reductions. Otherwise one segment of SEG threads per
// (output, part), WG / SEG of them to a workgroup: the reduced range is cut into `parts` chunks of `chunk`
// elements, each summed by a segment (tree in workgroup memory) into out[o * parts + part]; a second dispatch then
// reduces the parts.
//
// COLUMNS = true, where the outputs lie side by side in x (the kept dims coalesce to one of stride 1: a sum over
// rows, as for a weight's or a bias's gradient): consecutive threads take consecutive outputs, so every load of a
// workgroup is one contiguous run, and each sums `chunk` rows of one `part` into out[part * n_out + o]; the second
// dispatch sums those parts, again side by side. (Segments would read one column each: a stride of a row a lane.)
//
// The last dispatch writes at out_off, and with `accumulate` adds the sum to what out holds there (old + sum): a
// gradient summed straight into a parameter's gradient buffer (rms_norm_backward's weight), no add of its own.
//
// @variant PER_THREAD {true|false} one thread per output (short reductions), else segments of SEG threads
// @variant COLUMNS {true|false} one thread per (output, part), outputs contiguous in x
// @variant SEG {1|2|4|8|16|32|64|128|256} threads per (output, part) segment (1 with PER_THREAD)

const PER_THREAD: bool = {{PER_THREAD}};
const COLUMNS: bool = {{COLUMNS}};
const WG: u32 = 256u;
const SEG: u32 = {{SEG}}u;

{{>common/segments}}

struct Params {
  n_out: u32,
  count: u32,      // reduced elements per output
  parts: u32,
  chunk: u32,
  x_off: u32,
  kept_rank: u32,
  red_rank: u32,
  scale: f32,
  out_off: u32,
  accumulate: u32,
  _pad0: u32,
  _pad1: u32,
  kept_shape: array<vec4<u32>, 2>,
  kept_strides: array<vec4<u32>, 2>,
  red_shape: array<vec4<u32>, 2>,
  red_strides: array<vec4<u32>, 2>,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

{{>common/wgsum}}

fn put(i: u32, v: f32) {
  let at = p.out_off + i;
  if (p.accumulate != 0u) {
    out[at] = out[at] + v;
  } else {
    out[at] = v;
  }
}

fn kept_offset(o: u32) -> u32 {
  var rem = o;
  var off = p.x_off;
  for (var d = p.kept_rank; d > 0u; d = d - 1u) {
    let k = d - 1u;
    let e = p.kept_shape[k / 4u][k % 4u];
    off = off + (rem % e) * p.kept_strides[k / 4u][k % 4u];
    rem = rem / e;
  }
  return off;
}

fn red_offset(r: u32) -> u32 {
  if (p.red_rank == 1u) {
    return r * p.red_strides[0][0];
  }
  var rem = r;
  var off = 0u;
  for (var d = p.red_rank; d > 0u; d = d - 1u) {
    let k = d - 1u;
    let e = p.red_shape[k / 4u][k % 4u];
    off = off + (rem % e) * p.red_strides[k / 4u][k % 4u];
    rem = rem / e;
  }
  return off;
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u,
        @builtin(num_workgroups) nwg: vec3u) {
  let g = wid.x + wid.y * nwg.x;
  if (COLUMNS) {
    let groups_per_part = (p.n_out + WG - 1u) / WG;
    let o = (g % groups_per_part) * WG + lid.x;
    let part = g / groups_per_part;
    if (o < p.n_out && part < p.parts) {
      let begin = part * p.chunk;
      let end = min(p.count, begin + p.chunk);
      var acc = 0.0;
      for (var r = begin; r < end; r = r + 1u) {
        acc = acc + x[p.x_off + o + red_offset(r)];
      }
      put(part * p.n_out + o, acc * p.scale);
    }
    return;
  }
  if (PER_THREAD) {
    // No early return on a per-thread condition: the barriers below must stay in uniform control flow.
    let o = g * WG + lid.x;
    if (o < p.n_out) {
      let base = kept_offset(o);
      var acc = 0.0;
      for (var r = 0u; r < p.count; r = r + 1u) {
        acc = acc + x[base + red_offset(r)];
      }
      put(o, acc * p.scale);
    }
    return;
  }

  // Segment `slot` of this workgroup sums (output, part) `item`; past the last item it adds nothing, but still
  // takes part in the barriers.
  let item = segment_index(wid, nwg, lid);
  let lane = lid.x % SEG;
  let valid = item < p.n_out * p.parts;
  let o = item / p.parts;
  let part = item % p.parts;
  let begin = part * p.chunk;
  let end = select(begin, min(p.count, begin + p.chunk), valid);
  var acc = 0.0;
  if (valid) {
    let base = kept_offset(o);
    for (var r = begin + lane; r < end; r = r + SEG) {
      acc = acc + x[base + red_offset(r)];
    }
  }
  let total = workgroup_sum(lid.x, acc);
  if (valid && lane == 0u) {
    put(item, total * p.scale);
  }
}
