// Rows taken by segments of SEG threads, WG / SEG of them to a workgroup (kernels include it by name:
// common/segments; the includer defines WG and SEG). The host sizes the grid with row_grid (ops/common.h).

// The row (or other unit of work) that invocation `lid` of workgroup `wid` takes; the grid may be split over x and
// y (DeviceImpl::grid).
fn segment_index(wid: vec3u, nwg: vec3u, lid: vec3u) -> u32 {
  return (wid.x + wid.y * nwg.x) * (WG / SEG) + lid.x / SEG;
}
