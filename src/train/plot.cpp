// Line plots as PNG: a small raster (lines, dots, 5x7 bitmap text) and a PNG writer over zlib.
#include "wgtrain/plot.h"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>

#include "wgtrain/atomic_file.h"
#include "wgtrain/error.h"

namespace wgtrain {

namespace {

// 5x7 glyphs, one byte per row, bit 4 the leftmost column. Upper case is drawn as lower case.
const uint8_t* glyph(char ch) {
  static const struct {
    char c;
    uint8_t rows[7];
  } kFont[] = {
      {'0', {0x0E, 0x11, 0x13, 0x15, 0x19, 0x11, 0x0E}}, {'1', {0x04, 0x0C, 0x04, 0x04, 0x04, 0x04, 0x0E}},
      {'2', {0x0E, 0x11, 0x01, 0x02, 0x04, 0x08, 0x1F}}, {'3', {0x1F, 0x02, 0x04, 0x02, 0x01, 0x11, 0x0E}},
      {'4', {0x02, 0x06, 0x0A, 0x12, 0x1F, 0x02, 0x02}}, {'5', {0x1F, 0x10, 0x1E, 0x01, 0x01, 0x11, 0x0E}},
      {'6', {0x06, 0x08, 0x10, 0x1E, 0x11, 0x11, 0x0E}}, {'7', {0x1F, 0x01, 0x02, 0x04, 0x08, 0x08, 0x08}},
      {'8', {0x0E, 0x11, 0x11, 0x0E, 0x11, 0x11, 0x0E}}, {'9', {0x0E, 0x11, 0x11, 0x0F, 0x01, 0x02, 0x0C}},
      {'.', {0, 0, 0, 0, 0, 0x0C, 0x0C}},                {'-', {0, 0, 0, 0x1F, 0, 0, 0}},
      {'+', {0, 0x04, 0x04, 0x1F, 0x04, 0x04, 0}},       {':', {0, 0x0C, 0x0C, 0, 0x0C, 0x0C, 0}},
      {'/', {0, 0x01, 0x02, 0x04, 0x08, 0x10, 0}},       {'(', {0x02, 0x04, 0x08, 0x08, 0x08, 0x04, 0x02}},
      {')', {0x08, 0x04, 0x02, 0x02, 0x02, 0x04, 0x08}}, {',', {0, 0, 0, 0, 0x0C, 0x04, 0x08}},
      {'=', {0, 0, 0x1F, 0, 0x1F, 0, 0}},                {'_', {0, 0, 0, 0, 0, 0, 0x1F}},
      {'a', {0, 0, 0x0E, 0x01, 0x0F, 0x11, 0x0F}},       {'b', {0x10, 0x10, 0x16, 0x19, 0x11, 0x11, 0x1E}},
      {'c', {0, 0, 0x0E, 0x10, 0x10, 0x11, 0x0E}},       {'d', {0x01, 0x01, 0x0D, 0x13, 0x11, 0x11, 0x0F}},
      {'e', {0, 0, 0x0E, 0x11, 0x1F, 0x10, 0x0E}},       {'f', {0x06, 0x09, 0x08, 0x1C, 0x08, 0x08, 0x08}},
      {'g', {0, 0x0F, 0x11, 0x11, 0x0F, 0x01, 0x0E}},    {'h', {0x10, 0x10, 0x16, 0x19, 0x11, 0x11, 0x11}},
      {'i', {0x04, 0, 0x0C, 0x04, 0x04, 0x04, 0x0E}},    {'j', {0x02, 0, 0x06, 0x02, 0x02, 0x12, 0x0C}},
      {'k', {0x10, 0x10, 0x12, 0x14, 0x18, 0x14, 0x12}}, {'l', {0x0C, 0x04, 0x04, 0x04, 0x04, 0x04, 0x0E}},
      {'m', {0, 0, 0x1A, 0x15, 0x15, 0x11, 0x11}},       {'n', {0, 0, 0x16, 0x19, 0x11, 0x11, 0x11}},
      {'o', {0, 0, 0x0E, 0x11, 0x11, 0x11, 0x0E}},       {'p', {0, 0, 0x1E, 0x11, 0x1E, 0x10, 0x10}},
      {'q', {0, 0, 0x0D, 0x13, 0x0F, 0x01, 0x01}},       {'r', {0, 0, 0x16, 0x19, 0x10, 0x10, 0x10}},
      {'s', {0, 0, 0x0E, 0x10, 0x0E, 0x01, 0x1E}},       {'t', {0x08, 0x08, 0x1C, 0x08, 0x08, 0x09, 0x06}},
      {'u', {0, 0, 0x11, 0x11, 0x11, 0x13, 0x0D}},       {'v', {0, 0, 0x11, 0x11, 0x11, 0x0A, 0x04}},
      {'w', {0, 0, 0x11, 0x11, 0x15, 0x15, 0x0A}},       {'x', {0, 0, 0x11, 0x0A, 0x04, 0x0A, 0x11}},
      {'y', {0, 0, 0x11, 0x11, 0x0F, 0x01, 0x0E}},       {'z', {0, 0, 0x1F, 0x02, 0x04, 0x08, 0x1F}},
  };
  const char c = (ch >= 'A' && ch <= 'Z') ? static_cast<char>(ch - 'A' + 'a') : ch;
  for (const auto& g : kFont)
    if (g.c == c) return g.rows;
  return nullptr;  // a space, or a character the font lacks
}

using Rgb = std::array<uint8_t, 3>;

struct Canvas {
  int w, h;
  std::vector<uint8_t> px;
  Canvas(int width, int height) : w(width), h(height), px(static_cast<size_t>(width * height * 3), 255) {}

