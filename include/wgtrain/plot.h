// A line plot of loss curves, written as a PNG (zlib-compressed, RGB): axes with tick labels, a light grid, one
// line per series and a legend. Enough to look at a training run without leaving the terminal's machine.
#pragma once

#include <array>
#include <string>
#include <utility>
#include <vector>

namespace wgtrain {

struct PlotSeries {
  std::string label;
  std::vector<std::pair<double, double>> points;  // (x, y), in x order
  std::array<uint8_t, 3> color = {31, 119, 180};
  bool markers = false;  // a dot at each point (for sparse series, such as validation)
};

// Writes `series` (empty ones are skipped) to `path`, atomically. The y range covers every point; x starts at 0.
// Throws Error if the file cannot be written.
void write_line_plot(const std::string& path, const std::string& title, const std::string& x_label,
                     const std::string& y_label, const std::vector<PlotSeries>& series, int width = 900,
                     int height = 540);

}  // namespace wgtrain