  void set(int x, int y, const Rgb& c) {
    if (x < 0 || y < 0 || x >= w || y >= h) return;
    std::copy(c.begin(), c.end(), px.begin() + (static_cast<size_t>(y) * w + x) * 3);
  }
  void rect(int x0, int y0, int x1, int y1, const Rgb& c) {
    for (int y = y0; y <= y1; ++y)
      for (int x = x0; x <= x1; ++x) set(x, y, c);
  }
  void line(double x0, double y0, double x1, double y1, const Rgb& c, int thick) {
    const int steps = static_cast<int>(std::ceil(std::max(std::fabs(x1 - x0), std::fabs(y1 - y0)))) + 1;
    for (int s = 0; s <= steps; ++s) {
      const double t = static_cast<double>(s) / steps;
      const int x = static_cast<int>(std::lround(x0 + (x1 - x0) * t)), y = static_cast<int>(std::lround(y0 + (y1 - y0) * t));
      rect(x - thick / 2, y - thick / 2, x + (thick - 1) / 2, y + (thick - 1) / 2, c);
    }
  }
  // Text at scale `s` (pixels per font dot); returns its width.
  int text(int x, int y, const std::string& str, const Rgb& c, int s = 2) {
    int cx = x;
    for (char ch : str) {
      if (const uint8_t* g = glyph(ch))
        for (int r = 0; r < 7; ++r)
          for (int col = 0; col < 5; ++col)
            if (g[r] & (0x10 >> col)) rect(cx + col * s, y + r * s, cx + col * s + s - 1, y + r * s + s - 1, c);
      cx += 6 * s;
    }
    return cx - x;
  }
  static int text_width(const std::string& str, int s = 2) { return static_cast<int>(str.size()) * 6 * s; }
};

// About `target` round tick values (1, 2 or 5 times a power of ten) covering [lo, hi].
std::vector<double> ticks(double lo, double hi, int target) {
  const double span = hi - lo;
  if (!(span > 0)) return {lo};
  const double raw = span / target, mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  std::vector<double> out;
  for (double v = std::ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push_back(std::fabs(v) < step * 1e-9 ? 0.0 : v);
  return out;
}

std::string tick_label(double v, double span) {
  char buf[32];
  if (std::fabs(v) >= 1e5 || span >= 1e5)
    std::snprintf(buf, sizeof buf, "%.0fk", v / 1000.0);
  else if (span >= 10)
    std::snprintf(buf, sizeof buf, "%.0f", v);
  else if (span >= 1)
    std::snprintf(buf, sizeof buf, "%.1f", v);
  else
    std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

void put_u32(std::vector<uint8_t>& out, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<uint8_t>(v >> s));
}

void chunk(std::vector<uint8_t>& out, const char* type, const std::vector<uint8_t>& data) {
  put_u32(out, static_cast<uint32_t>(data.size()));
  const size_t at = out.size();
  out.insert(out.end(), type, type + 4);
  out.insert(out.end(), data.begin(), data.end());
  put_u32(out, static_cast<uint32_t>(crc32(0, out.data() + at, static_cast<uInt>(out.size() - at))));
}

std::vector<uint8_t> encode_png(const Canvas& c) {
  std::vector<uint8_t> raw;
  raw.reserve(static_cast<size_t>((c.w * 3 + 1) * c.h));
  for (int y = 0; y < c.h; ++y) {
    raw.push_back(0);  // filter: none
    raw.insert(raw.end(), c.px.begin() + static_cast<size_t>(y) * c.w * 3, c.px.begin() + static_cast<size_t>(y + 1) * c.w * 3);
  }
  uLongf zlen = compressBound(static_cast<uLong>(raw.size()));
  std::vector<uint8_t> z(zlen);
  if (compress2(z.data(), &zlen, raw.data(), static_cast<uLong>(raw.size()), 9) != Z_OK)
    throw Error("plot: zlib could not compress the image");
  z.resize(zlen);
  std::vector<uint8_t> png = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  std::vector<uint8_t> ihdr;
  put_u32(ihdr, static_cast<uint32_t>(c.w));
  put_u32(ihdr, static_cast<uint32_t>(c.h));
  ihdr.insert(ihdr.end(), {8, 2, 0, 0, 0});  // 8-bit RGB, deflate, no filter method, no interlace
  chunk(png, "IHDR", ihdr);
  chunk(png, "IDAT", z);
  chunk(png, "IEND", {});
  return png;
}

}  // namespace

void write_line_plot(const std::string& path, const std::string& title, const std::string& x_label,
                     const std::string& y_label, const std::vector<PlotSeries>& series, int width, int height) {
  if (width < 200 || height < 150) throw ArgumentError("plot: the image must be at least 200 x 150");
  double xmax = 0, ymin = INFINITY, ymax = -INFINITY;
  for (const auto& s : series)
    for (const auto& [x, y] : s.points) {
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      xmax = std::max(xmax, x);
      ymin = std::min(ymin, y);
      ymax = std::max(ymax, y);
    }
  if (!std::isfinite(ymin)) ymin = 0, ymax = 1;
  if (ymax - ymin < 1e-9) ymin -= 0.5, ymax += 0.5;
  const double pad = (ymax - ymin) * 0.05;
  ymin -= pad;
  ymax += pad;
  if (xmax <= 0) xmax = 1;

  const Rgb black = {0, 0, 0}, grid = {225, 225, 225}, grey = {90, 90, 90};
  Canvas c(width, height);
  const int left = 80, right = width - 20, top = 64, bottom = height - 56;
  auto px = [&](double x) { return left + (right - left) * x / xmax; };
  auto py = [&](double y) { return bottom - (bottom - top) * (y - ymin) / (ymax - ymin); };

  for (double v : ticks(ymin, ymax, 6)) {
    const int y = static_cast<int>(std::lround(py(v)));
    c.rect(left, y, right, y, grid);
    const std::string l = tick_label(v, ymax - ymin);
    c.text(left - 8 - Canvas::text_width(l), y - 7, l, grey);
  }
  for (double v : ticks(0, xmax, 8)) {
    const int x = static_cast<int>(std::lround(px(v)));
    c.rect(x, top, x, bottom, grid);
    const std::string l = tick_label(v, xmax);
    c.text(x - Canvas::text_width(l) / 2, bottom + 8, l, grey);
  }
  c.rect(left, top, left, bottom, black);
  c.rect(left, bottom, right, bottom, black);
  c.text((left + right - Canvas::text_width(title, 3)) / 2, 10, title, black, 3);
  c.text((left + right - Canvas::text_width(x_label)) / 2, height - 24, x_label, black);
  c.text(8, top - 22, y_label, black);

  int legend_y = top + 10;
  for (const auto& s : series) {
    if (s.points.empty()) continue;
    for (size_t i = 1; i < s.points.size(); ++i)
      c.line(px(s.points[i - 1].first), py(s.points[i - 1].second), px(s.points[i].first), py(s.points[i].second),
             s.color, 2);
    if (s.markers)
      for (const auto& [x, y] : s.points) {
        const int cx = static_cast<int>(std::lround(px(x))), cy = static_cast<int>(std::lround(py(y)));
        c.rect(cx - 3, cy - 3, cx + 3, cy + 3, s.color);
      }
    const int lx = right - 20 - Canvas::text_width(s.label) - 34;
    c.rect(lx, legend_y + 6, lx + 26, legend_y + 8, s.color);
    c.text(lx + 34, legend_y, s.label, black);
    legend_y += 22;
  }

  const std::vector<uint8_t> png = encode_png(c);
  write_file_atomic(path, std::span<const uint8_t>(png));
}

}  // namespace wgtrain
